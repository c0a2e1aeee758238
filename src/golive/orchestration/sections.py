"""What each command collects and judges: the programme of a section command (`golive smoke`,
`env`, `capacity`, `cache`, `agent`), of `golive run` and of `golive watch`, composed from the
check families, `programme.run_programme` and `pipeline.judge`. The command line turns its
flags into the typed inputs here (the config it loaded once, paths, the records below) and
shows what comes back; the scope each command judges is `COMMAND_SCOPES`."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from golive.bundle.layout import STARTUP_LOG
from golive.checks.agent.cases import AgentCase
from golive.checks.agent.collect import AgentSettings, run_agent
from golive.checks.agent.select import cases_for
from golive.checks.cache import CacheSettings, run_cache
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext, PhaseProgress, Target
from golive.checks.env.collect import EnvEvidence, env_programme
from golive.checks.smoke.collect import run_smoke
from golive.config import GoliveConfig
from golive.evidence.k8s_env import K8sSource
from golive.evidence.ray_env import RaySource
from golive.evidence.ray_gpu_curve import RayGpuCurves
from golive.evidence.startup_log import StartupFacts, parse_startup_log
from golive.operate.watch import WatchSettings
from golive.operate.watch_summary import WatchSummary
from golive.orchestration.pipeline import Programme, RemoteClients, Verdict, judge, watch_bundle
from golive.orchestration.programme import RunPlan, run_programme
from golive.orchestration.rederive import require_rederived
from golive.profiles import load_profile
from golive.results import CheckResult
from golive.traffic.client import TargetClient
from golive.traffic.process_load import ProcessLoad
from golive.traffic.workload import read_sample
from golive.verdict.scope import PROGRAMME, Scope

if TYPE_CHECKING:
    from golive.target.server import Launched
    from golive.traffic.ray_load import RayLoad

# the scope each command judges: one section, or the whole programme
COMMAND_SCOPES: Mapping[str, Scope] = {
    "smoke": ("smoke",),
    "env": ("env",),
    "capacity": ("capacity",),
    "cache": ("cache",),
    "agent": ("agent",),
    "run": PROGRAMME,
    "demo": PROGRAMME,
}


@dataclass(frozen=True, slots=True)
class Invocation:
    """One command's run: which command, the config it loaded, its bundle directory, where its
    progress goes and how a finding that does not stop it is said (`warn`)."""

    command: str
    config: GoliveConfig
    out: Path
    progress: PhaseProgress
    warn: Callable[[str], None] | None = None

    @property
    def scope(self) -> Scope:
        return COMMAND_SCOPES[self.command]


@dataclass(frozen=True, slots=True)
class ServerLog:
    """The server's log a command was given (`--log`, or the log of a server golive started):
    its file, read again when the programme ends, and its text, whose startup is parsed once
    and copied into the bundle."""

    path: Path | None = None
    text: str | None = None

    def startup(self) -> StartupFacts | None:
        return None if self.text is None else parse_startup_log(self.text)


@dataclass(frozen=True, slots=True)
class CapacityRequest:
    """What the command line names for the pressure phases besides the config: a sample of
    chat bodies, a local server's PID, the vLLM Ray cluster whose GPUs are sampled, and the
    server `capacity --launch` started (its PID, load curve and load span, and its relaunch)."""

    sample: Path | None = None
    target_pid: int | None = None
    chain_ray: RaySource | None = None
    launched: Launched | None = None


@dataclass(frozen=True, slots=True)
class WatchRequest:
    """What `golive watch` names besides the config: the accepted bundle, the rollback
    registry, a log to follow and the engine pods."""

    accepted: Path
    registry: Path | None = None
    log: Path | None = None
    k8s: K8sSource | None = None


def agent_cases(config: GoliveConfig) -> tuple[AgentCase, ...]:
    """The Agent cases a command sends: bad `--schemas` or case names fail here, before any
    traffic."""
    return cases_for(config.agent, load_profile(config.profile), config.programme)


async def judge_command(
    run: Invocation,
    programme: Programme,
    *,
    server_log: Path | None = None,
    require_target: bool = True,
    clients: RayLoad | ProcessLoad | None = None,
    route: bool = True,
) -> Verdict:
    """`pipeline.judge` for the command's scope. `clients` (`--ray`, `--workers`): their
    requests are counted and a signal stops them; with `route`, Ray's actors also send the
    other chat requests (worker processes carry only the load windows)."""
    remote: Sequence[RemoteClients] = () if clients is None else (clients,)
    routed: Callable[[TargetClient], Target] | None = None
    if route and clients is not None and not isinstance(clients, ProcessLoad):
        routed = clients.target
    return await judge(
        run.config,
        run.out,
        run.command,
        programme,
        run.scope,
        server_log=server_log,
        require_target=require_target,
        remote=remote,
        route=routed,
        warn=run.warn,
        progress=run.progress,
    )


async def _section(
    run: Invocation,
    programme: Programme,
    require_target: bool = True,
    server_log: Path | None = None,
) -> Verdict:
    """One section without load clients (env, smoke, cache)."""
    run.progress.phase(run.command)
    return await judge_command(run, programme, server_log=server_log, require_target=require_target)


def _with_startup_log(
    log: ServerLog, step: Callable[[CheckContext], Awaitable[list[CheckResult]]]
) -> Programme:
    """`step`, after the server's log (when given) is copied into the bundle."""

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        if log.text is not None:
            ctx.bundle.write_text(STARTUP_LOG, log.text)
        return await step(ctx)

    return programme


