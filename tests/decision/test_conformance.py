"""Decision conformance: each scenario is a bundle golive judges, with the outcome and the
rule written from the checklist (its docstring quotes the sentence it enforces), never
from the code's output. Bundles come from real runs (the CPU demo, vLLM 0.24 on two H200s),
real captured logs and node files, and their mutations (`bundles.py`)."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from golive.checks.cache.judge import reuse_result
from golive.checks.cache.rules import CacheStep
from golive.checks.capacity.collect import classified
from golive.checks.capacity.context_rules import (
    LongOutcome,
    LongStep,
    classify_long_input,
    context_saturation,
)
from golive.checks.capacity.rules import (
    StabilityPolicy,
    classify_concurrency,
)
from golive.checks.capacity.step_stats import StepStats
from golive.checks.capacity.windows import (
    classify_sustained,
    trend,
)
from golive.results import CheckClass, CheckResult, Status
from tests.decision.bundles import (
    CPU_LOG,
    DATA,
    GPU,
    add,
    demo_checks,
    drop,
    env,
    fired,
    json_edit,
    mutate,
    proven,
    recorded,
    sealed,
    write,
)
from tests.helpers import nccl_logs
from tests.helpers.nccl_logs import with_nccl_before_ready

CHECKLIST = (DATA / "checklist.txt").read_text()
PROFILE = str(DATA / "profiles/h200x2-tp2.yaml")
DIGEST = "sha256:" + "ab" * 32
IMAGE = f"vllm/vllm-openai:v0.24.0@{DIGEST}"
HOST, CONTAINER, GPU_LOG = GPU / "host-h200x2.json", GPU / "container.json", GPU / "startup.log"

Verdict = dict[str, Any]
Build = Callable[[Path], Awaitable[Verdict] | Verdict]

# The scenarios seal real runs' checks without the evidence behind them: the decision rules
# are what they test. golive decide cannot agree with such a bundle, and must never re-derive
# it to a better outcome (tests/conftest.py).
pytestmark = pytest.mark.synthetic_checks


@dataclass(frozen=True)
class Expect:
    outcome: str
    rule: str | None  # None: no rule fires
    cites: tuple[str, ...] = ()


SCENARIOS: list[tuple[Build, Expect]] = []


def scenario(outcome: str, rule: str | None, *cites: str) -> Callable[[Build], Build]:
    def register(build: Build) -> Build:
        SCENARIOS.append((build, Expect(outcome, rule, cites)))
        return build

    return register


async def changed(tmp: Path, check_id: str, **changes: Any) -> Verdict:
    """The demo with every check passed but one, changed as given."""
    return await sealed(tmp / "b", mutate(proven(demo_checks()), check_id, **changes))


def _gpu_env(
    tmp: Path, *extra: str, host: Path = HOST, container: Path = CONTAINER, confirmed: bool = True
) -> Verdict:
    """`golive env` on the H200 capture under its team's profile. The captured container ran
    no image (a venv), so where `confirmed` its facts get the digest `golive env collect
    --container --image IMAGE` records: the image the profile asserts is then the one running."""
    facts = json.loads(container.read_text())
    if confirmed and not facts.get("image_digests"):
        facts |= {
            "image": IMAGE.split("@", maxsplit=1)[0],
            "image_digests": [f"vllm/vllm-openai@{DIGEST}"],
        }
        container = write(tmp / "container-with-image.json", json.dumps(facts))
    argv = ["--profile", PROFILE, "--host-info", str(host), "--container-info", str(container)]
    if "--log" not in extra:
        argv += ["--log", str(GPU_LOG)]
    if "--image" not in extra:
        argv += ["--image", IMAGE]
    return env(tmp / "b", *argv, *extra)


def _host(tmp: Path, name: str, **changes: Any) -> Path:
    return json_edit(HOST, tmp / f"{name}.json", node=name, **changes)


def _chk(cid: str, cls: CheckClass, status: Status, **m: Any) -> CheckResult:
    return CheckResult(cid, cls, True, status, f"{cid} {status}", m)


# -- the version chain, from captured files -------------------------------------------------


@scenario("observe-with-limits", "warnings-observed", "startup.log")
def chain_of_the_h200_capture(tmp: Path) -> Verdict:
    """ "Check for CUDA initialization errors, NCCL failures, missing kernels, unsupported
    architecture messages, and fallback paths." — the real H200 log: every link agrees, but
    the fd limit could not be raised and Triton compiled kernels on live requests: watched."""
    return _gpu_env(tmp)


def _first_init() -> str:
    """The H200 capture's first initialization log, with the fd limit raised (no ulimit
    warning)."""
    lines = GPU_LOG.read_text().splitlines()
    ready = next(i for i, x in enumerate(lines) if "Starting vLLM server on" in x)
    return "\n".join(x for x in lines[: ready + 1] if "Found ulimit" not in x)


@scenario("section-passed", "section-only")
def chain_coherent_once_the_warnings_are_fixed(tmp: Path) -> Verdict:
    """ "the image, runtime, host driver, and startup path must describe one coherent
    environment." — the same host, container and first initialization log, with the fd limit
    raised (no ulimit warning): every link passes, and a chain alone is a section."""
    return _gpu_env(tmp, "--log", str(write(tmp / "first-init.log", _first_init())))


@scenario("section-passed", "section-only")
def nccl_on_sockets_inside_one_host(tmp: Path) -> Verdict:
    """ "Check for CUDA initialization errors, NCCL failures, missing kernels, unsupported
    architecture messages, and fallback paths." — the real NCCL lines of two H200s on one
    host (no IB device, `Using network Socket`, the GPUs on P2P/CUMEM) in that log: on one
    node NCCL's network carries nothing, so it is no fallback: every link passes."""
    log = with_nccl_before_ready(_first_init(), nccl_logs.one_host())
    return _gpu_env(tmp, "--log", str(write(tmp / "nccl-one-host.log", log)))


