"""Evidence from the pods of a deployment without Ray (KServe, production-stack,
LeaderWorkerSet), read through the Kubernetes API with the official client.

`golive env --k8s-namespace NS --selector S` lists the engine pods and reads, for each: the
engine container's image and resolved `imageID` digest, its node, restart count and
readiness, and its log (the startup log); for each node, NVIDIA GPU feature discovery's
labels (driver version, GPU product, count, memory), which become host facts judged like
`--host-info` files. The client is optional (`golive[k8s]`) and imported only here.

Judging is pure (`k8s_results`): every pod's digest must agree with the others' and with
`--image`; a pod without a digest, or no pod at all, is missing evidence; restarts are
reported.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from golive.bundle.layout import K8S_PODS
from golive.bundle.store import BundleReader
from golive.errors import ConfigError, EvidenceError
from golive.evidence.facts import GpuInfo, HostInfo
from golive.results import ENVIRONMENT_RESULT, CheckResult, Status

LOG_LIMIT = 32 << 20
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_GFD = "nvidia.com/"


@dataclass(frozen=True, slots=True)
class K8sSource:
    namespace: str
    selector: str
    container: str | None = None  # the engine container; default: the pod's first
    kubeconfig: Path | None = None


@dataclass(frozen=True, slots=True)
class PodFacts:
    name: str
    node: str | None
    container: str
    image: str | None
    image_id: str | None
    restarts: int
    ready: bool
    log: str | None
    log_error: str | None

    @property
    def digest(self) -> str | None:
        # `repo@sha256:...`, the digest it was pulled by; a bare `sha256:...` is the id of an
        # image loaded or imported, not pulled: no repo digest to compare
        found = _DIGEST.search(self.image_id or "") if "@" in (self.image_id or "") else None
        return found.group(0) if found else None


@dataclass(frozen=True, slots=True)
class K8sReport:
    source: K8sSource
    pods: tuple[PodFacts, ...]
    node_labels: dict[str, dict[str, str]]


def require_kubernetes() -> None:
    try:
        import kubernetes  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"--k8s-namespace needs the Kubernetes client ({exc}): pip install 'golive[k8s]'"
        ) from exc


def _api(source: K8sSource) -> Any:
    """The core API client for `source`'s credentials (blocking)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        if source.kubeconfig is not None:
            api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(source.kubeconfig)
            )
        else:
            try:
                config.load_incluster_config()  # type: ignore[no-untyped-call]
            except ConfigException:
                config.load_kube_config()  # type: ignore[no-untyped-call]
            api_client = client.ApiClient()
    except (ConfigException, OSError) as exc:
        raise EvidenceError(
            f"no Kubernetes credentials ({exc}): give --kubeconfig FILE, set KUBECONFIG, "
            "or run golive inside the cluster"
        ) from exc
    return client.CoreV1Api(api_client)


def read_cluster(source: K8sSource) -> K8sReport:
    """List the pods and their nodes (blocking; run in a thread)."""
    api = _api(source)
    with _api_errors(f"pods in {source.namespace} matching {source.selector!r}"):
        facts = tuple(_pod(api, pod, source) for pod in _selected(api, source))
        labels = {}
        for node in sorted({p.node for p in facts if p.node}):
            labels[node] = _labels(api.read_node(node))
    return K8sReport(source, facts, labels)


@contextlib.contextmanager
def _api_errors(where: str) -> Iterator[None]:
    """The API's refusals and an unreachable server as evidence errors naming `where`."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        yield
    except ApiException as exc:
        raise EvidenceError(f"{where}: the API answered {exc.status} {exc.reason}") from exc
    except (OSError, HTTPError) as exc:  # urllib3's retries, timeouts and protocol errors
        raise EvidenceError(f"{where}: the API server cannot be reached ({exc})") from exc


def _selected(api: Any, source: K8sSource) -> list[Any]:
    """The pods the selector selects (applied again here, whatever the server did); an API
    that does not answer in 10 s is unreachable, not waited on."""
    listed = api.list_namespaced_pod(
        source.namespace, label_selector=source.selector, _request_timeout=10
    )
    return [p for p in listed.items if _matches(_labels(p), source.selector)]


@dataclass(frozen=True, slots=True)
class ContainerRestarts:
    """One engine pod's engine container as the watch reads it."""

    restarts: int
    reason: str | None  # why its last run ended (`OOMKilled`, `Error`, …), or its current one
    digest: str | None  # the image it runs
    found: bool  # the pod has the engine container (False: a wrong --k8s-container)


