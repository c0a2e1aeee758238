"""`golive env`: gather the chain's evidence into the bundle, then apply the chain rules.

Inputs are read and validated before any bundle is created (a wrong path is a usage error
that names the file); inside the programme every input is first saved whole into
`environment/`, so each rule can cite the file and line it judged.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from golive.bundle.layout import (
    CHAIN,
    CHAIN_INPUTS,
    CONTAINER,
    ENV_METRICS,
    ENV_REQUESTS,
    K8S_PODS,
    RAY_NODES,
    STARTUP_LOG,
)
from golive.bundle.store import BundleReader
from golive.checks.context import CheckContext, scrape, served_of
from golive.checks.env.chain_inputs import ChainInputs, Source
from golive.checks.env.judge import (
    chain_inputs,
    chain_results,
    saved_inputs,
    scraped_cache_info,
)
from golive.errors import ConfigError, EvidenceError
from golive.evidence.facts import ContainerInfo, HostInfo, read_facts
from golive.evidence.image_ref import same_repository, split_image
from golive.evidence.k8s_env import K8sSource, k8s_results, node_hosts, read_cluster
from golive.evidence.nvidia import parse_nvidia_smi_xml
from golive.evidence.ray_env import RaySource, collect_cluster, node_results, saved_cluster
from golive.results import ENVIRONMENT_RESULT, CheckResult, Status


@dataclass(frozen=True, slots=True)
class EnvEvidence:
    """User-given evidence, already read and validated (pure data from here on)."""

    log_text: str | None = None
    hosts: tuple[HostInfo, ...] = ()
    host_raw: tuple[tuple[str, str], ...] = ()  # (node, nvidia-smi XML) as given
    container: ContainerInfo | None = None
    image: str | None = None
    ray: RaySource | None = None  # collect every node's facts from this Ray cluster too
    k8s: K8sSource | None = None  # read the engine pods and their nodes through Kubernetes


def _read_text(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot be read ({exc.strerror})") from exc


def _node_name(path: Path, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem) or "node"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name


def load_evidence(
    log: Path | None,
    nvidia_smi_xml: Sequence[Path],
    host_info: Sequence[Path],
    container_info: Path | None,
    image: str | None,
) -> EnvEvidence:
    """Read every given file; a bad file is a usage error naming it and the fix."""
    taken: set[str] = set()
    hosts: list[HostInfo] = []
    raw: list[tuple[str, str]] = []
    try:
        for path in nvidia_smi_xml:
            node = _node_name(path, taken)
            text = _read_text(path, "--nvidia-smi-xml")
            hosts.append(parse_nvidia_smi_xml(text, node, str(path)))
            raw.append((node, text))
        for path in host_info:
            info = read_facts(path, HostInfo)
            node = info.node if info.node not in taken else _node_name(path, taken)
            taken.add(node)
            hosts.append(info.model_copy(update={"node": node}))
        container = read_facts(container_info, ContainerInfo) if container_info else None
    except EvidenceError as exc:
        raise ConfigError(str(exc)) from exc
    return EnvEvidence(
        log_text=_read_text(log, "--log") if log else None,
        hosts=tuple(hosts),
        host_raw=tuple(raw),
        container=container,
        image=image,
    )


def env_programme(evidence: EnvEvidence) -> Callable[[CheckContext], Any]:
    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_env(ctx, evidence)

    return programme


async def run_env(ctx: CheckContext, evidence: EnvEvidence) -> list[CheckResult]:
    bundle = ctx.bundle
    k8s_checks: list[CheckResult] = []
    if evidence.k8s is not None:
        evidence, k8s_checks = await _from_k8s(ctx, evidence, evidence.k8s)
    if evidence.log_text is not None:
        bundle.write_text(STARTUP_LOG, evidence.log_text)
    for node, xml in evidence.host_raw:
        bundle.write_text(f"environment/nvidia-smi-{node}.xml", xml)
    hosts, container, node_checks = list(evidence.hosts), evidence.container, []
    node_containers: list[str] = []
    if evidence.ray is not None:
        cluster, problem = None, None
        try:
            cluster = await asyncio.to_thread(collect_cluster, evidence.ray)
        except EvidenceError as exc:
            problem = str(exc)
        bundle.write_json(RAY_NODES, saved_cluster(evidence.ray, cluster, problem))
        if cluster is not None:
            hosts += [n.host for n in cluster.nodes if n.host is not None and n.error is None]
            for member in cluster.nodes:
                if member.container is not None:
                    rel = f"environment/container-{member.name}.json"
                    bundle.write_text(rel, member.container.model_dump_json(indent=2))
                    node_containers.append(rel)
                    container = container or member.container
        node_checks = node_results(evidence.ray, cluster, problem)
    host_paths = []
    for host in hosts:
        rel = f"environment/host-{host.node}.json"
        bundle.write_text(rel, host.model_dump_json(indent=2))
        host_paths.append((host, rel))
    if container is not None:
        bundle.write_text(CONTAINER, container.model_dump_json(indent=2))
    live_version, live_len, live_model, cache_info = await _live_facts(ctx)
    saved = saved_inputs(
        (live_version, live_len, live_model),
        _image_source(ctx, evidence),
        [rel for _, rel in host_paths],
        container is not None,
        evidence.log_text is not None,
        cache_info,
        node_containers,
    )
    bundle.write_json(CHAIN_INPUTS, saved)
    inputs = chain_inputs(BundleReader(bundle.root), ctx.profile, ctx.config)
    assert inputs is not None  # written just above
    results = chain_results(inputs)
    bundle.write_json(CHAIN, chain_report(inputs, results))
    return [*results, *node_checks, *k8s_checks]


async def _from_k8s(
    ctx: CheckContext, evidence: EnvEvidence, source: K8sSource
) -> tuple[EnvEvidence, list[CheckResult]]:
    """The pods' facts into the bundle; their nodes' labels as hosts; a pod's log as the
    startup log when none was given."""
    try:
        report = await asyncio.to_thread(read_cluster, source)
    except EvidenceError as exc:
        return evidence, [
            ENVIRONMENT_RESULT(
                "environment.k8s_images", Status.NO_DATA, f"no pod evidence from Kubernetes: {exc}"
            )
        ]
    pods = [{k: v for k, v in asdict(p).items() if k != "log"} for p in report.pods]
    ctx.bundle.write_json(
        K8S_PODS,
        {  # what golive decide judges the pods from again (k8s_env.judge_pods)
            "source": {"namespace": source.namespace, "selector": source.selector},
            "image": evidence.image,
            "pods": pods,
            "nodes": report.node_labels,
        },
    )
    for pod in report.pods:
        if pod.log is not None:
            ctx.bundle.write_text(f"environment/pod-{pod.name}.log", pod.log)
    log = evidence.log_text or next((p.log for p in report.pods if p.log), None)
    hosts = (*evidence.hosts, *node_hosts(report))
    checks = k8s_results(report, evidence.image)
    return replace(evidence, log_text=log, hosts=hosts), checks


def _image_source(ctx: CheckContext, evidence: EnvEvidence) -> Source | None:
    if evidence.image:
        return Source(evidence.image, "--image")
    if ctx.config.environment.image:
        return Source(ctx.config.environment.image, "config/effective.yaml#environment.image")
    container = evidence.container
    if container is not None and container.image:
        # the repo digest of the repository the container names (a mirror's is another's)
        name = split_image(container.image)[0]
        pulled = (split_image(d) for d in container.image_digests)
        digest = next((dg for n, _, dg in pulled if dg and same_repository(n, name)), None)
        ref = (
            f"{container.image}@{digest}"
            if digest and "@" not in container.image
            else container.image
        )
        return Source(ref, "environment/container.json#image")
    return None


async def _live_facts(
    ctx: CheckContext,
) -> tuple[Source | None, Source | None, Source | None, dict[str, str]]:
    """Version, max_model_len and model from the live server, cache config from its metrics."""
    if ctx.config.target.url is None:
        return None, None, None, {}
    version = models = model = None
    record = ctx.save(await ctx.target.get("/version", "env-version"), "env")
    if record.record.ok and isinstance(record.json_body, dict) and "version" in record.json_body:
        version = Source(str(record.json_body["version"]), "requests/env.jsonl#/version")
    record = ctx.save(await ctx.target.get("/v1/models", "env-models"), "env")
    served = served_of(record, ctx.config.target.model, ENV_REQUESTS)
    if served is not None:
        ctx.facts.served = served
        model = Source(served.model, "requests/env.jsonl#/v1/models")
        if served.max_model_len is not None:
            models = Source(str(served.max_model_len), "requests/env.jsonl#/v1/models")
    await scrape(ctx, "env")  # saved as metrics/env.prom, read as decide reads it
    saved = ctx.bundle.path(ENV_METRICS)
    text = saved.read_text(encoding="utf-8", errors="replace") if saved.is_file() else None
    return version, models, model, scraped_cache_info(text)


def chain_report(inputs: ChainInputs, results: Sequence[CheckResult]) -> dict[str, Any]:
    """environment/chain.json: each layer's facts and each link's verdict, side by side."""
    startup = inputs.startup
    container = inputs.container
    return {
        "profile": inputs.profile.name,
        "expected": inputs.profile.chain.model_dump(),
        "image": None if inputs.image is None else inputs.image.value,
        "live": {
            "vllm_version": None if inputs.live_version is None else inputs.live_version.value,
            "max_model_len": None
            if inputs.live_max_model_len is None
            else inputs.live_max_model_len.value,
            "cache_config": dict(inputs.cache_info),
        },
        "container": None
        if container is None
        else {
            "vllm": container.vllm_version,
            "torch": container.torch_version,
            "torch_cuda": container.torch_cuda,
            "cudart": container.cudart_version,
            "driver_api": container.cuda_driver_api_version,
            "nccl": container.nccl_version,
            "cuda_compat_libs": list(container.cuda_compat_libs),
            "serve_command": list(container.serve_command),
        },
        "hosts": [
            {
                "node": host.node,
                "driver": host.driver_version,
                "cuda_driver": host.cuda_driver_version,
                "gpus": [g.name for g in host.gpus],
                "evidence": path,
            }
            for host, path in inputs.hosts
        ],
        "startup": None
        if startup is None
        else {
            "vllm_version": startup.vllm_version,
            "tool_call_parser": startup.tool_parser,
            "reasoning_parser": startup.reasoning_parser,
            "prefix_caching": startup.prefix_caching,
            "parallel": startup.parallel(),
            "kv_cache_tokens": startup.kv_cache_tokens,
            "failures": [
                {"kind": s.kind, "line": s.line, "severity": s.severity.value}
                for s in startup.signatures
            ],
        },
        "links": [
            {
                "check": r.id,
                "status": r.status.value,
                "summary": r.summary,
                "evidence": list(r.evidence),
            }
            for r in results
        ],
    }
