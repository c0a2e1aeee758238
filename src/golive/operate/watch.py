"""`golive watch`: the post-approval watch window against an accepted bundle.

Every interval: `/health` plus a synthetic completion with a deadline (a hung engine can
still answer `/health`), a metrics scrape (queue, token rates, prefix-cache counters, error
and tool-parser outcomes, HTTP status counts, engine restarts: `watch_signals`), new lines
of a log file (OOM, NCCL/Xid, restarts), GPU memory through NVML when run on a node; every
few intervals a tool-call probe (the team's critical workflow, `watch.critical_probe`)
validated against its schema and a prefix-cache probe compared with the accepted bundle.
`watch_rules.evaluate` decides; each trigger is written to `watch/records.jsonl` with the
rollback target, and `--on-rollback CMD` runs once per trigger (one at a time, with a
cool-down).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from golive.bundle.layout import WATCH_OBSERVATIONS, WATCH_RECORDS, WATCH_SUMMARY
from golive.checks.agent.response import Contract, response_findings
from golive.checks.cache import CacheProtocol
from golive.checks.cache.judge import prefix_reuse
from golive.checks.cache.rules import engine_reused_tokens
from golive.checks.context import (
    CheckContext,
    PhaseProgress,
    Quiet,
    scrape,
    served_model,
    tokens_per_word,
)
from golive.config import GoliveConfig, WatchConfig
from golive.errors import ConfigError
from golive.evidence.k8s_env import K8sSource
from golive.evidence.sampling import nvml_probe
from golive.metrics import MetricsDelta, Snapshot
from golive.operate.guardrails import Envelope, envelope, read_accepted, signed_override
from golive.operate.rollback import Vouch, identity, registry_dir, rollback_target
from golive.operate.watch_identity import require_accepted_deployment
from golive.operate.watch_rules import (
    Observation,
    Thresholds,
    Trigger,
    classify_log,
    evaluate,
    probe_reuse_ratio,
)
from golive.operate.watch_signals import Background, PodRestarts, interval_values, probe_case
from golive.operate.watch_summary import TriggerRecord, WatchSummary
from golive.verdict.document import VerdictDocument


@dataclass(frozen=True, slots=True)
class WatchSettings:
    """The watch as the config's `watch` section sets it, against an accepted bundle."""

    accepted: Path
    config: WatchConfig = field(default_factory=WatchConfig)
    registry: Path | None = None
    log_file: Path | None = None
    progress: PhaseProgress = field(default_factory=Quiet)
    k8s: K8sSource | None = None  # the engine pods whose container restarts are read
    vouch: Vouch = field(kw_only=True)  # refuses a bundle decide does not re-derive

    @classmethod
    def from_config(
        cls,
        config: GoliveConfig,
        accepted: Path,
        registry: Path | None = None,
        log_file: Path | None = None,
        progress: PhaseProgress | None = None,
        k8s: K8sSource | None = None,
        *,
        vouch: Vouch,
    ) -> WatchSettings:
        return cls(
            accepted, config.watch, registry, log_file, progress or Quiet(), k8s, vouch=vouch
        )


def thresholds(env: Envelope, config: WatchConfig) -> Thresholds:
    """The accepted envelope as the watch's limits (the same numbers as the guardrails)."""
    return Thresholds(
        max_waiting=env.waiting_cap,
        max_concurrency=env.max_concurrency,
        repeated=config.repeated,
        cache_floor=None if env.cache_hit_ratio is None else round(env.cache_hit_ratio / 2, 3),
        missing_limit=config.missing_limit,
        max_5xx_share=config.max_5xx_share,
    )


def probe_prefix_tokens(verdict: VerdictDocument) -> int:
    """The cache probe's prefix: the accepted proof's shared prefix plus its user turn."""
    shared = prefix_reuse(verdict.measurements("cache.prefix_reuse")).shared_prefix_tokens
    if shared is not None and shared > 0:
        return shared + 24
    return 640


