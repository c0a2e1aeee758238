"""The watch watches the deployment its bundle accepted (issue 29 §8).

Before the first interval, `golive watch` asks the server what it is (`/version`,
`/v1/models`, saved in the watch bundle's `requests/identity.jsonl`) and compares it with the
accepted bundle's identity: the vLLM version, the served model (its name and the model
behind it) and the context length it serves (`max_model_len`, which `/v1/models` states
without a log), the engine's cache settings as `/metrics` states them (`vllm:cache_config_info`:
block size, KV dtype, prefix caching, memory utilisation and the rest of what the launch set,
without a log), and, where `--log` holds a launch, every other launch argument. A server
that differs is refused: its envelope, cache baseline and rollback target are another
deployment's, so nothing the watch would say of it means anything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from golive.bundle.store import BundleReader, locate, locate_all
from golive.checks.cache.judge import cache_labels, labels_of
from golive.checks.cache.rules import START_SCRAPE
from golive.checks.context import CheckContext, scrape
from golive.checks.deployment import IDENTITY_FILE, ask_identity, deployment_of
from golive.checks.env.judge import serving_launch
from golive.errors import ConfigError
from golive.evidence.startup_log import StartupFacts, parse_startup_log
from golive.verdict.document import VerdictDocument

IDENTITY_SCRAPE = "watch-identity"  # metrics/watch-identity.prom: its cache settings, asked again
# the launch's other arguments are compared where --log holds the launch
COMPARED = ("vllm_version", "model", "model_root", "max_model_len")
# where the same launch may differ between two starts: the address it listens on
_PLACE = ("host", "port")
# cache_config_info labels the engine measures or numbers at start (the same launch may
# profile a few blocks more or less), not set by the launch
MEASURED = frozenset(
    {
        "engine",
        "_block_size_resolved",
        "num_gpu_blocks",
        "num_cpu_blocks",
        "kv_cache_size_tokens",
        "kv_cache_max_concurrency",
        "mamba_page_size_padded",
    }
)
_SECRET = re.compile(r"(^|_)(key|token|secret|password|passwd|credentials?|auth)(_|$)", re.I)


def identity_differences(accepted: Mapping[str, Any], live: Mapping[str, Any]) -> list[str]:
    """Each field the accepted bundle knows that this server says otherwise or cannot say
    (the model root is compared by its last path part: a model mounted elsewhere is still
    that model)."""
    out = []
    for field in COMPARED:
        then, now = accepted.get(field), live.get(field)
        if then is None:
            continue
        if field == "model_root" and now is not None:
            then, now = _last_part(str(then)), _last_part(str(now))
        if now is None:
            out.append(f"{field}: not answered here, {then!r} accepted")
        elif now != then:
            out.append(f"{field}: {now!r} here, {then!r} accepted")
    return out


def launch_differences(accepted: StartupFacts | None, live: StartupFacts | None) -> list[str]:
    """The launch arguments (besides the address) that differ between the accepted launch and
    the one `--log` holds; nothing where either is unknown."""
    if accepted is None or live is None or not accepted.non_default_args:
        return []
    if not live.non_default_args:
        return []
    then, now = _launch(accepted.non_default_args), _launch(live.non_default_args)
    return [
        f"launch argument {key}: {now.get(key)!r} here, {then.get(key)!r} accepted"
        for key in sorted({*then, *now})
        if then.get(key) != now.get(key)
    ]


def cache_config_differences(accepted: Mapping[str, str], live: Mapping[str, str]) -> list[str]:
    """The launch-set labels of `vllm:cache_config_info` that differ between the accepted
    bundle's scrape and this server's (labels either side lacks are not compared: another
    vLLM build names other labels, and the version is compared on its own)."""
    shared = (set(accepted) & set(live)) - MEASURED
    return [
        f"engine cache setting {key} (vllm:cache_config_info): {live[key]!r} here, "
        f"{accepted[key]!r} accepted"
        for key in sorted(shared)
        if accepted[key] != live[key]
    ]


def accepted_cache_config(root: Path) -> dict[str, str]:
    """The accepted bundle's `vllm:cache_config_info` labels: from the cache proof's first
    scrape, else the first kept scrape (a combined bundle's parts too) that states them ({}
    where none does)."""
    start = locate(root, f"metrics/{START_SCRAPE}.prom")
    for path in (start, *locate_all(root, "metrics/*.prom")):
        if path.is_file():
            labels = cache_labels(path.read_text(encoding="utf-8", errors="replace"))
            if labels:
                return labels
    return {}


def _launch(args: Mapping[str, Any]) -> dict[str, Any]:
    # a secret (an API key vLLM printed) is neither compared nor shown
    out = {k: v for k, v in args.items() if k not in _PLACE and not _SECRET.search(k)}
    if isinstance(out.get("model"), str):
        out["model"] = _last_part(out["model"])
    return out


def _last_part(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def accepted_identity(root: Path, wanted: str | None) -> dict[str, Any]:
    """The accepted bundle's identity: verdict.json's (a combined bundle's too), else what
    its evidence says."""
    recorded = VerdictDocument.read(root).identity
    if recorded:
        return dict(recorded)
    return deployment_of(BundleReader(root), wanted).to_json()


async def require_accepted_deployment(
    ctx: CheckContext, accepted: Path, log_file: Path | None
) -> str | None:
    """Refuse a server that is not the deployment `accepted` judged (ConfigError, naming
    every difference). Returns why its launch (parsers, parallel layout, flags) was not
    wholly compared — no `--log` to read it from — or None where it was."""
    await ask_identity(ctx)
    live = deployment_of(BundleReader(ctx.bundle.root), ctx.config.target.model).to_json()
    found: Sequence[str] = identity_differences(
        accepted_identity(accepted, ctx.config.target.model), live
    )
    # the scrape ask_identity kept (metrics/identity.prom), else one more: a failed scrape is
    # not a server that states nothing
    live_cache = cache_labels(BundleReader(ctx.bundle.root).text(f"metrics/{IDENTITY_FILE}.prom"))
    if not live_cache:
        again = await scrape(ctx, IDENTITY_SCRAPE)
        live_cache = {} if again.snapshot is None else labels_of(again.snapshot)
    then_cache = accepted_cache_config(accepted)
    found = [*found, *cache_config_differences(then_cache, live_cache)]
    compared = (
        "compared with the accepted one only by what /metrics states of its cache settings"
        if live_cache and then_cache
        else "not compared with the accepted one"
    )
    then = serving_launch(BundleReader(accepted))
    now = None
    if log_file is not None and log_file.is_file():
        now = parse_startup_log(log_file.read_text(encoding="utf-8", errors="replace"))
        found = [*found, *launch_differences(then, now)]
    why = (
        "no --log"
        if log_file is None
        else f"{log_file} is not a file"
        if now is None
        else f"{log_file} holds no launch (vLLM's non-default args line)"
        if not now.non_default_args
        else f"the accepted bundle {accepted} keeps no launch"
        if then is None or not then.non_default_args
        else None
    )
    unread = (
        None
        if why is None
        else f"the server's launch was {compared} ({why}): a relaunch with another tool parser "
        "or parallel layout of the same model and version is not told apart; give --log with "
        "the serving process's log"
    )
    if found:
        raise ConfigError(
            f"{ctx.target.url('/v1/models')} is not the deployment {accepted} accepted: "
            f"{'; '.join(found)}. Watch the accepted deployment, or run and sign golive for "
            "this one first"
        )
    return unread
