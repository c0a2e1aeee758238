"""environment.nccl_transport on the real NCCL capture of two H200s on one host and its
two-node variant (tests/helpers/nccl_logs.py): sockets between nodes, or a container that
keeps NCCL off the fabric, is a rebuild; sockets on one node are normal; an engine that spans
nodes with no NCCL line is not measured, a hold; several nodes whose engines each fit one
are judged as one node."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from golive.bundle.store import Bundle
from golive.checks.env.chain_inputs import ChainInputs, Source
from golive.checks.env.nccl_transport import check_nccl_transport
from golive.evidence.facts import ContainerInfo, GpuInfo, HostInfo, read_facts
from golive.evidence.nccl_log import read_nccl
from golive.evidence.startup_log import LiveServer, parse_startup_log
from golive.orchestration.rederive import rederive
from golive.profiles import load_profile
from golive.results import Outcome, Status
from golive.verdict.decide import decide
from tests.decision.bundles import env, json_edit, write
from tests.helpers.nccl_logs import (
    one_host,
    ray_deduplicated,
    spanning_layout,
    two_nodes,
    with_nccl_before_ready,
)

DATA = Path(__file__).parents[1] / "data"
GPU_LOG = (DATA / "vllm-gpu-0.24-h200x2/startup.log").read_text()  # TP=2, no NCCL line
TP4_LOG = spanning_layout(GPU_LOG)  # TP=4: spans two nodes of two GPUs, no NCCL line
HOST = read_facts(DATA / "gpu-h200-x2/host-nvml.json", HostInfo)  # two H200s
CONTAINER = read_facts(DATA / "gpu-h200-x2/container.json", ContainerInfo)


def _hosts(*names: str, gpus: int = 2) -> tuple[tuple[HostInfo, str], ...]:
    return tuple(
        (
            HOST.model_copy(update={"node": n, "gpus": HOST.gpus[:gpus]}),
            f"environment/host-{n}.json",
        )
        for n in names
    )


def _env(**variables: str) -> ContainerInfo:
    return CONTAINER.model_copy(update={"environment": {**CONTAINER.environment, **variables}})


@dataclass(frozen=True)
class Case:
    log: str | None = None
    hosts: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    node_env: dict[str, str] | None = None  # environment/container-b.json's variables

    def inputs(self) -> ChainInputs:
        return ChainInputs(
            profile=load_profile("generic"),
            startup=None if self.log is None else parse_startup_log(self.log),
            container=_env(**self.env),
            node_containers=()
            if self.node_env is None
            else ((_env(**self.node_env), "environment/container-b.json"),),
            hosts=_hosts(*self.hosts),
        )


LOG = "environment/startup.log"
IB_DISABLED = "NCCL_IB_DISABLE set by environment to 1."


def _with_setting(text: str, line: str) -> str:
    """A line NCCL prints for a variable it took from the environment, as rank 0 prints it."""
    return text.replace(
        "vm:618:618 [0] NCCL INFO cudaDriverVersion",
        f"vm:618:618 [0] NCCL INFO {line}\nvm:618:618 [0] NCCL INFO cudaDriverVersion",
        1,
    )


@pytest.mark.parametrize(
    ("case", "status", "phrases", "cites"),
    [
        # the real capture: one host, IB absent, `Using network Socket`: NET carries nothing
        (Case(one_host(), ("vm",)), Status.PASS, ["one node", "P2P/CUMEM", "Socket"], [LOG]),
        (Case(one_host()), Status.PASS, ["one node"], [f"{LOG}#L43"]),
        # one node: variables that keep NCCL off IB change nothing there
        (Case(one_host(), ("vm",), {"NCCL_IB_DISABLE": "1"}), Status.PASS, ["one node"], []),
        (Case(one_host(), ("vm",), {"NCCL_NET": "Socket"}), Status.PASS, ["one node"], []),
        # one node with two ranks and peer-to-peer off: a fallback path, watched
        (
            Case(one_host(), ("vm",), {"NCCL_P2P_DISABLE": "1"}),
            Status.WARN,
            ["switched off for 2 ranks", "NCCL_P2P_DISABLE=1", "SHM"],
            ["environment/container.json#environment.NCCL_P2P_DISABLE"],
        ),
        (
            Case(GPU_LOG, ("vm",), {"NCCL_P2P_DISABLE": "1"}),  # TP=2 from the engine's args
            Status.WARN,
            ["switched off for 2 ranks"],
            [],
        ),
        # two nodes, NCCL on sockets between them: rebuild, naming each node's line
        (
            Case(two_nodes(), ("vm", "vm2")),
            Status.FAIL,
            [
                "spans 2 nodes (NCCL's nNodes 2, line 43)",
                '"Using network Socket" (line 17, host vm (192.0.2.2))',
                '"Using network Socket" (line 31, host vm2 (192.0.2.3))',
                '"NET/IB : No device found." (line 11)',
                "expose the nodes' InfiniBand/RoCE devices",
            ],
            [f"{LOG}#L17", f"{LOG}#L31", f"{LOG}#L11"],
        ),
        (Case(two_nodes()), Status.FAIL, ["over TCP sockets"], [f"{LOG}#L31"]),  # log alone
        # ... and where the container said so, the variable is named with its fix
        (
            Case(_with_setting(two_nodes(), IB_DISABLED), ("vm", "vm2")),
            Status.FAIL,
            [f"because NCCL_IB_DISABLE=1 ({LOG}#L7)", "remove NCCL_IB_DISABLE=1"],
            [f"{LOG}#L18", f"{LOG}#L32"],
        ),
        # two nodes on IB: the fabric carries them
        (
            Case(two_nodes(network="IB"), ("vm", "vm2")),
            Status.PASS,
            ["spans 2 nodes", "NCCL uses network IB between them"],
            [f"{LOG}#L17"],
        ),
        # two nodes on multi-node NVLink: sockets carry only what leaves the domain
        (
            Case(two_nodes(mnnvl=1), ("vm", "vm2")),
            Status.WARN,
            ["over multi-node NVLink", "TCP sockets"],
            [f"{LOG}#L17"],
        ),
        # the engine spans two nodes, the container keeps NCCL off the fabric, no NCCL line
        (
            Case(TP4_LOG, ("vm", "vm2"), {"NCCL_IB_DISABLE": "1"}),
            Status.FAIL,
            ["NCCL_IB_DISABLE=1 (environment/container.json", "remove the variable"],
            ["environment/container.json#environment.NCCL_IB_DISABLE"],
        ),
        (
            Case(TP4_LOG, ("vm", "vm2"), {"NCCL_NET": "socket"}),
            Status.FAIL,
            ["NCCL_NET=socket"],
            ["environment/container.json#environment.NCCL_NET"],
        ),
        (
            Case(TP4_LOG, ("vm", "vm2"), node_env={"NCCL_IB_DISABLE": "2"}),
            Status.FAIL,
            ["NCCL_IB_DISABLE=2 (environment/container-b.json"],
            ["environment/container-b.json#environment.NCCL_IB_DISABLE"],
        ),
        (
            Case(TP4_LOG, ("vm", "vm2"), {"NCCL_P2P_DISABLE": "1"}),  # two GPUs on each node
            Status.FAIL,
            ["peer-to-peer between the GPUs of each node is switched off"],
            ["environment/container.json#environment.NCCL_P2P_DISABLE"],
        ),
        # not measured across nodes: no NCCL line (NCCL_DEBUG was not INFO)
        (
            Case(TP4_LOG, ("vm", "vm2")),
            Status.NO_DATA,
            ["tp*pp*dp = 4 ranks, more than the 2 GPU(s) one node shows", "NCCL_DEBUG=INFO"],
            [LOG],
        ),
        # a value NCCL reads as "keep it on" is not a finding
        (Case(TP4_LOG, ("vm", "vm2"), {"NCCL_IB_DISABLE": "0"}), Status.NO_DATA, [], []),
        (Case(TP4_LOG, ("vm", "vm2"), {"NCCL_IB_DISABLE": "yes"}), Status.NO_DATA, [], []),
        (Case(TP4_LOG, ("vm", "vm2"), {"NCCL_IB_DISABLE": "0x0"}), Status.NO_DATA, [], []),
        (Case(TP4_LOG, ("vm", "vm2"), {"NCCL_IB_DISABLE": " 1 "}), Status.FAIL, [], []),
        # two nodes, each engine on one (TP=2 replicas): NCCL's communicators span one node
        (Case(one_host(), ("vm", "vm2")), Status.PASS, ["one node"], [f"{LOG}#L43"]),
    ],
)
def test_the_transport_rules(
    case: Case, status: Status, phrases: list[str], cites: list[str]
) -> None:
    """What an SRE sees for each deployment shape: the status, the line or file quoted, and
    the fix named."""
    result = check_nccl_transport(case.inputs())
    assert result is not None
    assert result.status is status, result.summary
    for phrase in phrases:
        assert phrase in result.summary, result.summary
    assert set(cites) <= {*result.evidence, *(e.split("#")[0] for e in result.evidence)}, (
        result.evidence
    )


@pytest.mark.parametrize(
    "case",
    [
        Case(),  # nothing given
        Case(GPU_LOG, ("vm",)),  # one node, NCCL_DEBUG not INFO
        Case(None, ("vm",), {"NCCL_P2P_DISABLE": "1"}),  # no log: how many ranks is unknown
        Case(GPU_LOG, ("vm",), {"NCCL_IB_DISABLE": "1"}),  # one node: IB is not used
        Case(None, ("vm", "vm2")),  # no log: nothing shows the engine spans the nodes
        # TP=2 replicas on two nodes of two GPUs: each engine is one node, IB is not used
        Case(GPU_LOG, ("vm", "vm2"), {"NCCL_IB_DISABLE": "1"}),
        Case(None, ("vm", "vm2"), {"NCCL_NET": "Socket"}),
    ],
)
def test_nothing_to_judge_on_one_node_gives_no_result(case: Case) -> None:
    """On one node with no NCCL line and nothing switching peer-to-peer off, the transport is
    not judged: no result, so no pass is claimed (and one-node bundles sealed before this
    check re-derive as sealed)."""
    assert check_nccl_transport(case.inputs()) is None


def test_a_gpu_less_ray_head_is_not_a_second_node() -> None:
    """A Ray head with no GPU (its host file lists none) does not make a one-node deployment
    a two-node one."""
    head = HOST.model_copy(update={"node": "head", "gpus": ()})
    inputs = ChainInputs(
        profile=load_profile("generic"),
        hosts=(*_hosts("vm"), (head, "environment/host-head.json")),
    )
    assert check_nccl_transport(inputs) is None


def test_single_gpu_nodes_have_no_peer_to_peer_to_lose() -> None:
    """Two nodes of one GPU each on IB, with NCCL_P2P_DISABLE=1: no peer inside a node, so
    nothing is lost: a pass, not a rebuild."""
    log = two_nodes(network="IB")
    inputs = ChainInputs(
        profile=load_profile("generic"),
        startup=parse_startup_log(log),
        container=_env(NCCL_P2P_DISABLE="1"),
        hosts=tuple(
            (HOST.model_copy(update={"node": n, "gpus": (GpuInfo(index=0, name="H200"),)}), p)
            for n, p in (("vm", "h/vm"), ("vm2", "h/vm2"))
        ),
    )
    result = check_nccl_transport(inputs)
    assert result is not None
    assert result.status is Status.PASS, result.summary


def test_a_log_of_another_launch_measures_nothing() -> None:
    """NCCL's lines in the log of another launch (it contradicts the live server's
    max_model_len) say nothing of the serving one: its sockets are no rebuild, and nothing
    else shows the serving engine spans the two nodes: no result."""
    log = with_nccl_before_ready(GPU_LOG, two_nodes())
    live = Source("4096", "requests/env.jsonl#/v1/models")  # the log says 8192
    inputs = ChainInputs(
        profile=load_profile("generic"),
        startup=parse_startup_log(log, LiveServer(max_model_len="4096")),
        live_max_model_len=live,
        hosts=_hosts("vm", "vm2"),
    )
    assert check_nccl_transport(inputs) is None


@pytest.mark.parametrize(
    ("case", "outcome", "rule"),
    [
        (Case(two_nodes(), ("vm", "vm2")), Outcome.REBUILD, "environment-mismatch"),
        (
            Case(TP4_LOG, ("vm", "vm2"), {"NCCL_NET": "Socket"}),
            Outcome.REBUILD,
            "environment-mismatch",
        ),
        (Case(TP4_LOG, ("vm", "vm2")), Outcome.HOLD, "missing-evidence"),
        (
            Case(one_host(), ("vm",), {"NCCL_P2P_DISABLE": "1"}),
            Outcome.OBSERVE_WITH_LIMITS,
            "warnings-observed",
        ),
    ],
)
def test_what_the_decision_makes_of_it(case: Case, outcome: Outcome, rule: str) -> None:
    """Sockets or a variable that keeps NCCL off the fabric between nodes is a rebuild; an
    engine that spans nodes with no NCCL evidence is never a pass, nor better than the
    rebuild the lines might show: a hold (as `golive env` decides its section)."""
    result = check_nccl_transport(case.inputs())
    assert result is not None
    decision = decide([result], scope=("env",))
    assert decision.outcome is outcome, decision
    fired = {r.rule: r.check_ids for r in decision.rules_fired}
    assert fired[rule] == ("environment.nccl_transport",), fired


def test_nccl_lines_behind_a_ray_prefix_and_a_warn_are_read() -> None:
    """Ray prefixes every worker line with its actor and address; NCCL WARN lines carry the
    source file: both are NCCL lines, with the host and process that printed them."""
    lines = [
        "(RayWorkerWrapper pid=4242, ip=10.0.0.2) node-b:4242:4242 [0] NCCL INFO Bootstrap : "
        "Using ib0:10.0.0.2<0>",
        "(RayWorkerWrapper pid=4242, ip=10.0.0.2) node-b:4242:4242 [0] NCCL INFO Using network IB",
        "[2026-11-29 18:21:13] vm:680:680 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket "
        "interface found",
    ]
    facts = read_nccl(lines)
    assert facts.lines == 3
    assert facts.hosts == ("node-b", "vm")
    assert [(name, line.line) for name, line in facts.networks] == [("IB", 2)]
    assert facts.origin(facts.networks[0][1]) == "host node-b (10.0.0.2)"


def _sealed_on_two_nodes(tmp_path: Path, base_log: str) -> Path:
    """`golive env` on `base_log` with two nodes' NCCL lines on sockets and a host file for
    each node (the second a copy of the first renamed vm2): its bundle, sealed as rebuild."""
    gpu = DATA / "vllm-gpu-0.24-h200x2"
    log = write(tmp_path / "two.log", with_nccl_before_ready(base_log, two_nodes()))
    second = json_edit(gpu / "host-h200x2.json", tmp_path / "vm2.json", node="vm2")
    bundle = tmp_path / "b"
    verdict = env(
        bundle, "--log", str(log), "--host-info", str(gpu / "host-h200x2.json"),
        "--host-info", str(second),
    )  # fmt: skip
    assert verdict["outcome"] == "rebuild"
    return bundle


@pytest.mark.tampers_bundle
def test_golive_decide_judges_the_transport_again_from_the_saved_log(tmp_path: Path) -> None:
    """`golive env` on two nodes whose NCCL is on sockets seals a rebuild; `golive decide`
    judges it again from the saved log and host files alone, so a log edited to say IB,
    even resealed, no longer gives the sealed result."""
    bundle = _sealed_on_two_nodes(tmp_path, GPU_LOG)
    assert rederive(bundle).agrees
    saved = bundle / "environment/startup.log"
    saved.write_text(
        saved.read_text()
        .replace("Using network Socket", "Using network IB")
        .replace("via NET/Socket", "via NET/IB")
    )
    Bundle(bundle).seal()
    edited = rederive(bundle)
    assert "environment.nccl_transport status: sealed 'fail', re-derived 'pass'" in (
        edited.problems
    ), edited.problems


def test_nccl_warn_lines_alone_claim_no_pass() -> None:
    """The real NCCL failure capture has only WARN lines (no `Using network`, no communicator
    line): on one node nothing is judged from them, so no pass is claimed."""
    log = (DATA / "gpu-h200-x2/nccl_fail.log").read_text()
    assert read_nccl(log.splitlines()).lines == 1
    assert check_nccl_transport(Case(log, ("vm",)).inputs()) is None


def _strip(text: str, *needles: str) -> str:
    """`text` without the lines that contain any of `needles`."""
    kept = [x for x in text.splitlines() if not any(n in x for n in needles)]
    return "\n".join(kept) + "\n"


@pytest.mark.parametrize(
    "log",
    [
        ray_deduplicated(two_nodes()),
        # only Ray's folded line says the network: vm's own `Using network` lines cut out
        _strip(ray_deduplicated(two_nodes()), "vm:618:618 [0] NCCL INFO Using network"),
    ],
)
def test_ray_deduplicated_lines_are_read_as_nccl_prints_them(log: str) -> None:
    """Ray colours its prefix and folds repeated lines into `... Socket [repeated 3x across
    cluster]`: the network is still Socket, so sockets between nodes are a rebuild, never a
    pass on a network named "Socket [repeated…"."""
    facts = read_nccl(log.splitlines())
    assert {name for name, _ in facts.networks} == {"Socket"}
    assert facts.comm is not None
    assert facts.comm.nodes == 2
    result = check_nccl_transport(Case(log, ("vm", "vm2")).inputs())
    assert result is not None
    assert result.status is Status.FAIL, result.summary
    assert "[repeated" not in result.summary
    assert "\x1b" not in result.summary


def test_one_communicator_on_multi_node_nvlink_excuses_no_other() -> None:
    """A communicator of two nodes on multi-node NVLink (`MNNVL 1`) beside one of four nodes
    that is not (`MNNVL 0`), all on sockets: the four-node traffic rides TCP: a rebuild, not
    the multi-node NVLink warn."""
    log = two_nodes() + (
        "vm:618:618 [0] NCCL INFO comm 0xaaaa rank 0 nRanks 4 nNodes 2 localRanks 1 localRank 0 "
        "MNNVL 1\n"
        "vm:618:618 [0] NCCL INFO comm 0xbbbb rank 0 nRanks 8 nNodes 4 localRanks 2 localRank 0 "
        "MNNVL 0\n"
    )
    result = check_nccl_transport(Case(log, ("vm", "vm2", "vm3", "vm4")).inputs())
    assert result is not None
    assert result.status is Status.FAIL, result.summary
    every = check_nccl_transport(Case(two_nodes(mnnvl=1), ("vm", "vm2")).inputs())
    assert every is not None
    assert every.status is Status.WARN, every.summary  # all MNNVL 1: the warn


@pytest.mark.parametrize(
    "log",
    [
        # `Using network IB` but the channels between the nodes go over NET/Socket
        two_nodes(network="IB").replace("via NET/IB/0", "via NET/Socket/0"),
        # the channels alone say it (the `Using network` lines are not in the log)
        _strip(two_nodes(), "Using network"),
    ],
)
def test_channels_over_net_socket_between_nodes_are_sockets(log: str) -> None:
    """Channels between the nodes `via NET/Socket` are NCCL on TCP sockets, whatever else
    the log says: a rebuild quoting the channel line."""
    result = check_nccl_transport(Case(log, ("vm", "vm2")).inputs())
    assert result is not None
    assert result.status is Status.FAIL, result.summary
    assert "via NET/Socket/0" in result.summary


def test_replicas_on_one_gpu_nodes_are_no_multi_node_engine() -> None:
    """TP=1 replicas on two one-GPU nodes (the real TP=1 capture, no NCCL at all) with
    NCCL_IB_DISABLE=1 in the container: no engine spans the nodes, so there is no NCCL
    traffic between them to judge: no result, never a false rebuild."""
    tp1 = (DATA / "vllm-gpu-0.24-h200x1-util09/startup.log").read_text()
    inputs = ChainInputs(
        profile=load_profile("generic"),
        startup=parse_startup_log(tp1),
        container=_env(NCCL_IB_DISABLE="1"),
        hosts=_hosts("node-a", "node-b", gpus=1),
    )
    assert check_nccl_transport(inputs) is None


def test_ray_workers_on_two_nodes_span_them_with_one_host_file() -> None:
    """vLLM's Ray workers logged their ranks from two node addresses: the engine spans two
    nodes even where only one node's host file was given, so NCCL_IB_DISABLE=1 in the
    container is a rebuild, naming the workers' addresses."""
    log = GPU_LOG.replace("(Worker pid=2078)", "(RayWorkerWrapper pid=2078, ip=192.0.2.2)")
    log = log.replace("(Worker pid=2079)", "(RayWorkerWrapper pid=2079, ip=192.0.2.3)")
    result = check_nccl_transport(Case(log, ("vm",), {"NCCL_IB_DISABLE": "1"}).inputs())
    assert result is not None
    assert result.status is Status.FAIL, result.summary
    assert "Ray workers ran at ip 192.0.2.2, 192.0.2.3" in result.summary