def read_restarts(source: K8sSource) -> dict[str, ContainerRestarts]:
    """Each selected pod's engine container: restart count, why its last run ended, its
    image: the watch's light read, without logs or nodes (blocking; run in a thread)."""
    api = _api(source)
    with _api_errors(f"pods in {source.namespace} matching {source.selector!r}"):
        pods = _selected(api, source)
    found: dict[str, ContainerRestarts] = {}
    for pod in pods:
        _, _, status = _engine_container(pod, source)
        state = status.state if status else None
        ended = (state.terminated if state else None) or (
            status.last_state.terminated if status and status.last_state else None
        )
        digest = _DIGEST.search(status.image_id or "") if status else None
        found[pod.metadata.name] = ContainerRestarts(
            int(status.restart_count or 0) if status else 0,
            ended.reason if ended is not None else None,
            digest[0] if digest else None,
            status is not None,
        )
    return found


def _labels(item: Any) -> dict[str, str]:
    return dict((item.metadata.labels if item.metadata else None) or {})


def _engine_container(pod: Any, source: K8sSource) -> tuple[str, Any, Any]:
    """(name, spec, status) of the pod's engine container: the one named, else its first."""
    specs = pod.spec.containers or []
    name = source.container or (specs[0].name if specs else "")
    status = next((s for s in (pod.status.container_statuses or []) if s.name == name), None)
    return name, next((c for c in specs if c.name == name), None), status


def _pod(api: Any, pod: Any, source: K8sSource) -> PodFacts:
    from kubernetes.client.exceptions import ApiException

    name, spec, status = _engine_container(pod, source)
    log = error = None
    try:
        log = api.read_namespaced_pod_log(
            pod.metadata.name, pod.metadata.namespace, container=name, limit_bytes=LOG_LIMIT
        )
    except ApiException as exc:
        error = f"log not read: {exc.status} {exc.reason}"
    return PodFacts(
        name=pod.metadata.name,
        node=pod.spec.node_name,
        container=name,
        image=status.image if status else (spec.image if spec else None),
        image_id=status.image_id if status else None,
        restarts=int(status.restart_count or 0) if status else 0,
        ready=bool(status.ready) if status else False,
        log=log,
        log_error=error,
    )


def _matches(labels: dict[str, str], selector: str) -> bool:
    """Equality-based selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`), applied again here:
    golive must not judge pods the selector excludes, whatever the server did."""
    for term in filter(None, (t.strip() for t in re.split(r",(?![^()]*\))", selector))):
        if "!=" in term:
            key, value = (s.strip() for s in term.split("!=", 1))
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = (s.strip() for s in term.replace("==", "=").split("=", 1))
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif " in " in term or " notin " in term:
            continue  # set-based: left to the API server
        elif term not in labels:
            return False
    return True


def node_hosts(report: K8sReport) -> list[HostInfo]:
    """Host facts from NVIDIA GPU feature discovery's node labels, where present."""
    hosts = []
    for node, labels in sorted(report.node_labels.items()):
        if not any(key.startswith(_GFD) for key in labels):
            continue
        major = labels.get("nvidia.com/cuda.driver.major")
        parts = [
            major,
            labels.get("nvidia.com/cuda.driver.minor"),
            labels.get("nvidia.com/cuda.driver.rev"),
        ]
        driver = ".".join(p for p in parts if p) if major else None
        count = int(labels.get("nvidia.com/gpu.count", "0") or 0)
        memory = labels.get("nvidia.com/gpu.memory")
        product = labels.get("nvidia.com/gpu.product", "unknown").replace("-", " ")
        gpus = tuple(
            GpuInfo(index=i, name=product, memory_total_mib=int(memory) if memory else None)
            for i in range(count)
        )
        cuda = labels.get("nvidia.com/cuda.runtime.major") or labels.get(
            "nvidia.com/cuda.runtime-version.major"
        )
        hosts.append(
            HostInfo(
                node=node,
                source="gpu-feature-discovery labels",
                driver_version=driver,
                cuda_driver_version=None if cuda is None else f"{cuda}.0",
                gpus=gpus,
            )
        )
    return hosts


