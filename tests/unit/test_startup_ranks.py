"""Issue 29 §6: the ranks the engine's workers joined with are checked against the parallel
layout and the GPUs of the node. The log is the real vLLM 0.24 TP=2 start on two H200s; the
hosts are the real one- and two-GPU H200 captures."""

from __future__ import annotations

from pathlib import Path

from golive.checks.env.chain_inputs import ChainInputs
from golive.checks.env.startup_parallel import check_parallel, worker_ranks
from golive.config import ParallelConfig
from golive.evidence.facts import ContainerGpu, ContainerInfo, HostInfo, read_facts
from golive.evidence.startup_log import parse_startup_log
from golive.profiles import load_profile
from golive.results import CheckResult, Outcome, Status
from golive.verdict.decide import decide

DATA = Path(__file__).parents[1] / "data"
LOG = (DATA / "vllm-gpu-0.24-h200x2/startup.log").read_text()
RANK1 = "world_size=2 rank=1 local_rank=1"


def _host(name: str) -> tuple[HostInfo, str]:
    return read_facts(DATA / f"gpu-h200-{name}/host-nvml.json", HostInfo), f"host-{name}.json"


def _check(log: str = LOG, host: str | None = "x2", **kw: object) -> CheckResult:
    inputs = ChainInputs(
        profile=load_profile("generic"),
        startup=parse_startup_log(log),
        hosts=(_host(host),) if host else (),
        declared_parallel=ParallelConfig(tp=2),
        **kw,  # type: ignore[arg-type]
    )
    return check_parallel(inputs)


def test_two_workers_on_two_gpus_pass() -> None:
    """TP=2 on the two-GPU host: ranks 0 and 1, local ranks 0 and 1, each once."""
    ranks = worker_ranks(parse_startup_log(LOG))
    assert [(r.world_size, r.rank, r.local_rank) for r in ranks] == [(2, 0, 0), (2, 1, 1)]
    result = _check()
    assert result.status is Status.PASS, result.summary
    assert result.summary == "started with tp=2, pp=1, dp=1, ep=1"  # as bundles sealed before


def test_a_rank_joined_twice_is_rebuild() -> None:
    """Two workers that both say rank 0: the process group is not the layout declared."""
    result = _check(LOG.replace(RANK1, "world_size=2 rank=0 local_rank=1"))
    assert result.status is Status.FAIL
    assert "rank 0 joined twice" in result.summary
    assert result.measurements["ranks_seen"] == 1
    assert result.evidence[-1] == "environment/startup.log#L17"
    assert decide([result]).outcome is Outcome.REBUILD


def test_a_world_other_than_the_layout() -> None:
    """Workers that joined a world of 4 under tp=2, pp=1: named with both numbers."""
    result = _check(LOG.replace("world_size=2 rank=", "world_size=4 rank="))
    assert result.status is Status.FAIL
    assert "joined a world of 4 rank(s) but tp*pp = 2" in result.summary


def test_a_local_rank_beyond_the_nodes_gpus() -> None:
    """The one-GPU host, or a container where torch sees one GPU: local rank 1 has no device."""
    on_one = _check(host="x1")
    assert on_one.status is Status.FAIL
    assert "local rank 1 but the node shows 1 GPU(s)" in on_one.summary
    container = ContainerInfo(gpus=(ContainerGpu(index=0, name="NVIDIA H200"),))
    seen = _check(host="x2", container=container)
    assert "local rank 1 but the node shows 1 GPU(s)" in seen.summary


def test_a_log_without_rank_lines_is_judged_as_before() -> None:
    """An older log with no worker rank lines: the layout alone is judged, nothing invented."""
    log = "\n".join(line for line in LOG.splitlines() if "local_rank=" not in line)
    result = _check(log)
    assert result.status is Status.PASS
    assert result.summary == "started with tp=2, pp=1, dp=1, ep=1"


def test_a_worker_logging_its_rank_twice_is_one_worker() -> None:
    """vLLM logs each worker's rank at DEBUG before the data-parallel adjustment and at INFO
    after it: with VLLM_LOGGING_LEVEL=DEBUG each worker has two lines, one worker each."""
    debug = "\n".join(
        line.replace(" INFO ", " DEBUG ") + "\n" + line if "local_rank=" in line else line
        for line in LOG.splitlines()
    )
    assert len(worker_ranks(parse_startup_log(debug))) == 2
    assert _check(debug).status is Status.PASS


def test_independent_data_parallel_engines_each_have_rank_zero() -> None:
    """Two data-parallel engines of a dense model, each its own process group of one: both
    workers are rank 0 of a world of 1, which is not a rank joined twice."""
    log = LOG.replace("world_size=2 rank=1 local_rank=1", "world_size=1 rank=0 local_rank=1")
    log = log.replace("world_size=2 rank=0 local_rank=0", "world_size=1 rank=0 local_rank=0")
    log = log.replace("'tensor_parallel_size': 2", "'data_parallel_size': 2")
    log = log.replace("tensor_parallel_size=2", "tensor_parallel_size=1")
    log = log.replace("data_parallel_size=1", "data_parallel_size=2")
    inputs = ChainInputs(
        profile=load_profile("generic"),
        startup=parse_startup_log(log),
        hosts=(_host("x2"),),
        declared_parallel=ParallelConfig(dp=2),
    )
    result = check_parallel(inputs)
    assert result.status is Status.PASS, result.summary


def test_ray_workers_on_two_nodes_with_the_same_pid_are_two_workers() -> None:
    """Pids repeat across nodes: two Ray workers with pid 400 on two hosts both claiming
    rank 1 is a rank joined twice; the same worker's DEBUG and INFO lines without any prefix
    (one in-process worker) are one worker."""
    ray = (
        "(RayWorkerWrapper pid=400, ip=10.0.0.2) INFO world_size=2 rank=1 local_rank=0\n"
        "(RayWorkerWrapper pid=400, ip=10.0.0.3) INFO world_size=2 rank=1 local_rank=0\n"
    )
    ranks = worker_ranks(parse_startup_log(LOG.replace(RANK1, "x") + ray))
    assert sorted(r.rank for r in ranks) == [0, 1, 1]
    single = (
        "DEBUG 01-01 [parallel_state.py:1] world_size=1 rank=0 local_rank=0\n"
        "INFO 01-01 [parallel_state.py:1] world_size=1 rank=0 local_rank=0\n"
    )
    assert len(worker_ranks(parse_startup_log(single))) == 1