def test_nccl_lines_from_two_hosts_are_not_one_node() -> None:
    """NCCL's lines come from two host names (each node's TP communicator spans one node),
    but only one host file was given: the engine spans two nodes, and its sockets between
    them are a rebuild, not the one-node pass."""
    log = (
        "(RayWorkerWrapper pid=100, ip=10.0.0.1) nodeA:100:100 [0] NCCL INFO Using network "
        "Socket\n"
        "(RayWorkerWrapper pid=200, ip=10.0.0.2) nodeB:200:200 [0] NCCL INFO Using network "
        "Socket\n"
        "(RayWorkerWrapper pid=100, ip=10.0.0.1) nodeA:100:100 [0] NCCL INFO comm 0x1 rank 0 "
        "nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n"
    )
    result = check_nccl_transport(Case(log, ("nodeA",)).inputs())
    assert result is not None
    assert result.status is Status.FAIL, result.summary
    assert "NCCL's lines come from hosts nodeA, nodeB" in result.summary


@pytest.mark.tampers_bundle
def test_deleting_the_nccl_lines_of_a_multi_node_engine_is_no_better(tmp_path: Path) -> None:
    """`golive env` on a TP=4 engine over two nodes of two GPUs whose NCCL is on sockets
    seals a rebuild; the saved log with NCCL's lines taken out, resealed, re-derives to a
    hold: hiding the evidence never earns a better outcome than the rebuild it showed."""
    bundle = _sealed_on_two_nodes(tmp_path, TP4_LOG)
    saved = bundle / "environment/startup.log"
    saved.write_text(_strip(saved.read_text(), " NCCL "))
    Bundle(bundle).seal()
    edited = rederive(bundle)
    assert edited.decision.outcome is Outcome.HOLD, edited.decision
    nccl = next(c for c in edited.checks if c.id == "environment.nccl_transport")
    assert nccl.status is Status.NO_DATA, nccl.summary
    assert nccl.critical