async def smoke(run: Invocation) -> Verdict:
    return await _section(run, run_smoke)


async def env(run: Invocation, evidence: EnvEvidence) -> Verdict:
    """The version chain from the evidence given (no target needed)."""
    return await _section(run, env_programme(evidence), require_target=False)


async def cache(run: Invocation, log: ServerLog) -> Verdict:
    """The prefix-cache proof, with the startup log's block size, Mamba mode and retention."""
    settings = CacheSettings.from_config(run.config, log.startup())

    async def step(ctx: CheckContext) -> list[CheckResult]:
        return await run_cache(ctx, settings)

    return await _section(run, _with_startup_log(log, step), server_log=log.path)


def capacity_inputs(
    config: GoliveConfig,
    request: CapacityRequest,
    startup: StartupFacts | None,
    progress: PhaseProgress,
    clients: RayLoad | ProcessLoad | None,
) -> CapacityInputs:
    """The pressure phases' inputs: the sample read (its model set to the target's), the
    launched server's PID, load curve and span, the nodes' GPU curves."""
    launched = request.launched
    sample = (
        ()
        if request.sample is None
        else tuple(read_sample(request.sample, config.target.model or ""))
    )
    return CapacityInputs(
        target_pid=launched.target.pid if launched else request.target_pid,
        startup=startup,
        load_curve=launched.target.load_curve if launched else (),
        sample=sample,
        progress=progress,
        gpu_curves=tuple(Path(p) for p in config.capacity.gpu_curves),
        load_span=launched.load_span if launched else None,
        # the vLLM Ray cluster the chain is read from: its nodes' GPU memory is sampled too
        ray_gpu=None if request.chain_ray is None else RayGpuCurves(request.chain_ray),
        clients=clients,
        relaunch=launched.relaunch if launched else None,
    )


async def capacity(
    run: Invocation,
    request: CapacityRequest,
    log: ServerLog,
    clients: RayLoad | ProcessLoad | None,
) -> Verdict:
    """The four pressure phases; the load windows spread over `clients` (the other requests
    stay on this machine)."""
    inputs = capacity_inputs(run.config, request, log.startup(), run.progress, clients)

    async def step(ctx: CheckContext) -> list[CheckResult]:
        return await run_capacity(ctx, inputs)

    return await judge_command(
        run, _with_startup_log(log, step), server_log=log.path, clients=clients, route=False
    )


async def agent(
    run: Invocation, cases: tuple[AgentCase, ...], clients: RayLoad | ProcessLoad | None
) -> Verdict:
    settings = AgentSettings.from_config(run.config, cases, run.progress)

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_agent(ctx, settings)

    return await judge_command(run, programme, clients=clients)


async def whole_programme(
    run: Invocation,
    evidence: EnvEvidence,
    cases: tuple[AgentCase, ...],
    request: CapacityRequest,
    clients: RayLoad | ProcessLoad | None,
    server_log: Path | None = None,
) -> Verdict:
    """`golive run`: every section in the checklist's order (`programme.run_programme`), the
    startup log parsed once for the pressure phases and the cache proof."""
    config = run.config
    startup = None if evidence.log_text is None else parse_startup_log(evidence.log_text)
    sampled = evidence.ray if config.capacity.sample_gpus else None
    capacity = dataclasses.replace(request, chain_ray=sampled)
    plan = RunPlan(
        evidence=evidence,
        capacity=capacity_inputs(config, capacity, startup, run.progress, clients),
        cache=CacheSettings.from_config(config, startup),
        agent=AgentSettings.from_config(config, cases, run.progress),
    )

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        return await run_programme(ctx, plan)

    return await judge_command(run, programme, server_log=server_log, clients=clients)


async def watch(
    config: GoliveConfig, out: Path, request: WatchRequest, progress: PhaseProgress
) -> WatchSummary:
    """`golive watch`: the window against the accepted bundle, sealed; its summary."""
    # a probe's answer is awaited no longer than its deadline
    deadline = {"read_timeout_s": config.watch.probe_deadline_s}
    config = config.model_copy(update={"target": config.target.model_copy(update=deadline)})
    settings = WatchSettings.from_config(
        config,
        request.accepted,
        request.registry,
        request.log,
        progress,
        request.k8s,
        vouch=require_rederived,
    )
    return await watch_bundle(config, out, settings)
