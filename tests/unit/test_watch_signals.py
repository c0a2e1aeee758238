"""Issue 29 §8: what the watch reads from the server's own metrics (HTTP status counts, engine
restarts) and which Agent case its tool-call probe runs. Scrapes are the real CPU vLLM 0.32's
(`tests/data/vllm-cpu-0.32`: one process; `tests/data/accepted`: a later process)."""

from __future__ import annotations

from pathlib import Path

import pytest

from golive.config import GoliveConfig
from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.metrics import Snapshot, parse_metrics
from golive.operate.watch_signals import interval_values, probe_case
from golive.profiles import load_profile

DATA = Path(__file__).parents[1] / "data"
BEFORE = DATA / "vllm-cpu-0.32/metrics_qwen_c_before_first.txt"
AFTER = DATA / "vllm-cpu-0.32/metrics_qwen_c_after_first.txt"
OTHER_PROCESS = DATA / "accepted/after-agent.prom"
FIVE_XX = 'http_requests_total{handler="/v1/chat/completions",method="POST",status="5xx"}'


def _scrape(path: Path, edit: str = "", drop: str = "") -> Snapshot:
    lines = [x for x in path.read_text().splitlines() if not (drop and x.startswith(drop))]
    return parse_metrics("\n".join(lines) + "\n" + edit)


def test_one_request_between_two_real_scrapes() -> None:
    """Between the two scrapes the server answered one chat completion (2xx) and the engine
    finished one request; nothing restarted."""
    values = interval_values(_scrape(BEFORE), _scrape(AFTER))
    assert values["http_status"] == {"2xx": 1.0}
    assert values["engine_restart"] == ""
    assert values["errors"] == 0.0
    assert values["running"] == 0.0


def test_server_errors_are_the_servers_own_status_counts() -> None:
    """A 5xx series that grew by 3 is counted as 3 answers of class 5xx (an engine that
    answered HTTP 500 counted no abort: the abort counter is not the error code)."""
    before = _scrape(BEFORE, f"{FIVE_XX} 1.0\n")
    after = _scrape(AFTER, f"{FIVE_XX} 4.0\n")
    values = interval_values(before, after)
    assert values["http_status"] == {"2xx": 1.0, "5xx": 3.0}
    assert values["errors"] == 0.0


def test_a_server_without_http_metrics_is_unmeasured_not_error_free() -> None:
    """No `http_requests_total` at all: the status counts are None, never zeros."""
    values = interval_values(
        _scrape(BEFORE, drop="http_requests"), _scrape(AFTER, drop="http_requests")
    )
    assert values["http_status"] is None


def test_a_new_engine_process_is_a_restart() -> None:
    """Two real processes' scrapes: the start time moved. Without the start-time series, the
    counters going back (a new process counts from zero) say the same."""
    moved = interval_values(_scrape(OTHER_PROCESS), _scrape(AFTER))["engine_restart"]
    assert moved.startswith("process start time moved from 1795995212 to 1795976958")
    reset = interval_values(
        _scrape(OTHER_PROCESS, drop="process_start_time"), _scrape(AFTER, drop="process_start_")
    )["engine_restart"]
    assert reset.startswith("counter vllm:request_success_total went back from ")
    assert interval_values(_scrape(AFTER), _scrape(AFTER))["engine_restart"] == ""


def test_the_first_scrape_gives_only_gauges() -> None:
    """The first interval has nothing to compare with: no rates, no restart claimed."""
    values = interval_values(None, _scrape(AFTER))
    assert set(values) == {"running", "waiting", "kv_usage"}
    assert interval_values(None, None) == {}


def _config(**watch: object) -> GoliveConfig:
    return load_config(None, {f"watch.{k}": v for k, v in watch.items()})


@pytest.mark.parametrize(
    ("profile", "watch", "case"),
    [
        ("generic", {}, "one_arg.required"),
        # Kimi K3's main Agent path is tool_choice=auto: the profile's first critical call case
        ("kimi-k3", {}, "one_arg.auto"),
        ("generic", {"critical_probe": "nested.required"}, "nested.required"),
        ("kimi-k3", {"critical_probe": "no_call"}, "no_call"),
    ],
)
def test_the_probe_runs_the_critical_workflow(
    profile: str, watch: dict[str, object], case: str
) -> None:
    """The tool probe's case: the one named, else the profile's critical calling case."""
    assert probe_case(_config(**watch), load_profile(profile)).name == case


def test_a_user_schema_case_and_an_unknown_name(tmp_path: Path) -> None:
    """A case of the user's schema file can be the probe; a name that is no case is refused,
    naming the key and the choices."""
    tools = tmp_path / "tools.yaml"
    tools.write_text(
        "tools:\n  - function:\n      name: refund_order\n      parameters:\n"
        "        type: object\n        properties: {order_id: {type: string}}\n"
        "        required: [order_id]\n"
    )
    config = load_config(
        None, {"agent.schemas_file": str(tools), "watch.critical_probe": "schema.refund_order"}
    )
    case = probe_case(config, load_profile("generic"))
    assert case.name == "schema.refund_order"
    assert "refund_order" in case.tool_schemas
    with pytest.raises(ConfigError, match=r"watch.critical_probe: no Agent case 'refund'.*no_call"):
        probe_case(_config(critical_probe="refund"), load_profile("generic"))