def k8s_results(report: K8sReport, image: str | None) -> list[CheckResult]:
    """environment.k8s_images (critical) and environment.k8s_restarts."""
    where = f"{report.source.namespace}/{report.source.selector}"
    evidence = (K8S_PODS,)
    if not report.pods:
        return [
            ENVIRONMENT_RESULT(
                "environment.k8s_images",
                Status.NO_DATA,
                f"no pod matches {where}: check --k8s-namespace and --selector",
                evidence=evidence,
            )
        ]
    digests = {pod.name: pod.digest for pod in report.pods}
    measurements: dict[str, Any] = {f"digest[{n}]": d for n, d in digests.items()}
    missing = sorted(n for n, d in digests.items() if d is None)
    expected = _DIGEST.search(image or "")
    counts: dict[str, int] = {}
    for digest in digests.values():
        if digest:
            counts[digest] = counts.get(digest, 0) + 1
    majority = max(counts, key=lambda d: counts[d]) if counts else None
    reference = expected.group(0) if expected else majority
    odd = sorted(n for n, d in digests.items() if d and d != reference)
    if odd:
        status, summary = (
            Status.FAIL,
            f"pod(s) {', '.join(odd)} run another image digest than "
            + ("--image" if expected else f"the other pods ({reference})")
            + ": "
            + ", ".join(f"{n}: {digests[n]}" for n in odd),
        )
    elif missing:
        status, summary = (
            Status.NO_DATA,
            f"no resolved imageID for {', '.join(missing)} (not started?): the image they run "
            "is unknown",
        )
    else:
        status, summary = (
            Status.PASS,
            f"{len(report.pods)} pod(s) in {where} run one image digest, {reference}"
            + (" (as --image says)" if expected else ""),
        )
    results = [
        ENVIRONMENT_RESULT(
            "environment.k8s_images", status, summary, measurements, evidence=evidence
        )
    ]
    restarted = {p.name: p.restarts for p in report.pods if p.restarts}
    results.append(
        ENVIRONMENT_RESULT(
            "environment.k8s_restarts",
            Status.WARN if restarted else Status.PASS,
            (
                "engine container restarts: "
                + ", ".join(f"{n}: {r}" for n, r in sorted(restarted.items()))
                if restarted
                else f"no engine container restarted ({len(report.pods)} pod(s))"
            ),
            {f"restarts[{p.name}]": p.restarts for p in report.pods},
            critical=False,
            evidence=evidence,
        )
    )
    return results


def judge_pods(evidence: BundleReader) -> list[CheckResult]:
    """environment.k8s_images and k8s_restarts again from `environment/k8s-pods.json` (the
    pods as read, the selection and the --image given): the live run's rule on the saved
    facts, so an edited verdict cannot pass a pod on another digest."""
    saved = evidence.json(K8S_PODS)
    source = saved.get("source") if isinstance(saved, Mapping) else None
    rows = saved.get("pods") if isinstance(saved, Mapping) else None
    image = saved.get("image") if isinstance(saved, Mapping) else None
    if not isinstance(source, Mapping) or not isinstance(rows, list):
        return [_unreadable(f"{K8S_PODS} has no pod list or selection")]
    try:
        pods = tuple(
            PodFacts(
                name=str(row["name"]),
                node=row.get("node"),
                container=str(row.get("container")),
                image=row.get("image"),
                image_id=row.get("image_id"),
                restarts=int(row.get("restarts") or 0),
                ready=bool(row.get("ready")),
                log=None,
                log_error=row.get("log_error"),
            )
            for row in rows
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return [_unreadable(f"{K8S_PODS}: a pod entry is malformed ({exc})")]
    where = K8sSource(str(source.get("namespace")), str(source.get("selector")))
    return k8s_results(K8sReport(where, pods, {}), image if isinstance(image, str) else None)


def _unreadable(why: str) -> CheckResult:
    return ENVIRONMENT_RESULT("environment.k8s_images", Status.NO_DATA, why, evidence=(K8S_PODS,))