@scenario("rebuild", "environment-mismatch", "environment.nccl_transport")
def nccl_between_nodes_on_sockets(tmp: Path) -> Verdict:
    """ "Check Fabric Manager and interconnect-related services where the topology requires
    them." — the same capture across two H200 nodes (rank 1 on vm2, NCCL's nNodes 2): NCCL
    finds no IB device and sends the traffic between the nodes over TCP sockets. The
    deployment is built without its fabric."""
    log = with_nccl_before_ready(_first_init(), nccl_logs.two_nodes())
    second = _host(tmp, "vm2")
    return _gpu_env(
        tmp, "--log", str(write(tmp / "nccl-two-nodes.log", log)), "--host-info", str(second)
    )


@scenario("rebuild", "environment-mismatch", "environment.nccl_transport")
def container_keeps_nccl_off_the_fabric(tmp: Path) -> Verdict:
    """ "Check Fabric Manager and interconnect-related services where the topology requires
    them." — an engine of TP=4 over two nodes of two H200s, whose serving container sets
    NCCL_IB_DISABLE=1: whatever the log shows, NCCL is kept off IB between the nodes."""
    facts = json.loads(CONTAINER.read_text())
    facts["environment"] = {**facts["environment"], "NCCL_IB_DISABLE": "1"}
    container = write(tmp / "ctr-ib-off.json", json.dumps(facts))
    log = write(tmp / "tp4-init.log", nccl_logs.spanning_layout(_first_init()))
    return _gpu_env(
        tmp, "--log", str(log), "--host-info", str(_host(tmp, "vm2")), container=container
    )


@scenario("hold", "missing-evidence", "environment.nccl_transport")
def two_nodes_without_nccl_lines(tmp: Path) -> Verdict:
    """ "GPU count, topology, parallel settings, and interconnect settings are recorded." —
    an engine of TP=4 over two nodes of two H200s, and a log with no NCCL line (NCCL_DEBUG
    was not INFO): the network between them is not recorded. Not a pass, and, since the
    missing lines may hide sockets (a rebuild), not better than that: a hold until measured."""
    log = write(tmp / "tp4-init.log", nccl_logs.spanning_layout(_first_init()))
    return _gpu_env(tmp, "--log", str(log), "--host-info", str(_host(tmp, "vm2")))


@scenario("rebuild", "environment-mismatch", "environment.host_driver")
def r575_host(tmp: Path) -> Verdict:
    """ "an older R575 host should not be treated as equivalent merely because nvidia-smi
    displays a CUDA capability line." """
    host = _host(
        tmp,
        "node-r575",
        driver_version="575.57.08",
        proc_driver_version="575.57.08",
        cuda_driver_version="12.9",
    )
    return _gpu_env(tmp, host=host)


@scenario("rebuild", "environment-mismatch", "environment.host_driver")
def mixed_driver_families(tmp: Path) -> Verdict:
    """ "Verify that every node in a multi-node deployment uses the expected driver family." """
    old = _host(tmp, "node-b", driver_version="575.57.08", proc_driver_version="575.57.08")
    return _gpu_env(tmp, "--host-info", str(old))


@scenario("rebuild", "environment-mismatch", "environment.host_driver")
def kernel_module_and_nvml_disagree(tmp: Path) -> Verdict:
    """ "the image, runtime, host driver, and startup path must describe one coherent
    environment." — a driver upgraded without a reboot: /proc says R575, NVML R580."""
    return _gpu_env(tmp, host=_host(tmp, "node-a", proc_driver_version="575.57.08"))


@scenario("rebuild", "environment-mismatch", "environment.container_cuda")
def container_built_for_cuda_12(tmp: Path) -> Verdict:
    """ "Rebuild the environment: CUDA 13, the NVIDIA R580 driver family, the image, the vLLM
    build, or the container runtime does not match the supported chain." """
    container = json_edit(CONTAINER, tmp / "ctr.json", torch_cuda="12.8", cudart_version=12080)
    return _gpu_env(tmp, container=container)


@scenario("rebuild", "environment-mismatch", "environment.vllm_version")
def container_runs_a_dev_build(tmp: Path) -> Verdict:
    """ "If the host has R580 but the container was built from an untracked custom branch,
    the deployment is not equivalent to the official recipe." """
    container = json_edit(CONTAINER, tmp / "ctr.json", vllm_version="0.24.0.dev12+gabc1234")
    return _gpu_env(tmp, container=container)


@scenario("rebuild", "environment-mismatch", "environment.vllm_version")
def vllm_older_than_the_kimi_recipe(tmp: Path) -> Verdict:
    """ "Version or image mismatch: rebuild." — vLLM 0.24 under the Kimi K3 profile (0.27.1+)."""
    return env(
        tmp / "b",
        "--profile",
        "kimi-k3",
        "--log",
        str(GPU_LOG),
        "--container-info",
        str(CONTAINER),
        "--host-info",
        str(HOST),
    )


@scenario("rebuild", "environment-mismatch", "environment.image")
def image_digest_is_not_the_running_one(tmp: Path) -> Verdict:
    """ "Record the exact image tag and digest." — the digest given is not the container's."""
    running = ["vllm/vllm-openai@sha256:" + "cd" * 32]
    return _gpu_env(tmp, container=json_edit(CONTAINER, tmp / "c.json", image_digests=running))


