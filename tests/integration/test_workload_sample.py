"""Issue 29 §5: the workload sample a user gives (`--sample`) is kept in the bundle, and
report.md sets what the load sent and got back beside it; without a sample the report states
the default workload's shape. (The fake engine answers a sample's requests; what a sample
holds does not depend on the engine.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from golive.bundle.layout import REPORT_MD, WORKLOAD_SAMPLE, WORKLOAD_SAMPLE_TOKENS
from golive.bundle.store import BundleReader
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.report.workload import workload_section
from golive.results import CheckResult
from golive.traffic.workload import read_sample
from tests.helpers.fakes.gateway import aliasing_gateway
from tests.helpers.fakes.vllm import MODEL, FakeState, fake_vllm
from tests.helpers.record_lines import BARE
from tests.helpers.scenario import NO_FLOOR

SHORT = {
    **NO_FLOOR,
    "capacity.concurrency": 2,
    "capacity.step_duration_s": 1.5,
    "capacity.calibration_s": 1.5,
    "capacity.duration_s": 3.0,
    "capacity.max_context": 256,
    "capacity.answer_probes": False,
}
GOLDEN = Path(__file__).parent.parent / "data/golden-demo"


def _sample(path: Path) -> Path:
    """Three production-shaped requests: one with a tool and a history, two plain."""
    tool = {
        "type": "function",
        "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
    }
    bodies = [
        {
            "messages": [
                {"role": "system", "content": "You help SREs."},
                {"role": "user", "content": "Which pods restarted?"},
                {"role": "assistant", "content": "Let me look."},
                {"role": "user", "content": "Only the checkout ones."},
            ],
            "tools": [tool],
            "max_tokens": 64,
        },
        {"messages": [{"role": "user", "content": "Summarise the incident."}], "max_tokens": 32},
        {"messages": [{"role": "user", "content": "Status?"}], "max_tokens": 16},
    ]
    path.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    return path


async def test_a_users_sample_is_kept_and_compared(tmp_path: Path) -> None:
    """The sample's three bodies are in the bundle as sent (the served model set), and the
    report's table gives the sample's shape, its prompt tokens as the server's /tokenize
    counted them (messages and tools, under the served model), and what the windows sent
    and got back."""
    sample = read_sample(_sample(tmp_path / "sample.jsonl"), "")
    out = tmp_path / "b"
    state = FakeState(tokenize=True)
    async with fake_vllm(state) as url:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs(sample=tuple(sample)))

        config = load_config(None, {"target.url": url, **SHORT})
        await judge(config, out, "capacity", programme, ("capacity",))
    kept = BundleReader(out).jsonl(WORKLOAD_SAMPLE)
    assert [len(b["messages"]) for b in kept] == [4, 1, 1]
    assert {b["model"] for b in kept} != {""}
    report = (out / REPORT_MD).read_text()
    assert "## Workload sent" in report
    assert "your sample (`--sample`), 3 request(s)" in report
    sample_row = next(x for x in report.splitlines() if x.startswith("| your sample"))
    # interpolated: messages 1 / 3.4 / 4, one in three with tools, max_tokens 32 / 57.6 / 64;
    # prompt tokens as the stand-in counts them, 7 + a word each + 1 for the tool: 21, 10, 8
    # (p50 / p90 / p99 interpolated: 10 / 18.8 / 20.78)
    assert "| 3 | 1 / 3 / 4 | 33% | 32 / 58 / 64 | 10 / 19 / 21 | — |" in sample_row
    asked = [r["request"] for r in BundleReader(out).jsonl(WORKLOAD_SAMPLE_TOKENS)]
    assert [len(b["messages"]) for b in asked] == [4, 1, 1]
    assert [bool(b.get("tools")) for b in asked] == [True, False, False]
    assert {b["model"] for b in asked} == {"fake-model"}
    assert all(b in state.tokenized for b in asked)  # the server counted what was saved
    sent_row = next(x for x in report.splitlines() if x.startswith("| sent, answered"))
    count = int(sent_row.split("|")[2])
    assert count > 3  # the windows cycled through the sample
    assert " / 4 |" in sent_row  # the longest request sent has the sample's four messages


async def test_a_server_without_tokenize_leaves_the_sample_uncounted(tmp_path: Path) -> None:
    """A server with no /tokenize (404): one ask, and the sample's prompt tokens are "—" in
    the report, never a guess."""
    sample = read_sample(_sample(tmp_path / "sample.jsonl"), "")
    out = tmp_path / "b"
    async with fake_vllm(FakeState()) as url:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs(sample=tuple(sample)))

        config = load_config(None, {"target.url": url, **SHORT})
        await judge(config, out, "capacity", programme, ("capacity",))
    asked = BundleReader(out).jsonl(WORKLOAD_SAMPLE_TOKENS)
    assert [(r["label"], r["http_status"]) for r in asked] == [("sample-0", 404)]
    report = (out / REPORT_MD).read_text()
    sample_row = next(x for x in report.splitlines() if x.startswith("| your sample"))
    assert "| 32 / 58 / 64 | — | — |" in sample_row


async def test_behind_a_gateway_the_engine_counts_the_sample(tmp_path: Path) -> None:
    """Behind a gateway serving the model as `kimi` (`--engine-url`), the sample is counted by
    the engine, under the engine's own name for the model: the gateway's name is one the
    engine's /tokenize refuses (404), and the report would show no counts."""
    sample = read_sample(_sample(tmp_path / "sample.jsonl"), "")
    out = tmp_path / "b"
    state = FakeState(tokenize=True)
    async with fake_vllm(state) as engine, aliasing_gateway(engine) as gateway:

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_capacity(ctx, CapacityInputs(sample=tuple(sample)))

        config = load_config(None, {"target.url": gateway, "target.engine_url": engine, **SHORT})
        await judge(config, out, "capacity", programme, ("capacity",))
    asked = BundleReader(out).jsonl(WORKLOAD_SAMPLE_TOKENS)
    assert [r["http_status"] for r in asked] == [200, 200, 200]
    assert all(r["url"].startswith(engine) for r in asked)
    assert {r["request"]["model"] for r in asked} == {MODEL}
    sample_row = next(
        x for x in (out / REPORT_MD).read_text().splitlines() if x.startswith("| your sample")
    )
    assert "| 10 / 19 / 21 |" in sample_row


