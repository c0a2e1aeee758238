"""Recipes: open a bundle, run a programme of checks against a target, decide, seal.

Whatever happens inside a programme, the bundle ends with a verdict and a manifest: an
unexpected crash becomes a critical `integrity` error (outcome `hold`), never a lost run.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from golive import __version__
from golive.bundle.layout import (
    CAPACITY_REQUEST_JSON,
    CAPACITY_REQUEST_MD,
    EFFECTIVE_CONFIG,
    METRIC_REFERENCE,
    POLICY,
    PROFILE,
    REPORT_MD,
    VERDICT,
)
from golive.bundle.signing import load_private_key
from golive.bundle.store import Bundle, BundleReader, size_bytes
from golive.checks.cache.prefix_size import prefix_refusals
from golive.checks.context import CheckContext, NoTarget, PhaseProgress, Quiet, Target
from golive.checks.deployment import ask_identity, deployment_of
from golive.checks.identity import judge_identity
from golive.checks.ledger import write_ledger
from golive.checks.model_profile import judge_model_profile
from golive.checks.relaxations import profile_refusals
from golive.config import GoliveConfig, OwnerRule, config_digest
from golive.errors import ConfigError, TargetNotMeasurable
from golive.evidence.metric_reference import bundle_scrapes, metric_reference
from golive.evidence.runtime_log import server_log_evidence
from golive.operate.rollback import identity
from golive.operate.watch import WatchSettings, run_watch
from golive.operate.watch_summary import WatchSummary
from golive.orchestration.interrupt import Guard
from golive.orchestration.rederive import judged_from_evidence
from golive.orchestration.signature import write_signoff
from golive.orchestration.signoff import (
    UNASSIGNED,
)
from golive.profiles import Profile, load_profile, profile_text
from golive.report.capacity_request import capacity_request, render_capacity_request
from golive.report.markdown import bundle_markdown
from golive.results import INTEGRITY_RESULT, CheckResult, Decision, Outcome, Status
from golive.traffic.client import ClientSettings, TargetClient, read_api_key
from golive.traffic.preflight import preflight
from golive.verdict.decide import decide, limits
from golive.verdict.document import (
    ActionEntry,
    CheckEntry,
    ExercisedEnvelope,
    RollbackTarget,
    SkippedEntry,
    VerdictDocument,
    rules_of,
    timestamp,
)
from golive.verdict.policy import (
    LoadedPolicy,
    apply_policy,
    load_policy,
    refuse_lowering,
    waivers_for,
)
from golive.verdict.scope import Scope, scope_json, sections_missing, skipped_by_config

Programme = Callable[[CheckContext], Awaitable[list[CheckResult]]]


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    bundle: Path
    document: VerdictDocument

    @property
    def data(self) -> dict[str, Any]:
        """verdict.json's content, as written."""
        return self.document.to_json()