@scenario("hold", "missing-evidence", "environment.image")
def image_without_a_digest(tmp: Path) -> Verdict:
    """ "Record the exact image tag and digest." — a tag alone cannot be rolled back to."""
    return _gpu_env(tmp, "--image", "vllm/vllm-openai:v0.24.0")


@scenario("hold", "missing-evidence", "environment.image")
def image_only_as_the_operator_typed_it(tmp: Path) -> Verdict:
    """ "Record the exact image tag and digest." — the profile names the image, but nothing
    the deployment said confirms the digest typed with --image: no container's digest, no
    pod's imageID. The claim is not the evidence (issue 29)."""
    return _gpu_env(tmp, confirmed=False)


@scenario("hold", "missing-evidence", "startup.parsers")
def log_cut_before_the_args_line(tmp: Path) -> Verdict:
    """ "Record whether the engine enabled the intended tool-call and reasoning parsers." — a
    log without the `non-default args` line does not say: hold for the log, not rebuild."""
    lines = GPU_LOG.read_text().splitlines()
    log = write(tmp / "cut.log", "\n".join(x for x in lines if "non-default args" not in x))
    return _gpu_env(tmp, "--log", str(log))


@scenario("hold", "missing-evidence", "environment.container_cuda")
def torch_does_not_import_in_the_probe(tmp: Path) -> Verdict:
    """ "CUDA 13 is confirmed inside the container." — a probe where torch failed to import
    confirms nothing, and is not a CPU build either."""
    broken = json_edit(
        CONTAINER,
        tmp / "ctr.json",
        torch_version=None,
        torch_cuda=None,
        errors=["import torch failed: libcudart.so.13: cannot open shared object file"],
    )
    return _gpu_env(tmp, container=broken)


@scenario("rebuild", "environment-mismatch", "startup.log")
def nccl_failure_at_startup(tmp: Path) -> Verdict:
    """ "Check for CUDA initialization errors, NCCL failures, missing kernels, unsupported
    architecture messages, and fallback paths." — the real NCCL failure log appended."""
    nccl = (DATA / "gpu-h200-x2/nccl_fail.log").read_text()
    log = write(tmp / "nccl.log", GPU_LOG.read_text() + "\n" + nccl)
    return _gpu_env(tmp, "--log", str(log))


@scenario("rebuild", "environment-mismatch", "startup.log")
def cuda_oom_while_loading(tmp: Path) -> Verdict:
    """ "Startup OOM: correct the environment or topology." — the real CUDA OOM message."""
    oom = (DATA / "gpu-h200-x2/torch_oom_message.txt").read_text()
    log = write(tmp / "oom.log", GPU_LOG.read_text() + "\n" + oom)
    return _gpu_env(tmp, "--log", str(log))


@scenario("hold", "missing-evidence", "environment.host_driver")
def no_host_evidence(tmp: Path) -> Verdict:
    """ "Record the actual NVIDIA driver version from the host." — none was given."""
    argv = ["--profile", PROFILE, "--container-info", str(CONTAINER), "--log", str(GPU_LOG)]
    return env(tmp / "b", *argv, "--image", IMAGE)


@scenario("rebuild", "environment-mismatch", "startup.parallel")
def started_with_another_parallel_layout(tmp: Path) -> Verdict:
    """ "Confirm that the selected tensor, expert, or data parallel settings are the ones used
    during testing." — tested with TP=4, the engine started with TP=2."""
    config = write(tmp / "golive.yaml", "environment:\n  parallel: {tp: 4}\n")
    return _gpu_env(tmp, "--config", str(config))


@scenario("rebuild", "environment-mismatch", "startup.parsers")
def started_with_another_tool_parser(tmp: Path) -> Verdict:
    """ "Record whether the engine enabled the intended tool-call and reasoning parsers." """
    log = write(
        tmp / "parser.log",
        GPU_LOG.read_text().replace(
            "'tool_call_parser': 'hermes'", "'tool_call_parser': 'mistral'"
        ),
    )
    return _gpu_env(tmp, "--log", str(log))


@scenario("observe-with-limits", "warnings-observed", "environment.vllm_version")
def vllm_version_from_one_source(tmp: Path) -> Verdict:
    """ "Save the vLLM package version and the model-serving command." — the CPU log alone
    names the version; nothing corroborates it, so it is a watched warning, not a pass."""
    return env(tmp / "b", "--log", str(CPU_LOG))


# -- the whole programme: the real CPU demo and its mutations ---------------------------------


@scenario("observe-with-limits", "agent-feature-limited", "agent.one_arg.auto")
async def demo_as_recorded(tmp: Path) -> Verdict:
    """ "Non-critical, bounded Agent defect: observe with limits." — the real demo: Qwen with
    hermes writes auto tool calls into content."""
    verdict = await sealed(tmp / "b", demo_checks())
    assert "environment.host_driver" in fired(verdict)["non-critical-unproven"]
    return verdict


@scenario("go-live", None)
async def demo_with_every_check_passed(tmp: Path) -> Verdict:
    """ "Go live: The container, vLLM build, CUDA runtime, host driver, memory behavior, prefix
    caching, and Agent interface all pass with saved evidence." """
    return await sealed(tmp / "b", proven(demo_checks()))


@scenario("observe-with-limits", "non-critical-unproven", "environment.host_driver")
async def one_non_critical_gap(tmp: Path) -> Verdict:
    """ "Go live: The container, vLLM build, CUDA runtime, host driver, memory behavior, prefix
    caching, and Agent interface all pass with saved evidence." — host driver unmeasured."""
    return await changed(tmp, "environment.host_driver", status=Status.NO_DATA)


