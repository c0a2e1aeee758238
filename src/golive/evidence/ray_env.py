"""Evidence from every node of a Ray cluster, through the cluster's Jobs API.

`golive env --ray http://HEAD:8265` submits `scripts/ray_nodes.py` as a Ray job, with golive
shipped as a runtime-env module: the job runs `golive env collect --host` (and `--container`
when asked) once on every alive node and prints one result line, read back from the job's
logs. Submitting a job, rather than connecting as a driver, means golive need not match
the cluster's exact Ray and Python versions. Ray itself is optional (`golive[ray]`) and is
imported only here, only when `--ray` is given.

Judging is pure (`node_results`): a node that failed to report is `no_data` for that node;
a cluster with fewer alive nodes than `--expect-nodes` fails `environment.node_count`.
`environment/ray-nodes.json` keeps the job's answer with the request (`source`) and why the
collection failed (`problem`), so `golive decide` judges the node checks again
(`judge_ray_nodes`) instead of taking them as sealed.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import golive
from golive.bundle.layout import RAY_NODES
from golive.bundle.store import BundleReader
from golive.errors import ConfigError, EvidenceError
from golive.evidence.facts import ContainerInfo, HostInfo
from golive.results import ENVIRONMENT_RESULT, CheckResult, Status

MARKER = "GOLIVE-RAY-NODES"
SETUP_S = 300.0  # runtime-env setup and job start, on top of the collection timeout


@dataclass(frozen=True, slots=True)
class RaySource:
    address: str
    expect_nodes: int | None = None
    timeout_s: float = 120.0
    container: bool = False


@dataclass(frozen=True, slots=True)
class NodeReport:
    name: str
    node_id: str
    host: HostInfo | None
    container: ContainerInfo | None
    error: str | None


@dataclass(frozen=True, slots=True)
class ClusterReport:
    address: str
    job_id: str
    alive_nodes: int
    nodes: tuple[NodeReport, ...]
    raw: dict[str, Any]


def require_ray() -> None:
    """A usage error naming the extra, before any bundle is written."""
    try:
        import ray.job_submission  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"--ray needs Ray's job client ({exc}): pip install 'golive[ray]'"
        ) from exc


def submit_script(client: Any, entrypoint: str, by: str) -> str:
    """Submit `entrypoint` (a script of golive.evidence.scripts) as a Ray job, with golive
    shipped as a runtime-env module: the cluster's own Ray and Python run it."""
    scripts = resources.files("golive.evidence") / "scripts"
    package = Path(golive.__file__).parent
    return str(
        client.submit_job(
            entrypoint=entrypoint,
            runtime_env={
                "working_dir": str(scripts),
                "py_modules": [str(package)],
                "excludes": ["__pycache__", "*.pyc"],
            },
            metadata={"submitted_by": by},
        )
    )


def job_client(address: str, flag: str) -> Any:
    """Ray's Jobs API client for `address`; EvidenceError naming the address form."""
    from ray.job_submission import JobSubmissionClient

    try:
        return JobSubmissionClient(address)
    except Exception as exc:
        raise EvidenceError(
            f"{flag} {address}: the Jobs API does not answer ({exc}); give the "
            "dashboard address, as `ray job submit --address` takes it (http://HEAD:8265)"
        ) from exc


def collect_cluster(source: RaySource) -> ClusterReport:
    """Submit the collector job and wait for its result (blocking; run in a thread)."""
    from ray.job_submission import JobStatus

    client = job_client(source.address, "--ray")
    entrypoint = f"python ray_nodes.py --timeout {source.timeout_s:g}"
    if source.container:
        entrypoint += " --container"
    job_id = submit_script(client, entrypoint, "golive env --ray")
    deadline = time.monotonic() + source.timeout_s + SETUP_S
    status = client.get_job_status(job_id)
    while not status.is_terminal():
        if time.monotonic() > deadline:
            client.stop_job(job_id)
            raise EvidenceError(f"--ray: collector job {job_id} did not finish; stopped it")
        time.sleep(0.5)
        status = client.get_job_status(job_id)
    logs = client.get_job_logs(job_id)
    line = next((ln for ln in reversed(logs.splitlines()) if ln.startswith(MARKER)), None)
    if status != JobStatus.SUCCEEDED or line is None:
        tail = "\n".join(logs.splitlines()[-8:])
        raise EvidenceError(f"--ray: collector job {job_id} ended {status.value}:\n{tail}")
    raw = json.loads(line.removeprefix(MARKER))
    return ClusterReport(source.address, job_id, int(raw["alive_nodes"]), _nodes(raw), raw)


def node_names(entries: list[dict[str, Any]]) -> dict[str, str]:
    """Each entry's node (by Ray node id) named as golive names it: its hostname, with the
    node id's first 8 characters where hostnames repeat (Ray's id only tells twins apart)."""
    counts = Counter(_base(entry) for entry in {e["node_id"]: e for e in entries}.values())
    return {
        entry["node_id"]: _base(entry)
        if counts[_base(entry)] == 1
        else f"{_base(entry)}-{entry['node_id'][:8]}"
        for entry in entries
    }