class Watcher:
    def __init__(
        self,
        ctx: CheckContext,
        settings: WatchSettings,
        model: str,
        launch_not_compared: str | None = None,
    ) -> None:
        self.ctx = ctx
        self.s = settings
        self.model = model
        self.launch_not_compared = launch_not_compared  # why no launch was compared, if none
        accepted = settings.accepted
        settings.vouch(accepted, "watch --accepted", signed_override(accepted))
        self.verdict, steps = read_accepted(accepted)
        if self.verdict.profile != ctx.profile.name:
            raise ConfigError(
                f"{accepted} was judged under the {self.verdict.profile} profile, this watch "
                f"runs under {ctx.profile.name}: give --profile {self.verdict.profile} (its "
                "critical workflow is the one the tool probe must run)"
            )
        self.th = thresholds(envelope(self.verdict, steps), settings.config)
        self.history: list[Observation] = []
        self.previous: Snapshot | None = None
        self.fired: dict[str, float] = {}
        self.rollback_lock = asyncio.Lock()
        self.last_rollback = -1e18
        self.triggers: list[TriggerRecord] = []
        self.log_offset = 0
        self.gpu = nvml_probe()
        self.tool_case = probe_case(ctx.config, ctx.profile)
        self.cache: CacheProtocol | None = None
        self.cache_warm = False
        self.cache_probes = 0
        self.health_probe: Background[tuple[bool, str, int]] = Background()
        self.last_health: tuple[bool, str, int] | None = None
        self.tool: Background[tuple[bool, str]] = Background()
        self.cache_check: Background[float | None] = Background()
        self.pods = PodRestarts(settings.k8s, identity(accepted).image_digest)
        self.target = rollback_target(registry_dir(settings.registry), settings.accepted)

    async def prepare(self) -> None:
        ratio, _ = await tokens_per_word(self.ctx, self.model)
        tokens = probe_prefix_tokens(self.verdict)
        self.cache = CacheProtocol(self.model, tokens, ratio, "watch-" + uuid.uuid4().hex[:8])
        if self.s.log_file is not None and self.s.log_file.is_file():
            self.log_offset = self.s.log_file.stat().st_size  # only what happens from now on
        await self.pods.baseline()

    async def run(self) -> WatchSummary:
        await self.prepare()
        start = time.monotonic()
        index = 0
        self.s.progress.phase("watch", self.s.config.duration_s)
        while time.monotonic() - start < self.s.config.duration_s:
            began = time.monotonic()
            observation = await self.observe(index, began - start)
            self.history.append(observation)
            self.s.progress.record(observation.healthy and observation.metrics_ok)
            self.ctx.bundle.append_jsonl(WATCH_OBSERVATIONS, asdict(observation))
            for trigger in evaluate(self.history, self.th):
                await self.fire(trigger, index)
            index += 1
            await asyncio.sleep(max(0.0, self.s.config.interval_s - (time.monotonic() - began)))
        for probe in (self.health_probe, self.tool, self.cache_check, self.pods.reading):
            await probe.cancel()
        summary = WatchSummary(
            accepted=str(self.s.accepted),
            intervals=index,
            interval_s=self.s.config.interval_s,
            thresholds=self.th,
            probe_case=self.tool_case.name,
            tool_probes=sum(o.tool_probe_ok is not None for o in self.history),
            engine_restarts=sum(bool(o.engine_restart) for o in self.history),
            http_status=http_totals(self.history),
            triggers=tuple(self.triggers),
            rollback_target=self.target,
            launch_not_compared=self.launch_not_compared,
        )
        self.ctx.bundle.write_json(WATCH_SUMMARY, summary.to_json())
        return summary

    async def observe(self, index: int, t: float) -> Observation:
        """One interval. The probes run beside the intervals (a slow engine must not
        stretch them): each is started when due and read in the interval it finishes."""
        self.health_probe.start(self.health)
        if self.last_health is None and self.health_probe.task is not None:
            await asyncio.wait({self.health_probe.task})
        self.last_health = self.health_probe.take() or self.last_health
        healthy, detail, retries = self.last_health or (False, "no probe finished yet", 0)
        snapshot = await self.scrape(index)
        values = interval_values(self.previous, snapshot)
        self.previous = snapshot or self.previous
        oom, comm, restart = classify_log(self.new_log_lines())
        gpu = await self.gpu() if self.gpu is not None else {}
        if index % self.s.config.tool_every == self.s.config.tool_every - 1:
            self.tool.start(self.tool_probe)
        if index % self.s.config.cache_every == 0:
            self.cache_check.start(self.cache_probe)
        tool_ok, tool_detail = self.tool.take() or (None, "")
        cache_ratio = self.cache_check.take()
        container_restarts, container_oom = self.pods.changes()
        used = [v for v in gpu.values() if v is not None]
        return Observation(
            t=round(t, 3),
            healthy=healthy,
            health_detail=detail,
            metrics_ok=snapshot is not None,
            retries=float(retries),
            tool_probe_ok=tool_ok,
            tool_probe_detail=tool_detail,
            cache_ratio=cache_ratio,
            oom_lines=oom,
            comm_lines=comm,
            restart_lines=restart,
            container_restarts=container_restarts,
            container_oom=container_oom,
            gpu_used_mib=sum(used) if used else None,
            **values,
        )

    async def health(self) -> tuple[bool, str, int]:
        record = await self.ctx.target.get("/health", "watch-health")
        if not record.ok:
            why = record.failure.message if record.failure else f"HTTP {record.status}"
            return False, f"/health: {why}", 0
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Reply with the word OK."}],
            "max_tokens": 2,
            "temperature": 0,
        }
        for attempt in range(2):  # one client retry, counted
            done = await self.ctx.target.chat(
                body, "watch-probe", deadline_s=self.s.config.probe_deadline_s
            )
            if done.ok:
                return True, "ok", attempt
        why = done.failure.message if done.failure else f"HTTP {done.status}"
        return False, f"/health 200 but the synthetic completion failed: {why}", 1

    async def scrape(self, index: int) -> Snapshot | None:
        """This interval's metrics; every tenth scrape is kept in the bundle."""
        window = f"watch-{index:05d}" if index % 10 == 0 else None
        return (await scrape(self.ctx, window, label="watch-metrics")).snapshot

    def new_log_lines(self) -> list[str]:
        path = self.s.log_file
        if path is None or not path.is_file():
            return []
        size = path.stat().st_size
        if size < self.log_offset:  # rotated
            self.log_offset = 0
        with path.open("rb") as handle:
            handle.seek(self.log_offset)
            data = handle.read()
        self.log_offset = size
        return data.decode("utf-8", errors="replace").splitlines()

    async def tool_probe(self) -> tuple[bool, str]:
        case = self.tool_case
        # the Agent section's token budget (a reasoning model's thinking must fit), at
        # temperature 0: two failures in a row are a change, not sampling noise
        tokens = case.max_tokens or self.ctx.config.agent.max_tokens
        body = case.body(self.model, False, tokens, 0.0)
        parsed = self.ctx.save(
            await self.ctx.target.chat(
                body, "watch-tool", deadline_s=self.s.config.probe_deadline_s
            ),
            "watch-probes",
        )
        agent = self.ctx.profile.agent
        contract = Contract(
            case.expect,
            case.tool_schemas,
            None,
            agent.forbidden_content_markers,
            agent.reasoning_fields,
        )
        findings = response_findings(parsed, contract)
        return not findings, "; ".join(f"{f.signature}: {f.detail}" for f in findings)[:300]

    async def cache_probe(self) -> float | None:
        assert self.cache is not None
        body = self.cache.body("Watch probe: anything new?")
        body["max_tokens"] = 1
        if not self.cache_warm:
            await self.ctx.target.chat(body, "watch-cache-warmup")
            self.cache_warm = True
        self.cache_probes += 1
        window = f"watch-cache-{self.cache_probes:04d}"
        before = await scrape(self.ctx, f"{window}-before")
        parsed = self.ctx.save(await self.ctx.target.chat(body, "watch-cache"), "watch-probes")
        after = await scrape(self.ctx, f"{window}-after")
        hits = None
        if before.snapshot is not None and after.snapshot is not None:
            hits = engine_reused_tokens(MetricsDelta(before.snapshot, after.snapshot))
        prompt = (parsed.usage or {}).get("prompt_tokens")
        return probe_reuse_ratio(prompt, parsed.cached_tokens, hits)

    async def fire(self, trigger: Trigger, index: int) -> None:
        now = time.monotonic()
        if now - self.fired.get(trigger.rule, -1e18) < self.s.config.cooldown_s:
            return  # de-duplicated: the same rule within its cool-down
        self.fired[trigger.rule] = now
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        command = None
        if trigger.rollback and self.s.config.on_rollback:
            command = await self.run_rollback(trigger, len(self.triggers))
        record = TriggerRecord(
            time=at,
            interval=index,
            rule=trigger.rule,
            rollback=trigger.rollback,
            reason=trigger.reason,
            evidence=trigger.evidence,
            rollback_target=_target_summary(self.target),
            command=command,
        )
        self.triggers.append(record)
        self.ctx.bundle.append_jsonl(WATCH_RECORDS, record.to_json())
        self.s.progress.phase(
            f"watch — {trigger.rule}: {trigger.reason[:80]}", self.s.config.duration_s
        )

    async def run_rollback(self, trigger: Trigger, number: int) -> dict[str, Any]:
        if self.target is None:
            return {"ran": False, "why": "no earlier accepted artifact in the registry"}
        if self.rollback_lock.locked():
            return {"ran": False, "why": "a rollback command is already running"}
        if time.monotonic() - self.last_rollback < self.s.config.cooldown_s:
            return {"ran": False, "why": f"cool-down of {self.s.config.cooldown_s:g} s"}
        async with self.rollback_lock:
            self.last_rollback = time.monotonic()
            env = {**os.environ, **rollback_env(self.target, trigger.rule)}
            assert self.s.config.on_rollback is not None
            proc = await asyncio.create_subprocess_shell(
                self.s.config.on_rollback,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            output, _ = await proc.communicate()
            log = f"watch/rollback-{number}.log"
            self.ctx.bundle.write_text(log, output.decode("utf-8", errors="replace"))
            return {"ran": True, "exit_code": proc.returncode, "log": log}


def http_totals(history: list[Observation]) -> dict[str, float] | None:
    """The server's answers over the watch by status class; None where it exposed none."""
    measured = [o.http_status for o in history if o.http_status is not None]
    if not measured:
        return None
    totals: Counter[str] = Counter()
    for counts in measured:
        totals.update(counts)
    return dict(totals)


def rollback_env(target: Mapping[str, Any], rule: str) -> dict[str, str]:
    """What `--on-rollback` receives: the accepted artifact to go back to."""
    return {
        "GOLIVE_TRIGGER": rule,
        "GOLIVE_ROLLBACK_BUNDLE": str(target.get("bundle") or ""),
        "GOLIVE_ROLLBACK_IMAGE": str(target.get("image") or ""),
        "GOLIVE_ROLLBACK_IMAGE_DIGEST": str(target.get("image_digest") or ""),
        "GOLIVE_ROLLBACK_LAUNCH": shlex.join(target.get("launch_command") or []),
        "GOLIVE_ROLLBACK_LAUNCH_DIGEST": str(target.get("launch_config_digest") or ""),
        "GOLIVE_ROLLBACK_RUNTIME": json.dumps(target.get("runtime_variables") or {}),
    }


def _target_summary(target: Mapping[str, Any] | None) -> dict[str, Any] | str:
    if target is None:
        return (
            "no earlier accepted artifact in the registry: roll back by hand to a known "
            "accepted image, never an untracked rebuild"
        )
    keys = ("bundle", "image", "image_digest", "launch_config_digest", "accepted_at")
    return {k: target.get(k) for k in keys}


async def run_watch(ctx: CheckContext, settings: WatchSettings) -> WatchSummary:
    unread = await require_accepted_deployment(ctx, settings.accepted, settings.log_file)
    served = await served_model(ctx, "watch-setup")
    if served is None:
        raise ConfigError(f"{ctx.target.url('/v1/models')} lists no model: nothing to watch")
    return await Watcher(ctx, settings, served.model, unread).run()