@scenario("hold", "critical-failure", "smoke.text_stream")
async def streamed_text_fails(tmp: Path) -> Verdict:
    """ "A running process or one successful request is not enough." """
    return await changed(tmp, "smoke.text_stream", status=Status.FAIL)


@scenario("hold", "critical-failure", "cache.prefix_reuse")
async def cache_not_accepted(tmp: Path) -> Verdict:
    """ "Prefix cache flag present but no measured reuse: fix the cache test or runtime before
    approval." """
    return await changed(tmp, "cache.prefix_reuse", status=Status.FAIL)


@scenario("hold", "missing-evidence", "cache.prefix_reuse")
async def cache_unmeasured(tmp: Path) -> Verdict:
    """ "This means a visible launch flag is only the first check. It does not prove that
    production prompts are being reused." """
    return await changed(tmp, "cache.prefix_reuse", status=Status.NO_DATA)


def _death(concurrency: int, need: int | None = 8, preempted: float | None = 12) -> CheckResult:
    """The engine terminated under sustained load (classified by golive's own rule), having
    preempted requests (its KV cache ran out), where production needs `need`."""
    result = classify_sustained(
        None, [], 0, 40, True, concurrency, preemptions=preempted, required_concurrency=need
    )
    return classified("capacity.sustained", result, {}, ())


@scenario("expand-capacity", "capacity-exhausted", "capacity.sustained")
async def sustained_death_on_a_proven_chain(tmp: Path) -> Verdict:
    """ "Sustained OOM after controlled limits: expand capacity or redesign the deployment." —
    the KV cache ran out (preemptions) and the engine died at 4, held to 2 that production's
    stated 8 is above."""
    return await sealed(tmp / "b", add(drop(proven(demo_checks()), "capacity.sus"), _death(4)))


@scenario("observe-with-limits", "capacity-limited", "capacity.sustained")
async def sustained_death_with_no_stated_need(tmp: Path) -> Verdict:
    """ "Limit traffic: The service is stable only under a lower, documented concurrency
    ceiling." — the same death with no production need stated: a limit to observe, not GPUs
    to buy."""
    checks = add(drop(proven(demo_checks()), "capacity.sus"), _death(4, need=None))
    verdict = await sealed(tmp / "b", checks)
    assert verdict["limits"]["max_concurrency"] == 2
    return verdict


@scenario("observe-with-limits", "capacity-limited", "capacity.sustained")
async def sustained_death_without_saturation(tmp: Path) -> Verdict:
    """ "Expand capacity: OOM or queue collapse continues after reasonable context and
    concurrency controls." — a death with neither preemption nor a waiting queue is no
    evidence of exhausted capacity, whatever production needs: held to the lower step."""
    checks = add(drop(proven(demo_checks()), "capacity.sus"), _death(4, preempted=0))
    verdict = await sealed(tmp / "b", checks)
    assert verdict["limits"]["max_concurrency"] == 2
    return verdict


@scenario("hold", "capacity-unattributed", "capacity.sustained")
async def sustained_death_on_an_unproven_chain(tmp: Path) -> Verdict:
    """ "Expand or redesign capacity: The environment is compatible, but sustained load causes
    OOM, queue growth, communication stalls, or unstable processes." — compatible is not
    shown: the version is unknown, so expand-capacity cannot be concluded."""
    checks = add(drop(proven(demo_checks()), "capacity.sus"), _death(4))
    checks = mutate(checks, "environment.vllm_version", status=Status.NO_DATA)
    return await sealed(tmp / "b", checks)


def _step(c: int, **kw: Any) -> StepStats:
    base: dict[str, Any] = {
        "completed": 10,
        "errors": 0,
        "wall_s": 20.0,
        "e2e_p50_s": 4.0,
        "e2e_p95_s": 4.8,
        "ttft_p95_s": 1.0,
        "queue_mean_s": 0.01,
        "max_waiting": 0,
        "max_running": c,
        "preemptions": 0,
    }
    return StepStats(c, **{**base, **kw})


async def _ramp(tmp: Path, *steps: StepStats) -> Verdict:
    result = classify_concurrency(list(steps), StabilityPolicy())
    check = classified("capacity.concurrency", result, {"ceiling": result.ceiling}, ())
    checks = add(drop(proven(demo_checks()), "capacity.concurrency"), check)
    return await sealed(tmp / "b", checks)


@scenario("observe-with-limits", "capacity-limited", "capacity.concurrency")
async def queue_grows_past_concurrency_two(tmp: Path) -> Verdict:
    """ "Limit traffic: The service is stable only under a lower, documented concurrency
    ceiling." """
    verdict = await _ramp(tmp, _step(1), _step(2), _step(4, queue_mean_s=3.0, max_waiting=3))
    assert verdict["limits"]["max_concurrency"] == 2
    return verdict


@scenario("observe-with-limits", "capacity-limited", "capacity.concurrency")
async def death_after_a_stable_step(tmp: Path) -> Verdict:
    """ "Limit traffic: The service is stable only under a lower, documented concurrency
    ceiling." — the engine died at 4 after 2 was stable: the envelope is 2, not expand."""
    verdict = await _ramp(tmp, _step(1), _step(2), _step(4, engine_died=True))
    assert verdict["limits"]["max_concurrency"] == 2
    return verdict


@scenario("hold", "first-step-failure", "capacity.concurrency")
async def death_at_the_first_step(tmp: Path) -> Verdict:
    """ "Expand capacity: OOM or queue collapse continues after reasonable context and
    concurrency controls." — it dies at concurrency 1 on a proven chain: no control was
    tried and no load was ever served, so nothing shows that capacity is what is short."""
    return await _ramp(tmp, _step(1, engine_died=True))