async def judge(
    config: GoliveConfig,
    out: Path,
    command: str,
    programme: Programme,
    scope: Scope,
    server_log: Path | None = None,
    require_target: bool = True,
    remote: Sequence[RemoteClients] = (),
    route: Callable[[TargetClient], Target] | None = None,
    warn: Callable[[str], None] | None = None,
    progress: PhaseProgress | None = None,
) -> Verdict:
    """Run `programme` against the configured target and write a sealed bundle.

    A target that cannot be measured at all stops first (`traffic/preflight.py`, exit 4,
    nothing written) — unless the server's log is given and `warn` says it: then the run goes
    on, for what the log shows. An env section (`require_target` False) asks no preflight.
    `server_log`: the server's log file (`--log`), read again when the
    programme ends: the errors it logged are attributed to the checks whose requests were in
    flight. `remote`:
    clients on other machines (--ray) that the ledger counts and a signal stops; `route` puts
    them behind the target the checks use. `progress`: counts every record saved. `scope`:
    PROGRAMME, or the sections a section command runs.
    """
    if require_target:
        require_target_url(config)
    profile, policy, api_key, key = run_inputs(config)
    if config.target.url is not None and require_target:
        await _preflight(config, server_log, warn)
    bundle = Bundle.create(out, secrets=[api_key] if api_key else [])
    bundle.write_text(POLICY, policy.text)
    started = timestamp()
    bundle.write_text(
        EFFECTIVE_CONFIG, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    )
    bundle.write_text(PROFILE, profile_text(config.profile))
    clients: list[TargetClient] = []
    guard = Guard(remote)
    try:
        async with contextlib.AsyncExitStack() as stack:
            target: Target = NoTarget()
            engine: Target | None = None
            if config.target.url is not None:
                client = await stack.enter_async_context(TargetClient(client_settings(config)))
                clients.append(client)
                guard.watch(client)
                target = client if route is None else route(client)
            if config.target.engine_url is not None:
                behind = await stack.enter_async_context(
                    TargetClient(client_settings(config, config.target.engine_url))
                )
                clients.append(behind)
                guard.watch(behind)
                engine = behind
            ctx = CheckContext(
                target, bundle, config, profile, engine, progress=progress or Quiet()
            )
            done = await guard.run(_identified(ctx, programme))
            checks = done if done is not None else []
    except Exception as exc:
        checks = [_crashed(bundle, exc)]
    if guard.interruption is not None:
        checks.append(guard.interruption.check())
    if clients or remote:
        sent = sum(c.chat_requests for c in [*clients, *remote])
        checks.append(write_ledger(bundle, sent))
        checks += judge_identity(BundleReader(bundle.root))
        checks += judge_model_profile(BundleReader(bundle.root), profile, config)
    if server_log is not None:
        checks = server_log_evidence(bundle, server_log, checks)
    checks = apply_policy(policy.policy, checks, profile)
    decision = decide(checks, scope, waivers_for(policy.policy, checks, profile))
    document = verdict_document(
        config,
        profile.name,
        command,
        started,
        checks,
        decision,
        scope,
        waivers=policy.policy.waivers(decision.waived),
        policy=policy.ref(),
        rollback_target=rollback_target(bundle.root),
        judged_from_evidence=tuple(judged_from_evidence(bundle.root, checks)),
        identity=deployment_of(BundleReader(bundle.root), config.target.model).to_json(),
        interrupted=None if guard.interruption is None else guard.interruption.entry(),
        bundle_bytes=size_bytes(bundle.root),  # the evidence, before the reports
    )
    write_verdict(bundle, document)
    bundle.seal(key)
    return Verdict(decision.outcome, out, document)


def _crashed(bundle: Bundle, exc: Exception) -> CheckResult:
    """golive's own error: a critical `golive.internal` (hold), its traceback in the bundle."""
    bundle.keep_traceback("golive", exc)
    return INTEGRITY_RESULT(
        "golive.internal",
        Status.ERROR,
        f"golive stopped early on an unexpected error: {type(exc).__name__}: {exc}",
    )


async def _preflight(
    config: GoliveConfig, server_log: Path | None, warn: Callable[[str], None] | None
) -> None:
    """A target that cannot be measured at all stops here, before any bundle; with the
    server's log given (and a way to say so) the run goes on, for what the log shows (a
    startup failure is `rebuild`)."""
    try:
        await preflight(client_settings(config), config.target.model)
    except TargetNotMeasurable as exc:
        if server_log is None or warn is None:
            raise
        warn(f"{exc}; judging what the server's log shows")


async def _identified(ctx: CheckContext, programme: Programme) -> list[CheckResult]:
    """The programme, after the deployment's identity is asked (where there is a target)."""
    if not isinstance(ctx.target, NoTarget):
        ctx = await ask_identity(ctx)
    return await programme(ctx)


def write_verdict(bundle: Bundle, document: VerdictDocument) -> None:
    """verdict.json, report.md, the sign-off sheet and report.html; beside them the metric
    names and HELP texts the judgement relied on, from the bundle's own scrapes."""
    reference = metric_reference(bundle_scrapes(bundle.root), document.identity or {})
    bundle.write_json(METRIC_REFERENCE, reference)
    bundle.write_json(VERDICT, document.to_json())
    request = capacity_request(BundleReader(bundle.root), document.outcome, document.results())
    if request is not None:
        bundle.write_json(CAPACITY_REQUEST_JSON, request)
        bundle.write_text(CAPACITY_REQUEST_MD, render_capacity_request(request))
    bundle.write_text(REPORT_MD, bundle_markdown(bundle.root, document))
    write_signoff(bundle, document, None)


def rollback_target(root: Path) -> RollbackTarget:
    found = identity(root)
    return RollbackTarget(
        image=found.image,
        image_digest=found.image_digest,
        launch_config_digest=found.launch_config_digest,
        becomes_rollback_artifact="when signed go-live or observe-with-limits",
    )


class RemoteClients(Protocol):
    """Clients on other machines (`traffic/ray_load.RayLoad`)."""

    @property
    def chat_requests(self) -> int: ...

    def stop(self, reason: str) -> int: ...