def test_numbers_past_int_limits_do_not_crash() -> None:
    """A communicator line whose counts run to 5,000 digits (past Python's int() limit) is
    not a count NCCL prints: it is not read, and nothing raises."""
    big = "9" * 5000
    line = f"vm:618:618 [0] NCCL INFO comm 0x1 rank 0 nRanks {big} nNodes {big} localRanks 1"
    assert read_nccl([line]).comm is None
    result = check_nccl_transport(Case(GPU_LOG + line + "\n", ("a", "b")).inputs())
    assert result is None  # TP=2 on two-GPU nodes, no NCCL line it can read


@pytest.mark.parametrize("transport", ["via SHM/direct/direct", "[send] via NET/Socket/0"])
def test_one_node_ranks_off_peer_to_peer_are_watched(transport: str) -> None:
    """Two ranks on one node whose channels go through host memory or NCCL's sockets
    instead of P2P/NVLink: a fallback path, a warn quoting the channel, not a pass."""
    log = one_host().replace("via P2P/CUMEM", transport)
    result = check_nccl_transport(Case(log, ("vm",)).inputs())
    assert result is not None
    assert result.status is Status.WARN, result.summary
    assert transport in result.summary


@pytest.mark.parametrize("order", [1, -1])
def test_any_node_with_ib_disabled_counts(order: int) -> None:
    """Two nodes print NCCL_IB_DISABLE differently (0 on nodeA, 1 on nodeB): the node that
    turned IB off is named, whichever line comes first."""
    lines = [
        "nodeA:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.",
        "nodeB:2:2 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
    ][::order]
    result = check_nccl_transport(Case("\n".join(lines) + "\n", ("nodeA", "nodeB")).inputs())
    assert result is not None
    assert result.status is Status.FAIL, result.summary
    assert "NCCL_IB_DISABLE=1" in result.summary