@scenario("hold", "first-step-failure", "capacity.concurrency")
async def http_500_at_concurrency_one(tmp: Path) -> Verdict:
    """ "Expand or redesign capacity: The environment is compatible, but sustained load causes
    OOM, queue growth, communication stalls, or unstable processes." — every tool-result
    request answered HTTP 500 at concurrency 1: no load at all, a server defect; the finding
    quotes the server and names the request class."""
    detail = "first: server-error HTTP 500 on a tool-result request: 'boom'; failed: 6 server-error"
    failing = _step(1, errors=6, completed=14, failure_detail=detail)
    verdict = await _ramp(tmp, failing)
    ramp = next(c for c in verdict["checks"] if c["id"] == "capacity.concurrency")
    assert "HTTP 500 on a tool-result request: 'boom'" in ramp["summary"]
    assert "max_concurrency" not in verdict["limits"]
    return verdict


@scenario("expand-capacity", "capacity-exhausted", "capacity.concurrency")
async def queue_collapse_below_the_stated_need(tmp: Path) -> Verdict:
    """ "Expand capacity: OOM or queue collapse continues after reasonable context and
    concurrency controls." — stable to 2, the engine's queue grows at 4 (its own gauges),
    and production needs 8 (capacity.required_concurrency)."""
    steps = [_step(1), _step(2), _step(4, queue_mean_s=3.0, max_waiting=3, mean_waiting=2.0)]
    result = classify_concurrency(steps, StabilityPolicy(required_concurrency=8))
    check = classified("capacity.concurrency", result, {"ceiling": result.ceiling}, ())
    checks = add(drop(proven(demo_checks()), "capacity.concurrency"), check)
    verdict = await sealed(tmp / "b", checks, settings={"capacity.required_concurrency": 8})
    # "document memory assumptions ... and fallback capacity before requesting additional
    # resources": the request, sized from the ceiling (2) and the stated need (8, +20%)
    request = json.loads((tmp / "b/capacity-request.json").read_text())
    figures = {f["name"]: f["value"] for f in request["figures"]}
    assert (figures["ceiling_concurrency"], figures["required_concurrency"]) == (2, 8)
    assert figures["replicas_needed"] == 5  # ceil(8 x 1.2 / 2)
    assert figures["fallback_concurrency"] == 1
    assert figures["gpus_needed"] is None  # these checks carry no startup log to count GPUs
    assert "## Capacity request" in (tmp / "b/report.md").read_text()
    assert "<h3>Capacity request</h3>" in (tmp / "b/report.html").read_text()
    return verdict


@scenario("hold", "critical-failure", "capacity.concurrency")
async def http_4xx_under_load_is_configuration(tmp: Path) -> Verdict:
    """ "Expand or redesign capacity: The environment is compatible, but sustained load causes
    OOM, queue growth, communication stalls, or unstable processes." — a 400 for a field the
    server does not enable is none of these: a configuration finding, never expand."""
    refused = _step(1, errors=10, completed=0, refused=10, refused_detail="HTTP 400: json_schema")
    return await _ramp(tmp, refused)


@scenario("hold", "engine-stalled", "capacity.concurrency")
async def engine_stalled_with_health_200(tmp: Path) -> Verdict:
    """ "Expand or redesign capacity: The environment is compatible, but sustained load causes
    OOM, queue growth, communication stalls, or unstable processes." — nothing came back for
    25 s while /health said 200: a hung engine is a software fault to fix first, not a
    reason to buy capacity."""
    stalled = _step(2, errors=16, completed=4, stall="engine stalled: no byte for 25.0 s")
    verdict = await _ramp(tmp, _step(1), stalled)
    assert "max_concurrency" not in verdict["limits"]
    return verdict


@scenario("hold", "missing-evidence", "capacity.concurrency")
async def no_engine_gauges(tmp: Path) -> Verdict:
    """ "Observe weight memory, KV or hybrid cache memory, request queue time, running-request
    count, completed-request rate, and process restarts." — a /metrics without vLLM's gauges
    measured none of it: no_data, never 0."""
    blind = _step(1, max_running=None, max_waiting=None, queue_mean_s=None)
    return await _ramp(tmp, blind)


@scenario("observe-with-limits", "capacity-limited", "capacity.concurrency")
async def preemptions_at_concurrency_two(tmp: Path) -> Verdict:
    """ "Track whether latency rises while throughput remains flat, whether cached blocks are
    evicted excessively, and whether the process recovers after rejected requests." """
    verdict = await _ramp(tmp, _step(1), _step(2, preemptions=6))
    assert verdict["limits"]["max_concurrency"] == 1
    return verdict


@scenario("hold", "missing-evidence", "capacity.sustained")
async def sustained_with_two_completions(tmp: Path) -> Verdict:
    """ "A sustained run long enough to expose memory growth and queue behavior." — two
    completions are not long enough."""
    result = classify_sustained(trend([]), [0.1], 0, 2, False, 4)
    check = classified("capacity.sustained", result, {}, ())
    return await sealed(tmp / "b", add(drop(proven(demo_checks()), "capacity.sus"), check))


@scenario("observe-with-limits", "capacity-limited", "capacity.long_input")
async def context_above_the_envelope(tmp: Path) -> Verdict:
    """ "Adjust configuration: The environment remains stable, but context or concurrency is
    clearly above the intended service envelope." """
    steps = [
        LongStep(512, LongOutcome.ACCEPTED),
        LongStep(1024, LongOutcome.REJECTED, "maximum context length"),
    ]
    check = classified("capacity.long_input", classify_long_input(steps, 1024, 512), {}, ())
    verdict = await sealed(tmp / "b", add(drop(proven(demo_checks()), "capacity.long"), check))
    assert verdict["limits"]["max_context"] == 512
    return verdict