def test_the_default_workload_states_its_shape() -> None:
    """The recorded CPU demo (no sample): its synthetic workload is stated from its effective
    config, and every answer was cut at the 6 tokens it asked for (the demo keeps them short),
    which the table shows."""
    section = workload_section(BundleReader(GOLDEN))
    assert "default synthetic Agent workload (no `--sample`)" in section
    assert "a 40-word system prompt, 1 tool(s), 1 earlier turn(s)" in section
    assert "at most 6 output tokens" in section
    sent_row = next(x for x in section.splitlines() if x.startswith("| sent, answered"))
    assert sent_row.rstrip().endswith("| 100% |")
    assert "your sample" not in section


def test_odd_records_never_stop_the_report(tmp_path: Path) -> None:
    """Answers in any shape (choices not a list, finish_reasons a number, a transport failure
    with status 200, a truncated line) give a table or a line saying it was not built — the
    bundle is sealed after report.md, so the report must never raise."""
    root = tmp_path / "b"
    (root / "requests").mkdir(parents=True)
    ok: dict[str, Any] = {**BARE, "http_status": 200, "failure": None, "problems": []}
    lines = [
        {**ok, "request": {"messages": [1, 2], "max_completion_tokens": 9}, "response": {
            "choices": "oops", "usage": {"prompt_tokens": 5, "completion_tokens": 9}}},
        {**ok, "request": {"messages": 3}, "response": {"finish_reasons": 5}},
        {**ok, "failure": {"kind": "transport", "message": "reset"}, "response": None},
    ]  # fmt: skip
    stream = root / "requests/capacity-sustained.jsonl"
    stream.write_text("".join(json.dumps(x) + "\n" for x in lines))
    section = workload_section(BundleReader(root))
    row = next(x for x in section.splitlines() if x.startswith("| sent, answered"))
    assert "| 2 |" in row  # the transport failure is not an answer
    assert "| 9 / 9 / 9 |" in row  # max_completion_tokens read as the limit asked
    counted = root / "requests/workload-sample-tokens.jsonl"  # a label not of golive's making
    counted.write_text(json.dumps({**ok, "label": "sample-²", "response": {"count": 3}}) + "\n")
    (root / "metrics").mkdir()
    (root / "metrics/workload-sample.jsonl").write_text(json.dumps({"messages": []}) + "\n")
    assert "| your sample (each once) | 1 |" in workload_section(BundleReader(root))
    stream.write_text(stream.read_text() + '{"http_status": 200, "respo')
    broken = workload_section(BundleReader(root))
    assert "## Workload sent" in broken