def _nodes(raw: dict[str, Any]) -> tuple[NodeReport, ...]:
    reports = raw.get("nodes") or []
    names = node_names(reports)
    nodes = []
    for entry in sorted(reports, key=lambda e: (_base(e), e["node_id"])):
        name = names[entry["node_id"]]
        host = container = None
        error = entry.get("error")
        try:
            if entry.get("host") is not None:
                # the address Ray gave the node (reports sealed before it was kept have none)
                named = {"node": name, "address": entry.get("address")}
                host = HostInfo.model_validate({**entry["host"], **named})
            if entry.get("container") is not None:
                container = ContainerInfo.model_validate(entry["container"])
        except ValidationError as exc:
            error = f"its report does not validate: {exc.errors()[0]['msg']}"
        nodes.append(NodeReport(name, entry["node_id"], host, container, error))
    return tuple(nodes)


def _base(entry: dict[str, Any]) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", entry.get("hostname") or "") or "node"


def node_results(
    source: RaySource, cluster: ClusterReport | None, problem: str | None
) -> list[CheckResult]:
    """environment.node_count, and environment.node.<name> for every node that did not report."""
    evidence = (RAY_NODES,) if cluster is not None else ()
    if cluster is None:
        return [
            ENVIRONMENT_RESULT(
                "environment.node_count",
                Status.NO_DATA,
                f"no node evidence from the Ray cluster: {problem}",
                {"expected_nodes": source.expect_nodes},
            )
        ]
    reported = [n for n in cluster.nodes if n.host is not None and n.error is None]
    measurements: dict[str, Any] = {
        "alive_nodes": cluster.alive_nodes,
        "reported_nodes": len(reported),
        "expected_nodes": source.expect_nodes,
    }
    results = []
    if source.expect_nodes is not None and cluster.alive_nodes < source.expect_nodes:
        results.append(
            ENVIRONMENT_RESULT(
                "environment.node_count",
                Status.FAIL,
                f"the Ray cluster has {cluster.alive_nodes} alive node(s), but "
                f"{source.expect_nodes} were declared (--expect-nodes)",
                measurements,
                evidence=evidence,
            )
        )
    else:
        results.append(
            ENVIRONMENT_RESULT(
                "environment.node_count",
                Status.PASS,
                f"{cluster.alive_nodes} alive node(s) in the Ray cluster, {len(reported)} "
                "reported their facts"
                + ("" if source.expect_nodes is None else f" ({source.expect_nodes} declared)"),
                measurements,
                evidence=evidence,
            )
        )
    for node in cluster.nodes:
        if node.host is None or node.error is not None:
            results.append(
                ENVIRONMENT_RESULT(
                    f"environment.node.{node.name}",
                    Status.NO_DATA,
                    f"node {node.name} (Ray node {node.node_id[:12]}) did not report: {node.error}",
                    evidence=evidence,
                )
            )
    return results


def saved_cluster(
    source: RaySource, cluster: ClusterReport | None, problem: str | None
) -> dict[str, Any]:
    """`environment/ray-nodes.json`: the collector job's answer as it came, with what was
    asked of it and why it failed, if it did: what `judge_ray_nodes` reads."""
    asked = {
        "address": source.address,
        "expect_nodes": source.expect_nodes,
        "timeout_s": source.timeout_s,
        "container": source.container,
    }
    return {**(cluster.raw if cluster else {}), "source": asked, "problem": problem}


def judge_ray_nodes(evidence: BundleReader) -> list[CheckResult]:
    """environment.node_count and environment.node.<name> again from the saved job answer:
    the live run's rule on the saved facts, so an edited verdict cannot drop a node that did
    not report or a count below the one declared. A record without its request (one sealed
    before the request was kept, or edited) cannot be judged: no_data."""
    saved = evidence.json(RAY_NODES)
    asked = saved.get("source") if isinstance(saved, Mapping) else None
    if not isinstance(saved, Mapping) or not isinstance(asked, Mapping):
        return [_unreadable(f"{RAY_NODES} has no request (source) to judge the nodes against")]
    expect = asked.get("expect_nodes")
    if expect is not None and (isinstance(expect, bool) or not isinstance(expect, int)):
        return [_unreadable(f"{RAY_NODES}: source.expect_nodes is not a whole number")]
    source = RaySource(str(asked.get("address")), expect)
    problem = saved.get("problem")
    if "nodes" not in saved:
        why = problem if isinstance(problem, str) and problem else f"{RAY_NODES} lists no nodes"
        return node_results(source, None, why)
    try:
        raw = dict(saved)
        cluster = ClusterReport(source.address, "", int(raw["alive_nodes"]), _nodes(raw), raw)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return [_unreadable(f"{RAY_NODES} does not read as the collector's answer ({exc!r})")]
    if len(cluster.nodes) != cluster.alive_nodes:  # the job answers once for every alive node
        return [
            _unreadable(
                f"{RAY_NODES} counts {cluster.alive_nodes} alive node(s) but lists "
                f"{len(cluster.nodes)}: the collector answers once for each"
            )
        ]
    return node_results(source, cluster, None)


def _unreadable(why: str) -> CheckResult:
    return ENVIRONMENT_RESULT("environment.node_count", Status.NO_DATA, why, evidence=(RAY_NODES,))