_OOM = "CUDA out of memory. Tried to allocate 2.50 GiB"


def _oom_ladder(need: int | None, detail: str = _OOM) -> CheckResult:
    """Inputs of 2,048 and 4,096 tokens served, the 8,192-token one failed with HTTP 500 and
    the engine lived on (so the ramp and sustained window ran; max_model_len 16,384), the
    answer saying `detail`; production needs `need` tokens."""
    steps = [
        LongStep(2048, LongOutcome.ACCEPTED),
        LongStep(4096, LongOutcome.ACCEPTED),
        LongStep(8192, LongOutcome.FAILED, f"HTTP 500: {detail}"),
    ]
    oom = context_saturation(steps, 16384, None)
    result = classify_long_input(steps, 16384, 16384, need, oom)
    served = {f"step_{s.context_tokens}": s.outcome.value for s in steps}
    return classified("capacity.long_input", result, served, ())


@scenario("expand-capacity", "capacity-exhausted", "capacity.long_input")
async def out_of_memory_below_the_context_production_needs(tmp: Path) -> Verdict:
    """ "Expand capacity: OOM or queue collapse continues after reasonable context and
    concurrency controls." — 4,096 tokens served, an 8,192-token input ran the engine out of
    memory (its answer says so), and production needs 8,192 (capacity.required_context): the capacity request
    names the context served, the need and the KV memory one such request takes."""
    checks = add(drop(proven(demo_checks()), "capacity.long"), _oom_ladder(8192))
    verdict = await sealed(tmp / "b", checks, settings={"capacity.required_context": 8192})
    long_input = next(c for c in verdict["checks"] if c["id"] == "capacity.long_input")
    assert "CUDA out of memory" in long_input["summary"], long_input["summary"]
    request = json.loads((tmp / "b/capacity-request.json").read_text())
    figures = {f["name"]: f["value"] for f in request["figures"]}
    assert (figures["ceiling_context"], figures["required_context"]) == (4096, 8192)
    assert "kv_memory_for_required_context" in figures
    return verdict


@scenario("observe-with-limits", "capacity-limited", "capacity.long_input")
async def out_of_memory_with_no_stated_context_need(tmp: Path) -> Verdict:
    """ "Adjust configuration: The environment remains stable, but context or concurrency is
    clearly above the intended service envelope." — the same out-of-memory failure with no
    context need stated: the envelope is the 4,096 tokens served, not GPUs to buy."""
    checks = add(drop(proven(demo_checks()), "capacity.long"), _oom_ladder(None))
    verdict = await sealed(tmp / "b", checks)
    assert verdict["limits"]["max_context"] == 4096
    assert not (tmp / "b/capacity-request.json").exists()
    return verdict


@scenario("observe-with-limits", "capacity-limited", "capacity.long_input")
async def long_input_death_without_out_of_memory(tmp: Path) -> Verdict:
    """ "Do not approve a deployment from the final error line alone." — a failure at 8,192
    tokens whose answer shows no memory exhausted is not put on capacity, whatever production
    needs: the envelope is what was served."""
    checks = add(
        drop(proven(demo_checks()), "capacity.long"),
        _oom_ladder(8192, "connection reset by peer"),
    )
    verdict = await sealed(tmp / "b", checks, settings={"capacity.required_context": 8192})
    long_input = next(c for c in verdict["checks"] if c["id"] == "capacity.long_input")
    assert "no sign of running out of memory" in long_input["summary"]
    assert verdict["limits"]["max_context"] == 4096
    return verdict


@scenario("hold", "critical-failure", "capacity.long_input")
async def input_above_max_model_len_accepted(tmp: Path) -> Verdict:
    """ "This phase identifies excessive max-model-len, unsuitable cache settings, and
    topology limits." — the server took 4,180 prompt tokens with max_model_len 4096."""
    steps = [
        LongStep(4096, LongOutcome.ACCEPTED, "", 4010),
        LongStep(4160, LongOutcome.ACCEPTED, "", 4180),
    ]
    check = classified("capacity.long_input", classify_long_input(steps, 4096, 4096), {}, ())
    return await sealed(tmp / "b", add(drop(proven(demo_checks()), "capacity.long"), check))


@scenario("hold", "agent-protocol-failure", "agent.one_arg.required")
async def required_tool_call_fails_repeatedly(tmp: Path) -> Verdict:
    """ "Repeated protocol or parser failure on a critical path: do not go live." """
    return await changed(tmp, "agent.one_arg.required", status=Status.FAIL)


@scenario("observe-with-limits", "warnings-observed", "agent.one_arg.required")
async def one_isolated_critical_failure(tmp: Path) -> Verdict:
    """ "That warning makes one successful demonstration insufficient for production
    approval." — one failure in twenty is not a pass either: watched with an owner."""
    checks = mutate(proven(demo_checks()), "agent.one_arg.required", status=Status.WARN)
    verdict = await sealed(tmp / "b", checks)
    assert verdict["actions"][0]["owner"] == "unassigned"
    return verdict


@scenario("go-live", None)
async def a_warn_the_policy_waives(tmp: Path) -> Verdict:
    """ "Traffic must be rate-limited, the affected feature must be documented, and an owner
    must monitor it." — a named waiver carries its reason and owner into the verdict."""
    policy = write(
        tmp / "policy.yaml",
        "name: p\nversion: 1\nwaive:\n  smoke.sustained: {reason: agreed, owner: Ana}\n",
    )
    checks = mutate(proven(demo_checks()), "smoke.sustained", status=Status.WARN)
    verdict = await sealed(tmp / "b", checks, settings={"policy": str(policy)})
    assert verdict["waivers"] == [{"check": "smoke.sustained", "reason": "agreed", "owner": "Ana"}]
    return verdict


