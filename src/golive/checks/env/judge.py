"""The version chain judged from the bundle alone (issue 18): the host and container facts,
the startup log and what the live server said, as the collector saved them, against the
profile and the declared topology. `golive env`/`run` call it on the bundle they are
writing; `golive decide` calls it again."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from golive.bundle.layout import (
    CHAIN_INPUTS,
    CONTAINER,
    ENV_METRICS,
    ENV_REQUESTS,
    K8S_PODS,
    STARTUP_LOG,
)
from golive.bundle.store import BundleReader
from golive.checks.context import served_entry
from golive.checks.env.chain_inputs import ChainInputs, PodImage, Source
from golive.checks.env.cuda_driver import (
    check_container_cuda,
    check_driver_runtime,
    check_host_driver,
)
from golive.checks.env.gpus import check_gpus
from golive.checks.env.image import check_image
from golive.checks.env.nccl_transport import check_nccl_transport
from golive.checks.env.startup_parallel import check_parallel
from golive.checks.env.startup_rules import (
    as_other_launch,
    check_kv_cache,
    check_parsers,
    check_prefix_caching_flag,
    check_startup_log,
    other_launch,
)
from golive.checks.env.vllm_build import check_vllm_version
from golive.config import GoliveConfig
from golive.errors import BadResponse, BundleError
from golive.evidence.facts import ContainerInfo, HostInfo
from golive.evidence.startup_log import LiveServer, StartupFacts, parse_startup_log
from golive.metrics import parse_metrics
from golive.profiles import Profile
from golive.results import CheckResult

# the ids of the chain rules' checks, in RULES' order (a test holds the two together); a
# rule may give none where it has nothing to judge (environment.nccl_transport on one node
# without NCCL lines), so bundles sealed before it re-derive as sealed
CHAIN_CHECKS = (
    "environment.image",
    "environment.vllm_version",
    "environment.container_cuda",
    "environment.host_driver",
    "environment.driver_runtime",
    "environment.gpus",
    "environment.nccl_transport",
    "startup.log",
    "startup.parsers",
    "startup.prefix_caching",
    "startup.parallel",
    "startup.kv_cache",
)
RULES: tuple[Callable[[ChainInputs], CheckResult | None], ...] = (
    check_image,
    check_vllm_version,
    check_container_cuda,
    check_host_driver,
    check_driver_runtime,
    check_gpus,
    check_nccl_transport,
    check_startup_log,
    check_parsers,
    check_prefix_caching_flag,
    check_parallel,
    check_kv_cache,
)


def saved_inputs(
    live: tuple[Source | None, Source | None, Source | None],
    image: Source | None,
    hosts: list[str],
    container: bool,
    startup: bool,
    cache_info: Mapping[str, str],
    node_containers: Sequence[str] = (),
) -> dict[str, Any]:
    """`environment/chain-inputs.json`: the live server's answers and the image reference
    with where each came from, and which saved files the rules read."""
    version, max_model_len, model = live
    return {
        "live": {
            "vllm_version": _source_json(version),
            "max_model_len": _source_json(max_model_len),
            "model": _source_json(model),
        },
        "image": _source_json(image),
        "hosts": hosts,
        "container": CONTAINER if container else None,
        "startup": STARTUP_LOG if startup else None,
        "cache_info": dict(cache_info),
        "node_containers": list(node_containers),
    }


def chain_inputs(
    evidence: BundleReader, profile: Profile, config: GoliveConfig
) -> ChainInputs | None:
    """The rules' inputs read back from the bundle; None where the chain was not collected."""
    saved = evidence.json(CHAIN_INPUTS)
    if not isinstance(saved, Mapping):
        return None
    mismatch = live_differences(evidence, saved, config.target.model)
    if mismatch:
        raise BundleError("; ".join(mismatch))
    log = evidence.text(STARTUP_LOG) if saved.get("startup") else None
    container_text = evidence.text(CONTAINER) if saved.get("container") else None
    version, max_model_len, model = _live_sources(saved)
    return ChainInputs(
        profile=profile,
        live_version=version,
        live_max_model_len=max_model_len,
        live_model=model,
        image=_source(saved.get("image")),
        startup=None if log is None else parse_startup_log(log, live_server(saved)),
        container=None
        if container_text is None
        else ContainerInfo.model_validate_json(container_text),
        node_containers=read_node_containers(evidence, saved.get("node_containers")),
        hosts=tuple((_host(evidence, rel), rel) for rel in saved.get("hosts") or ()),
        declared_parallel=config.environment.parallel,
        gpu_class=config.environment.gpu_class or profile.chain.gpu_class,
        gpu_total=config.environment.gpus or profile.chain.gpus,
        custom_build=config.environment.custom_build,
        cache_info=dict(saved.get("cache_info") or {}),
        pods=pod_images(evidence),
    )