def test_summaries_stay_short_on_huge_logs() -> None:
    """A network name of a million characters, or 200 nodes on sockets: the summary quotes a
    bounded part of the log (a few nodes, 300 characters a line)."""
    name = "X" * 1_000_000
    log = two_nodes(network="IB").replace("Using network IB", "Using network " + name, 1)
    wide = check_nccl_transport(Case(log, ("vm", "vm2")).inputs())
    assert wide is not None
    assert len(wide.summary) < 2000, len(wide.summary)
    many = [f"host{i}:{i}:{i} [0] NCCL INFO Using network Socket" for i in range(200)]
    result = check_nccl_transport(Case("\n".join(many) + "\n").inputs())
    assert result is not None
    assert result.status is Status.FAIL
    assert len(result.summary) < 2000, len(result.summary)
    assert len(result.evidence) <= 5, result.evidence


def test_a_variable_in_both_container_files_is_named_once() -> None:
    """Ray mode saves container.json and each node's container-<node>.json: the same
    NCCL_IB_DISABLE=1 in both is one finding, named once."""
    case = Case(TP4_LOG, ("vm", "vm2"), {"NCCL_IB_DISABLE": "1"}, {"NCCL_IB_DISABLE": "1"})
    result = check_nccl_transport(case.inputs())
    assert result is not None
    assert result.status is Status.FAIL
    assert result.summary.count("NCCL_IB_DISABLE=1") == 1, result.summary