@scenario("observe-with-limits", "warnings-observed", "smoke.sustained")
async def warn_with_an_owner(tmp: Path) -> Verdict:
    """ "Every failed item has an owner, deadline, and rollback action." """
    owner = {"match": "smoke.*", "owner": "sre", "deadline": "2026-12-15", "rollback": "v1"}
    checks = mutate(proven(demo_checks()), "smoke.sustained", status=Status.WARN)
    verdict = await sealed(tmp / "b", checks, settings={"signoff.actions": [owner]})
    assert verdict["actions"] == [
        {"check": "smoke.sustained", "owner": "sre", "deadline": "2026-12-15", "rollback": "v1"}
        | {"status": "warn"}
    ]
    return verdict


@scenario("rebuild", "environment-mismatch", "startup.log")
async def startup_log_fails(tmp: Path) -> Verdict:
    """ "Check for CUDA initialization errors, NCCL failures, missing kernels, unsupported
    architecture messages, and fallback paths." """
    return await changed(tmp, "startup.log", status=Status.FAIL)


@scenario("rebuild", "environment-mismatch", "environment.vllm_version")
async def layers_disagree_on_the_version(tmp: Path) -> Verdict:
    """ "Version or image mismatch: rebuild." """
    return await changed(tmp, "environment.vllm_version", status=Status.FAIL)


@scenario("go-live", None)
async def no_vision_and_the_config_says_so(tmp: Path) -> Verdict:
    """ "One multimodal request if the application uses vision." — it does not, by config."""
    verdict = await sealed(tmp / "b", proven(demo_checks()))
    assert [s["check"] for s in verdict["skipped_by_config"]] == ["smoke.multimodal"]
    return verdict


@scenario("observe-with-limits", "non-critical-unproven", "smoke.multimodal")
async def multimodal_skipped_without_a_reason(tmp: Path) -> Verdict:
    """ "One multimodal request if the application uses vision." — skipped with no word from
    the config: unproven, named."""
    checks = mutate(proven(demo_checks()), "smoke.multimodal", measurements={}, skip_reason=None)
    return await sealed(tmp / "b", checks)


@scenario("hold", "programme-incomplete")
async def agent_contract_never_ran(tmp: Path) -> Verdict:
    """ "A running process or one successful request is not enough." — a programme bundle
    without the Agent contract cannot decide."""
    skipped = CheckResult("agent.programme", CheckClass.AGENT, False, Status.SKIPPED, "not run")
    return await sealed(tmp / "b", add(drop(proven(demo_checks()), "agent."), skipped))


@scenario("hold", "programme-incomplete")
async def cache_proof_never_ran(tmp: Path) -> Verdict:
    """ "A valid result needs both:" — cold and warm evidence; here neither exists."""
    return await sealed(tmp / "b", drop(proven(demo_checks()), "cache."))


@scenario("hold", "interrupted", "golive.interrupted")
async def run_interrupted(tmp: Path) -> Verdict:
    """ "Do not approve a deployment from the final error line alone." — a partial bundle."""
    stop = CheckResult("golive.interrupted", CheckClass.INTEGRITY, True, Status.ERROR, "SIGINT")
    return await sealed(tmp / "b", add(proven(demo_checks()), stop))


@scenario("hold", "missing-evidence", "golive.internal")
async def golive_crashed(tmp: Path) -> Verdict:
    """ "Go live: The container, vLLM build, CUDA runtime, host driver, memory behavior, prefix
    caching, and Agent interface all pass with saved evidence." — an error is not evidence."""
    crash = CheckResult("golive.internal", CheckClass.INTEGRITY, True, Status.ERROR, "crash")
    return await sealed(tmp / "b", add(proven(demo_checks()), crash))


# -- the real H200 run -------------------------------------------------------------------------


@scenario("hold", "agent-protocol-failure", "agent.one_arg.required")
async def h200_run_with_random_weights(tmp: Path) -> Verdict:
    """ "Repeated protocol or parser failure on a critical path: do not go live." — the H200
    model had random weights: its tool calls are garbage, as they must be."""
    return await sealed(tmp / "b", recorded(GPU / "verdict-golive-run.json"))


def _gpu_cache_check() -> CheckResult:
    rows = (GPU / "cache-steps.jsonl").read_text().splitlines()
    steps = {(step := CacheStep.from_json(json.loads(r))).name: step for r in rows if r}
    return reuse_result(steps, 1002, 16, True, "measured with /tokenize")


@scenario("go-live", None)
async def h200_cache_reuse_on_production_flags(tmp: Path) -> Verdict:
    """ "The vLLM metrics documentation exposes prefix-cache counters such as queries, hits,
    and cached prompt tokens." — the H200 engine (no --enable-prompt-tokens-details) reused
    1,008 tokens per warm request by its counters: the proof holds without the API field."""
    checks = add(drop(proven(demo_checks()), "cache.prefix_reuse"), _gpu_cache_check())
    return await sealed(tmp / "b", checks)


# -- sections and their combination ----------------------------------------------------------

SECTION_PREFIXES = {
    "env": ("environment.", "startup."),
    "smoke": ("smoke.",),
    "capacity": ("capacity.",),
    "cache": ("cache.",),
    "agent": ("agent.",),
}