def pod_images(evidence: BundleReader) -> tuple[PodImage, ...]:
    """Each engine pod's spec image and resolved imageID from the saved pod list (none where
    the pods were not read, or the file is not a pod list)."""
    saved = evidence.json(K8S_PODS)
    rows = saved.get("pods") if isinstance(saved, Mapping) else None
    if not isinstance(rows, list):
        return ()
    return tuple(
        PodImage(_text(row.get("image")), _text(row.get("image_id")))
        for row in rows
        if isinstance(row, Mapping)
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


_NODE_CONTAINER = re.compile(r"environment/container-[^/]+\.json")


def read_node_containers(
    evidence: BundleReader, listed: Any
) -> tuple[tuple[ContainerInfo | None, str], ...]:
    """Each node's serving container (Ray): those chain-inputs.json lists (None where the file
    is gone) and any other `environment/container-<node>.json` the bundle holds, whatever the
    list says (a bundle whose list was deleted is judged on the files it holds)."""
    if not isinstance(listed, list):
        listed = []
    found = {
        f"environment/{p.name}" for p in (evidence.root / "environment").glob("container-*.json")
    }
    named = {str(r) for r in listed if _NODE_CONTAINER.fullmatch(str(r))}
    out = []
    for rel in sorted(named | found):
        text = evidence.text(rel)
        out.append((None if text is None else ContainerInfo.model_validate_json(text), rel))
    return tuple(out)


def live_differences(
    evidence: BundleReader, saved: Mapping[str, Any], wanted: str | None
) -> list[str]:
    """chain-inputs.json's live answers and cache config are what the saved `/version` and
    `/v1/models` records and the env scrape say: an edited copy is named, never judged."""
    said: dict[str, str | None] = dict.fromkeys(("vllm_version", "max_model_len", "model"))
    for record in evidence.records(ENV_REQUESTS):
        status, body = record.http_status, record.response
        if record.failure is not None or status is None or status // 100 != 2:
            continue
        if record.label == "env-version" and isinstance(body, dict) and "version" in body:
            said["vllm_version"] = str(body["version"])
        if record.label == "env-models":
            entry, _ = served_entry(body, wanted)
            if entry is not None:
                length = entry.get("max_model_len")
                said["model"] = str(entry["id"])
                said["max_model_len"] = str(length) if isinstance(length, int) else None
    values = [None if s is None else s.value for s in _live_sources(saved)]
    stated = dict(zip(said, values, strict=True))
    found = [
        f"{CHAIN_INPUTS}: live {key} {stated[key]!r}, but {ENV_REQUESTS} says {said[key]!r}"
        for key in said
        if stated[key] != said[key]
    ]
    cache_info = saved.get("cache_info") or {}
    scraped = scraped_cache_info(evidence.text(ENV_METRICS))
    if dict(cache_info) != scraped:
        found.append(f"{CHAIN_INPUTS}: cache_info is not the one in {ENV_METRICS}")
    return found


def scraped_cache_info(text: str | None) -> dict[str, str]:
    """The labels of `vllm:cache_config_info` in the saved env scrape: what the collector
    records and decide reads again, from the same text (a scrape that is not a vLLM
    /metrics, or cannot be parsed, has none)."""
    if text is None:
        return {}
    try:
        snapshot = parse_metrics(text, taken_at=0.0)
    except BadResponse:
        return {}
    if not snapshot.has_vllm_metrics():
        return {}
    info = snapshot.series("cache_config_info")
    return dict(info[0].labels) if info else {}


def _live_sources(saved: Mapping[str, Any]) -> tuple[Source | None, ...]:
    live = saved.get("live") or {}
    if not isinstance(live, Mapping):
        return (None, None, None)
    return tuple(_source(live.get(key)) for key in ("vllm_version", "max_model_len", "model"))


def live_server(saved: object) -> LiveServer:
    """What the live server said of itself, from `environment/chain-inputs.json`."""
    if not isinstance(saved, Mapping):
        return LiveServer()
    return LiveServer(*(None if s is None else s.value for s in _live_sources(saved)))


def serving_launch(evidence: BundleReader) -> StartupFacts | None:
    """The bundle's startup log, read as the launch the live server is: every judge that
    reads the log (chain, model load, capacity request, identity) reads this one."""
    log = evidence.text(STARTUP_LOG)
    if log is None:
        return None
    return parse_startup_log(log, live_server(evidence.json(CHAIN_INPUTS)))


def chain_results(inputs: ChainInputs) -> list[CheckResult]:
    judged = [result for rule in RULES if (result := rule(inputs)) is not None]
    return as_other_launch(judged, other_launch(inputs))


def judge_chain(
    evidence: BundleReader, profile: Profile, config: GoliveConfig
) -> list[CheckResult]:
    inputs = chain_inputs(evidence, profile, config)
    return [] if inputs is None else chain_results(inputs)


def _host(evidence: BundleReader, rel: str) -> HostInfo:
    text = evidence.text(rel)
    if text is None:
        raise BundleError(f"{evidence.root / rel}: named in {CHAIN_INPUTS} but missing")
    return HostInfo.model_validate_json(text)


def _source(row: Any) -> Source | None:
    if not isinstance(row, Mapping):
        return None
    return Source(str(row["value"]), str(row["where"]))


def _source_json(source: Source | None) -> dict[str, str] | None:
    return None if source is None else {"value": source.value, "where": source.where}
