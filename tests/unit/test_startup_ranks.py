"""Issue 29 §6: the ranks the engine's workers joined with are checked against the parallel
layout and the GPUs of the node. The log is the real vLLM 0.24 TP=2 start on two H200s; the
hosts are the real one- and two-GPU H200 captures."""

from __future__ import annotations

from pathlib import Path

import pytest

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


def _check(
    log: str = LOG,
    host: str | None = "x2",
    hosts: tuple[tuple[HostInfo, str], ...] = (),
    **kw: object,
) -> CheckResult:
    inputs = ChainInputs(
        profile=load_profile("generic"),
        startup=parse_startup_log(log),
        hosts=(_host(host),) if host else hosts,
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


# Issue 34: the same TP=2 start as Ray would log it across two nodes, each worker under its
# node's address, against host evidence that names each node's address (golive env --ray).
def _ray_log(*workers: tuple[str, int]) -> str:
    """The real log with each worker under a Ray prefix: (ip, local rank) for rank 0, 1."""
    log = LOG
    for (ip, local), (pid, rank) in zip(workers, ((2078, 0), (2079, 1)), strict=True):
        log = log.replace(f"(Worker pid={pid})", f"(RayWorkerWrapper pid={pid}, ip={ip})")
        log = log.replace(f"rank={rank} local_rank={rank}", f"rank={rank} local_rank={local}")
    return log


def _node(name: str, gpus: str, address: str | None) -> tuple[HostInfo, str]:
    """The real one- or two-GPU H200 capture as node `name` at `address`."""
    host, _ = _host(gpus)
    return host.model_copy(update={"node": name, "address": address}), f"host-{name}.json"


TWO_ONE_GPU_NODES = (_node("gpu-a", "x1", "10.0.0.2"), _node("gpu-b", "x1", "10.0.0.3"))
A_TWO_B_ONE = (_node("gpu-a", "x2", "10.0.0.2"), _node("gpu-b", "x1", "10.0.0.3"))
NO_ADDRESSES = (_node("gpu-a", "x2", None), _node("gpu-b", "x1", None))
ONE_ADDRESS = (_node("gpu-a", "x2", "10.0.0.2"), _node("gpu-b", "x1", None))
LAYOUT = "started with tp=2, pp=1, dp=1, ep=1"


@pytest.mark.parametrize(
    ("workers", "hosts", "status", "said", "outcome"),
    [
        pytest.param(
            (("10.0.0.2", 0), ("10.0.0.3", 0)),
            TWO_ONE_GPU_NODES,
            Status.PASS,
            f"{LAYOUT}; ranks by node: gpu-a 0, gpu-b 1",
            None,
            id="one-worker-on-each-one-gpu-node",
        ),
        pytest.param(
            (("10.0.0.2", 0), ("10.0.0.9", 0)),
            TWO_ONE_GPU_NODES,
            Status.NO_DATA,
            "worker(s) at ip 10.0.0.9 ran on no node of the host evidence "
            "(gpu-a 10.0.0.2, gpu-b 10.0.0.3)",
            Outcome.HOLD,
            id="a-worker-on-a-node-the-evidence-lacks",
        ),
        pytest.param(
            (("10.0.0.2", 0), ("10.0.0.3", 1)),
            TWO_ONE_GPU_NODES,
            Status.FAIL,
            "rank 1 took local rank 1 on node gpu-b (ip 10.0.0.3, line 18), which shows "
            "1 GPU(s) in the host evidence",
            Outcome.REBUILD,
            id="local-rank-1-on-a-one-gpu-node",
        ),
        pytest.param(  # the most GPUs any node has (2) would have let it pass
            (("10.0.0.2", 0), ("10.0.0.3", 1)),
            A_TWO_B_ONE,
            Status.FAIL,
            "rank 1 took local rank 1 on node gpu-b (ip 10.0.0.3, line 18)",
            Outcome.REBUILD,
            id="local-rank-1-on-the-one-gpu-node-beside-a-two-gpu-node",
        ),
        pytest.param(
            (("10.0.0.2", 0), ("10.0.0.3", 1)),
            NO_ADDRESSES,
            Status.PASS,
            LAYOUT,
            None,
            id="hosts-without-addresses-judge-as-before",
        ),
        pytest.param(  # 10.0.0.9 can only be gpu-b, the host without an address: 1 GPU
            (("10.0.0.2", 0), ("10.0.0.9", 1)),
            ONE_ADDRESS,
            Status.FAIL,
            "rank 1 (ip 10.0.0.9, line 18) took local rank 1, but no host names that address "
            "and the hosts without one (gpu-b) show at most 1 GPU(s)",
            Outcome.REBUILD,
            id="a-worker-only-a-host-without-an-address-can-hold",
        ),
        pytest.param(  # the contradiction decides; the node without evidence is still named
            (("10.0.0.2", 1), ("10.0.0.9", 0)),
            TWO_ONE_GPU_NODES,
            Status.FAIL,
            "rank 0 took local rank 1 on node gpu-a (ip 10.0.0.2, line 17), which shows 1 GPU(s)"
            " in the host evidence; worker(s) at ip 10.0.0.9 ran on no node",
            Outcome.REBUILD,
            id="a-wrong-local-rank-beside-an-unknown-ip",
        ),
    ],
)
def test_ray_workers_are_judged_on_their_own_node(
    workers: tuple[tuple[str, int], ...],
    hosts: tuple[tuple[HostInfo, str], ...],
    status: Status,
    said: str,
    outcome: Outcome | None,
) -> None:
    """Each Ray worker's `ip=` names its node in the host evidence: its local rank must be
    below that node's own GPUs (rebuild, naming the node), and a worker on an address no host
    has ran on a node nothing was collected from (hold: evidence is missing, the chain of
    that node is unproven). Where the hosts name no addresses, nothing changes."""
    result = _check(_ray_log(*workers), host=None, hosts=hosts)
    assert result.status is status, result.summary
    assert said in result.summary
    if status is Status.PASS:
        assert result.summary == said
    if outcome is not None:
        assert result.critical
        assert decide([result]).outcome is outcome


def test_the_rank_map_is_measured_only_where_workers_were_put_on_nodes() -> None:
    """A reader sees which node and local rank each rank took; a capture judged as before
    (no addresses, or the unprefixed real log) keeps its measurements as sealed."""
    placed = _check(_ray_log(("10.0.0.2", 0), ("10.0.0.3", 0)), host=None, hosts=A_TWO_B_ONE)
    assert placed.measurements["rank_map"] == "0=gpu-a:0 1=gpu-b:0"
    before = _check(_ray_log(("10.0.0.2", 0), ("10.0.0.3", 0)), host=None, hosts=NO_ADDRESSES)
    assert "rank_map" not in before.measurements
    unprefixed = _check(host=None, hosts=A_TWO_B_ONE)
    assert unprefixed.summary == LAYOUT
    assert "rank_map" not in unprefixed.measurements


def test_a_node_address_matches_however_it_is_spelt() -> None:
    """Ray names an IPv6 node in its short form; the evidence may spell it in full."""
    hosts = (_node("gpu-a", "x1", "fd00:0:0:0::2"), _node("gpu-b", "x1", "fd00::3"))
    result = _check(_ray_log(("fd00::2", 0), ("fd00::3", 0)), host=None, hosts=hosts)
    assert result.status is Status.PASS, result.summary
    assert result.measurements["rank_map"] == "0=gpu-a:0 1=gpu-b:0"


def test_the_container_still_bounds_workers_put_on_nodes() -> None:
    """The serving container's GPUs (as torch sees them) bound every worker, as before, even
    where each worker's node has room: a two-GPU node whose container shows one GPU."""
    container = ContainerInfo(gpus=(ContainerGpu(index=0, name="NVIDIA H200"),))
    hosts = (_node("gpu-a", "x2", "10.0.0.2"), _node("gpu-b", "x2", "10.0.0.3"))
    result = _check(
        _ray_log(("10.0.0.2", 0), ("10.0.0.3", 1)), host=None, hosts=hosts, container=container
    )
    assert result.status is Status.FAIL
    assert "local rank 1 but the node shows 1 GPU(s)" in result.summary


B_UNADDRESSED = (_node("gpu-a", "x1", "10.0.0.2"), _node("gpu-b", "x1", None))
B_AS_A = (_node("gpu-a", "x1", "10.0.0.2"), _node("gpu-b", "x1", "10.0.0.2"))
UNCOVERED = "worker(s) at ip 10.0.0.9 ran on no node of the host evidence"


@pytest.mark.parametrize(
    ("workers", "hosts", "status", "said"),
    [
        pytest.param(  # every host addressed: 10.0.0.9 is a node nothing was collected from
            (("10.0.0.2", 0), ("10.0.0.9", 0)),
            TWO_ONE_GPU_NODES,
            Status.NO_DATA,
            UNCOVERED,
            id="all",
        ),
        pytest.param(  # gpu-b edited to gpu-a's address: still no host at 10.0.0.9
            (("10.0.0.2", 0), ("10.0.0.9", 0)), B_AS_A, Status.NO_DATA, UNCOVERED, id="dup"
        ),
        pytest.param(  # one host without an address cannot be two nodes
            (("10.0.0.8", 0), ("10.0.0.9", 0)),
            B_UNADDRESSED,
            Status.NO_DATA,
            "worker(s) at ip 10.0.0.8, 10.0.0.9 ran on no node of the host evidence "
            "(gpu-a 10.0.0.2, gpu-b (no address))",
            id="two-unknown-one-unaddressed",
        ),
        pytest.param(  # gpu-a's address removed: rank 1 is still on the one-GPU gpu-b
            (("10.0.0.2", 0), ("10.0.0.3", 1)),
            (_node("gpu-a", "x2", None), _node("gpu-b", "x1", "10.0.0.3")),
            Status.FAIL,
            "rank 1 took local rank 1 on node gpu-b (ip 10.0.0.3, line 18)",
            id="a-removed-wrong-rank-stays",
        ),
        pytest.param(  # gpu-a given gpu-b's address: 10.0.0.2 is now a node no host names
            (("10.0.0.2", 0), ("10.0.0.3", 1)),
            (_node("gpu-a", "x2", "10.0.0.3"), _node("gpu-b", "x1", "10.0.0.3")),
            Status.NO_DATA,
            "worker(s) at ip 10.0.0.2 ran on no node of the host evidence",
            id="a-as-b-wrong-rank-not-pass",
        ),
    ],
)
def test_editing_one_host_address_never_switches_placement_off(
    workers: tuple[tuple[str, int], ...],
    hosts: tuple[tuple[HostInfo, str], ...],
    status: Status,
    said: str,
) -> None:
    """A worker on a node the evidence lacks holds the go-live, and a wrong local rank
    rebuilds, however one host file's address is edited: duplicating an address or leaving
    it out places no worker it did not place, and hosts without an address stand for at most
    as many unknown addresses as there are such hosts."""
    result = _check(_ray_log(*workers), host=None, hosts=hosts)
    assert result.status is status, result.summary
    assert said in result.summary
    assert result.critical
    assert decide([result]).outcome is not Outcome.GO_LIVE


def test_a_host_without_an_address_may_stand_for_an_unknown_one() -> None:
    """Hosts from before addresses beside ones with: a worker at an address no host names may
    be the host without one, so the start passes, but that worker is placed on no node and
    the summary says which host it is taken to be."""
    result = _check(_ray_log(("10.0.0.2", 0), ("10.0.0.9", 0)), host=None, hosts=B_UNADDRESSED)
    assert result.status is Status.PASS, result.summary
    assert result.summary == (
        f"{LAYOUT}; ranks by node: gpu-a 0; worker(s) at ip 10.0.0.9, an address no host "
        "names, are taken to be on the host(s) without one (gpu-b)"
    )
    assert result.measurements["rank_map"] == "0=gpu-a:0"


def test_a_worker_on_a_node_without_gpus_in_its_host_evidence_is_no_data() -> None:
    """A worker on the Ray head whose host file lists no GPU: that node's GPUs were never
    seen, so the start holds, naming the node, instead of passing."""
    head_host, path = _node("head", "x1", "10.0.0.1")
    head = (head_host.model_copy(update={"gpus": ()}), path)
    hosts = (head, _node("gpu-a", "x2", "10.0.0.2"))
    result = _check(_ray_log(("10.0.0.1", 0), ("10.0.0.2", 1)), host=None, hosts=hosts)
    assert result.status is Status.NO_DATA, result.summary
    assert "rank 0 on node head (ip 10.0.0.1, line 17): the host evidence of that node " in (
        result.summary
    )
    assert result.critical
    assert decide([result]).outcome is Outcome.HOLD


HUGE = "9" * 5000  # past Python's 4,300-digit limit on int()


def test_numbers_that_are_no_count_never_crash_and_read_as_unknown() -> None:
    """A rank line with a 5,000-digit world size is not a rank line (no crash); a layout of
    `'tensor_parallel_size': '²'` (a digit to str.isdigit, no number to int) or of 5,000
    digits is an unknown layout (no_data), never a crash of `golive env`."""
    odd = LOG.replace("world_size=2 rank=1", f"world_size={HUGE} rank=1")
    assert [r.rank for r in worker_ranks(parse_startup_log(odd))] == [0]
    for value in ("'²'", HUGE):
        log = LOG.replace("'tensor_parallel_size': 2", f"'tensor_parallel_size': {value}")
        assert parse_startup_log(log).parallel()["tp"] == 1
        result = _check(log)
        assert result.status is Status.NO_DATA, result.summary
        assert "tensor_parallel_size=" in result.summary
        assert "so the parallel layout is unknown" in result.summary