def _section(checks: list[CheckResult], section: str) -> list[CheckResult]:
    prefixes = SECTION_PREFIXES[section]
    return [c for c in checks if c.id.startswith(prefixes) and c.id != "startup.prefix_caching"]


@scenario("section-passed", "section-only")
async def smoke_section_all_passed(tmp: Path) -> Verdict:
    """ "A running process or one successful request is not enough." """
    return await sealed(tmp / "b", _section(proven(demo_checks()), "smoke"), ("smoke",))


@scenario("section-passed", "section-only")
async def cache_section_proven(tmp: Path) -> Verdict:
    """ "This means a visible launch flag is only the first check. It does not prove that
    production prompts are being reused." — proven here, and still only a section."""
    return await sealed(tmp / "b", _section(proven(demo_checks()), "cache"), ("cache",))


@scenario("hold", "capacity-unattributed", "capacity.sustained")
async def capacity_section_with_a_death(tmp: Path) -> Verdict:
    """ "Expand or redesign capacity: The environment is compatible, but sustained load causes
    OOM, queue growth, communication stalls, or unstable processes." — a capacity section
    shows nothing of the environment."""
    checks = add(drop(_section(proven(demo_checks()), "capacity"), "capacity.sus"), _death(4))
    return await sealed(tmp / "b", checks, ("capacity",))


@scenario("observe-with-limits", "agent-feature-limited", "agent.one_arg.auto")
async def agent_section_with_a_bounded_defect(tmp: Path) -> Verdict:
    """ "Non-critical, bounded Agent defect: observe with limits." — a finding of a section."""
    return await sealed(tmp / "b", _section(demo_checks(), "agent"), ("agent",))


@scenario("go-live", None)
async def five_sections_combined(tmp: Path) -> Verdict:
    """ "Go live: The container, vLLM build, CUDA runtime, host driver, memory behavior, prefix
    caching, and Agent interface all pass with saved evidence." — from five sealed sections."""
    return await _combined(tmp, proven(demo_checks()))


@scenario("hold", "critical-failure", "cache.prefix_reuse")
async def combined_sections_with_cache_not_accepted(tmp: Path) -> Verdict:
    """ "If the flag is present but warm requests show no reliable reuse, classify the result
    as cache not accepted." """
    checks = mutate(proven(demo_checks()), "cache.prefix_reuse", status=Status.FAIL)
    return await _combined(tmp, checks)


async def _combined(tmp: Path, checks: list[CheckResult]) -> Verdict:
    """What `decide --combine` decides over five section bundles: their checks together, under
    the programme's rules. (Sections without their evidence do not re-derive, so combine
    refuses them; combining real sections is tests/integration/test_combine.py.)"""
    union = [c for section in SECTION_PREFIXES for c in _section(checks, section)]
    return await sealed(tmp / "combined", union)


@scenario("observe-with-limits", "warnings-observed", "cache.retention")
async def hybrid_cache_without_a_retention_policy(tmp: Path) -> Verdict:
    """ "The deployment team should therefore document the retention policy instead of
    assuming that every partial prefix will be cached." """
    from golive.checks.cache.retention import judge_retention

    retention = judge_retention(
        {"enable_prefix_caching": "True", "mamba_cache_mode": "align", "block_size": "480"},
        True,
        "hybrid",
    )
    return await sealed(tmp / "b", add(drop(proven(demo_checks()), "cache.retention"), retention))


# -- the suite itself -----------------------------------------------------------------------


def _quotes(doc: str) -> list[str]:
    return re.findall(r'"([^"]+)"', doc)


def _normal(text: str) -> str:
    return " ".join(text.replace("’", "'").split())


@pytest.mark.parametrize(("build", "expect"), SCENARIOS, ids=[b.__name__ for b, _ in SCENARIOS])
async def test_scenario(build: Build, expect: Expect, tmp_path: Path) -> None:
    """Each checklist scenario gives the checklist's outcome, by the rule it names and citing the
    checks behind it."""
    if inspect.iscoroutinefunction(build):
        verdict = await build(tmp_path)
    else:  # `golive env` runs its own event loop, as on the command line
        verdict = await asyncio.to_thread(build, tmp_path)
    rules = fired(verdict)
    assert verdict["outcome"] == expect.outcome, verdict["rules_fired"]
    if expect.rule is None:
        assert rules == {}, rules
        assert verdict["actions"] == []
    else:
        assert expect.rule in rules, rules
        assert set(expect.cites) <= set(rules[expect.rule]), rules[expect.rule]
    if expect.outcome == "go-live":
        assert verdict["scope"] == "programme"
        waived = {w["check"] for w in verdict.get("waivers") or []}
        assert {c["status"] for c in verdict["checks"] if c["id"] not in waived} <= {
            "pass",
            "skipped",
        }


def test_every_scenario_quotes_the_checklist() -> None:
    """Every scenario quotes the checklist sentence it implements, word for word, so an outcome
    comes from the checklist and not from the code."""
    assert len(SCENARIOS) >= 40
    checklist = _normal(CHECKLIST)
    for build, _ in SCENARIOS:
        quotes = _quotes(build.__doc__ or "")
        assert quotes, f"{build.__name__} quotes no checklist sentence"
        assert _normal(quotes[0]) in checklist, (build.__name__, quotes[0])


def test_both_outcomes_of_each_checklist_branch_are_covered() -> None:
    """Every outcome the checklist can give is reached by at least one scenario."""
    outcomes = {expect.outcome for _, expect in SCENARIOS}
    assert outcomes == {
        "go-live",
        "section-passed",
        "observe-with-limits",
        "hold",
        "expand-capacity",
        "rebuild",
    }