def client_settings(config: GoliveConfig, url: str | None = None) -> ClientSettings:
    base = url or config.target.url
    assert base is not None
    return ClientSettings(
        base_url=base,
        api_key_env=config.target.api_key_env,
        connect_timeout_s=config.target.connect_timeout_s,
        read_timeout_s=config.target.read_timeout_s,
        request_deadline_s=config.target.request_deadline_s,
        first_byte_timeout_s=config.client.first_byte_timeout_s,
        max_response_bytes=int(config.target.max_response_mb * (1 << 20)),
    )


def action_for(check: CheckResult, rules: Sequence[OwnerRule]) -> ActionEntry:
    """Owner, deadline and rollback of a failed item: the first matching rule, else
    `unassigned` (which the sign-off then reports as an open item)."""
    rule = next((r for r in rules if fnmatch.fnmatchcase(check.id, r.match)), None)
    if rule is None:
        owner = deadline = rollback = UNASSIGNED
    else:
        owner, deadline, rollback = rule.owner, rule.deadline, rule.rollback
    return ActionEntry(
        check=check.id,
        owner=owner,
        deadline=deadline,
        rollback=rollback,
        status=check.status.value,
    )


def verdict_document(
    config: GoliveConfig,
    profile: str,
    command: str,
    started: str,
    checks: Sequence[CheckResult],
    decision: Decision,
    scope: Scope,
    **more: Any,
) -> VerdictDocument:
    """verdict.json as DESIGN.md §1 defines it. `actions`: every item that is not a pass
    (failed, unmeasured, warned and not waived), each with owner, deadline and rollback.
    `more`: the fields the caller knows (waivers, policy, rollback target, ...)."""
    open_items = [
        c
        for c in checks
        if c.status in (Status.FAIL, Status.ERROR, Status.NO_DATA)
        or (c.status is Status.WARN and c.id not in decision.waived)
        or (c.status is Status.SKIPPED and not skipped_by_config(c))
    ]
    document = VerdictDocument(
        outcome=decision.outcome,
        scope=scope_json(scope),
        sections_missing=tuple(sections_missing(scope)),
        profile=profile,
        target=config.target.url,
        command=command,
        started_at=started,
        finished_at=timestamp(),
        golive_version=__version__,
        config_digest=config_digest(config),
        checks=tuple(CheckEntry.of(c) for c in checks),
        rules_fired=rules_of(decision),
        limits=limits(checks),
        tested=ExercisedEnvelope.of(checks),
        skipped_by_config=tuple(
            SkippedEntry(check=c.id, reason=c.summary) for c in checks if skipped_by_config(c)
        ),
        actions=tuple(action_for(c, config.signoff.actions) for c in open_items),
        **more,
    )
    # the status the command exits with (3 after golive's own error, 130/143 interrupted)
    return document.model_copy(update={"exit_code": document.process_exit_code()})


def run_inputs(
    config: GoliveConfig,
) -> tuple[Profile, LoadedPolicy, str | None, Ed25519PrivateKey | None]:
    """What a run reads before anything is sent, each refused with its fix (ConfigError):
    the profile, the decision policy (one that lowers a protected check is refused), the API
    key from its variable, the signing key."""
    profile = load_profile(config.profile)
    refused = profile_refusals(profile, config) + prefix_refusals(profile, config)
    if refused:
        raise ConfigError("; ".join(refused))
    policy = load_policy(None if config.policy is None else Path(config.policy))
    refuse_lowering(policy, profile, config)
    api_key = read_api_key(config.target.api_key_env)
    key = None if config.sign_key is None else load_private_key(Path(config.sign_key))
    return profile, policy, api_key, key


def require_target_url(config: GoliveConfig) -> None:
    """Refuse a command that sends traffic without a target, naming the three ways to give it."""
    if config.target.url is None:
        raise ConfigError(
            "no target: give --target URL, target.url in the config file, or GOLIVE_TARGET_URL"
        )


async def watch_bundle(config: GoliveConfig, out: Path, settings: WatchSettings) -> WatchSummary:
    """Open a watch bundle, watch the target, seal it (also when interrupted)."""
    require_target_url(config)
    profile = load_profile(config.profile)
    api_key = read_api_key(config.target.api_key_env)
    key = None if config.sign_key is None else load_private_key(Path(config.sign_key))
    bundle = Bundle.create(out, secrets=[api_key] if api_key else [])
    bundle.write_text(
        EFFECTIVE_CONFIG, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    )
    try:
        async with TargetClient(client_settings(config)) as client:
            ctx = CheckContext(client, bundle, config, profile)
            return await run_watch(ctx, settings)
    finally:
        bundle.seal(key)
