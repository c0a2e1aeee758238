"""The command line: parse, load config, one `asyncio.run`, map the outcome to an exit code.

With `console` (what is shown) and `bundle_commands` (the offline bundle commands), the only
place that prints or exits. Exit codes: 0 go-live, 10
observe-with-limits, 11 hold, 12 expand-capacity, 13 rebuild, 2 usage or config error,
3 golive could not do its job (bundle, local target); `verify`: 0 intact, 1 altered.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from golive.bundle.layout import STARTUP_LOG
from golive.checks.agent.collect import AgentSettings, run_agent
from golive.checks.agent.select import cases_for
from golive.checks.cache import CacheSettings, run_cache
from golive.checks.capacity.collect import CapacityInputs
from golive.checks.capacity.phases import run_capacity
from golive.checks.context import CheckContext
from golive.checks.env.collect import EnvEvidence, env_programme, load_evidence
from golive.checks.smoke.collect import run_smoke
from golive.cli.bundle_commands import BUNDLE_COMMANDS, bundle_command
from golive.cli.command_inputs import cluster_evidence, k8s_source, prepare_outputs
from golive.cli.config_commands import CONFIG_COMMANDS, config_command
from golive.cli.config_flags import command_config
from golive.cli.console import default_out, err, finish, progress_line, read_input
from golive.cli.load_clients import judge_options, load_clients
from golive.cli.parser import build_parser
from golive.cli.progress import RichProgress
from golive.config import GoliveConfig, with_node_curves
from golive.errors import ConfigError, GoliveError, TargetNotMeasurable
from golive.evidence.collect import collect_container, collect_host
from golive.evidence.gpu_curve import record_gpu_curve
from golive.evidence.ray_env import RaySource, require_ray
from golive.evidence.ray_gpu_curve import RayGpuCurves
from golive.evidence.startup_log import StartupFacts, parse_startup_log
from golive.operate.watch import WatchSettings
from golive.orchestration.pipeline import judge, watch_bundle
from golive.orchestration.programme import RunPlan, run_programme
from golive.orchestration.rederive import require_rederived
from golive.profiles import load_profile
from golive.results import EXIT_INTERNAL, EXIT_NOT_MEASURABLE, EXIT_USAGE, CheckResult
from golive.target.server import RunningTarget, launched_server
from golive.traffic.workload import read_sample
from golive.verdict.scope import PROGRAMME

if TYPE_CHECKING:
    from golive.traffic.process_load import ProcessLoad
    from golive.traffic.ray_load import RayLoad


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        prepare_outputs(args)  # before any work: never a traceback after a whole run
        return asyncio.run(_dispatch(args))
    except ConfigError as exc:
        err.print(f"[red]config error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except TargetNotMeasurable as exc:
        err.print(f"[red]{escape(str(exc))}[/red]", highlight=False, soft_wrap=True)
        return EXIT_NOT_MEASURABLE
    except GoliveError as exc:
        err.print(f"[red]golive error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: the bundle keeps what was written so far")
        return 130


def warn(message: str) -> None:
    """A finding that does not stop the command, on stderr."""
    err.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)


async def _dispatch(args: argparse.Namespace) -> int:
    if args.command in BUNDLE_COMMANDS:
        return bundle_command(args, err)
    if args.command in CONFIG_COMMANDS:
        return config_command(args, err)
    if args.command == "smoke":
        return await _section(args, command_config(args), "smoke", "golive", run_smoke)
    if args.command == "env":
        return await _env(args)
    if args.command == "capacity":
        return await _capacity(args)
    if args.command == "cache":
        return await _cache(args)
    if args.command == "agent":
        return await _agent(args)
    if args.command == "run":
        return await _run(args)
    if args.command == "watch":
        return await _watch(args)
    if args.command == "demo":
        from golive.cli.demo import run_demo

        with RichProgress(err) as phases:
            verdict = await run_demo(
                args.model,
                args.out or default_out("golive-demo"),
                progress_line,
                phases,
                vllm_version=args.engine_version,
            )
        return finish(verdict, args)
    if args.command == "target":
        from golive.target.install import ensure_target

        for model in args.model or ["qwen", "smollm2"]:
            paths = await ensure_target(model, progress_line)
            progress_line(
                f"target ready: {paths.spec.name} at {paths.model_dir} (engine {paths.venv})"
            )
        return 0
    raise ConfigError(f"unknown command {args.command!r}")


async def _env(args: argparse.Namespace) -> int:
    if args.action == "collect":
        if args.output is not None:
            args.output.parent.mkdir(parents=True, exist_ok=True)
        if args.gpu_curve and args.output is not None:
            rows = await record_gpu_curve(args.output, args.duration)
            progress_line(f"wrote {rows} samples to {args.output}")
            return 0
        if not (args.host or args.container) or args.output is None:
            raise ConfigError("env collect needs --host, --container or --gpu-curve, and -o FILE")
        if args.host:
            facts: Any = await asyncio.to_thread(collect_host, args.node)
        else:
            facts = await asyncio.to_thread(collect_container, args.python, args.image)
        args.output.write_text(facts.model_dump_json(indent=2) + "\n")
        for problem in facts.errors:
            progress_line(f"note: {problem}")
        progress_line(f"wrote {args.output}")
        return 0
    evidence = load_evidence(
        args.log, args.nvidia_smi_xml, args.host_info, args.container_info, args.image
    )
    evidence = cluster_evidence(args, evidence, "--ray")
    programme = env_programme(evidence)
    return await _section(args, command_config(args), "env", "golive-env", programme, False)


async def _section(
    args: argparse.Namespace,
    config: GoliveConfig,
    section: str,
    out_prefix: str,
    programme: Callable[[CheckContext], Awaitable[list[CheckResult]]],
    require_target: bool = True,
    server_log: Path | None = None,
) -> int:
    """One section without load clients (env, smoke, cache): judged, sealed, shown."""
    with RichProgress(err) as progress:
        progress.phase(section)
        verdict = await judge(
            config,
            args.out or default_out(out_prefix),
            section,
            programme,
            (section,),
            require_target=require_target,
            server_log=server_log,
            warn=warn,
            progress=progress,
        )
    return finish(verdict, args)


async def _capacity(args: argparse.Namespace) -> int:
    # `golive capacity --chain-ray` samples the cluster's GPU nodes whatever the config says
    config = with_node_curves(
        command_config(args), args.gpu_curve, args.chain_ray, args.chain_ray is not None
    )
    out = args.out or default_out("golive-capacity")
    _gpu_cluster(args)  # Ray's job client present, before a server is launched
    if args.launch is None:
        log_text = None if args.log is None else read_input(args.log, "--log")
        return await _run_capacity(args, config, out, log_text, None, server_log=args.log)
    if config.target.url is None:
        raise ConfigError(
            "--launch: give --target URL (where the launched server listens), target.url in "
            "the config file, or GOLIVE_TARGET_URL"
        )
    served = config.target.model or ""
    async with launched_server(args.launch, config.target.url, served, progress_line) as up:
        log_text = up.log_path.read_text(errors="replace")
        return await _run_capacity(
            args, config, out, log_text, up.target, up.load_span, up.log_path, up.relaunch
        )


async def _run_capacity(
    args: argparse.Namespace,
    config: GoliveConfig,
    out: Path,
    log_text: str | None,
    launched: RunningTarget | None,
    load_span: tuple[float, float] | None = None,
    server_log: Path | None = None,
    relaunch: Callable[[], Awaitable[int]] | None = None,
) -> int:
    async with load_clients(args.ray, args.workers, config, progress_line) as clients:
        with RichProgress(err) as progress:
            startup = None if log_text is None else parse_startup_log(log_text)
            inputs = _capacity_inputs(
                args, config, startup, progress, launched, load_span, _gpu_cluster(args)
            )
            inputs = dataclasses.replace(inputs, clients=clients, relaunch=relaunch)

            async def programme(ctx: CheckContext) -> list[CheckResult]:
                if log_text is not None:
                    ctx.bundle.write_text(STARTUP_LOG, log_text)
                return await run_capacity(ctx, inputs)

            remote = () if clients is None else (clients,)
            verdict = await judge(
                config,
                out,
                "capacity",
                programme,
                ("capacity",),
                remote=remote,
                server_log=server_log,
                warn=warn,
                progress=progress,
            )
    return finish(verdict, args)


async def _cache(args: argparse.Namespace) -> int:
    config = command_config(args)
    log_text = None if args.log is None else read_input(args.log, "--log")
    startup = None if log_text is None else parse_startup_log(log_text)
    settings = CacheSettings.from_config(config, startup)

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        if log_text is not None:
            ctx.bundle.write_text(STARTUP_LOG, log_text)
        return await run_cache(ctx, settings)

    return await _section(args, config, "cache", "golive-cache", programme, server_log=args.log)


async def _agent(args: argparse.Namespace) -> int:
    config = command_config(args)
    cases = cases_for(
        config.agent, load_profile(config.profile), config.programme
    )  # bad --schemas or case names fail before any traffic
    out = args.out or default_out("golive-agent")
    async with load_clients(args.ray, args.workers, config, progress_line) as clients:
        with RichProgress(err) as progress:
            settings = AgentSettings.from_config(config, cases, progress)

            async def programme(ctx: CheckContext) -> list[CheckResult]:
                return await run_agent(ctx, settings)

            verdict = await judge(
                config,
                out,
                "agent",
                programme,
                ("agent",),
                progress=progress,
                **judge_options(clients),
            )
    return finish(verdict, args)


def _gpu_cluster(args: argparse.Namespace) -> RaySource | None:
    """`golive capacity --chain-ray`: the vLLM Ray cluster whose GPUs are sampled."""
    if args.chain_ray is None:
        return None
    require_ray()
    return RaySource(args.chain_ray)


def _capacity_inputs(
    args: argparse.Namespace,
    config: GoliveConfig,
    startup: StartupFacts | None,
    progress: RichProgress,
    launched: RunningTarget | None = None,
    load_span: tuple[float, float] | None = None,
    chain_ray: RaySource | None = None,
) -> CapacityInputs:
    sample = (
        () if args.sample is None else tuple(read_sample(args.sample, config.target.model or ""))
    )
    return CapacityInputs(
        target_pid=launched.pid if launched else args.target_pid,
        startup=startup,
        load_curve=launched.load_curve if launched else (),
        sample=sample,
        progress=progress,
        gpu_curves=tuple(Path(p) for p in config.capacity.gpu_curves),
        load_span=load_span,
        # the vLLM Ray cluster the chain is read from: its nodes' GPU memory is sampled too
        ray_gpu=None if chain_ray is None else RayGpuCurves(chain_ray),
    )


async def _run(args: argparse.Namespace) -> int:
    config = command_config(args)
    evidence = load_evidence(
        args.log, args.nvidia_smi_xml, args.host_info, args.container_info, args.image
    )
    evidence = cluster_evidence(args, evidence, "--chain-ray")
    cluster = None if evidence.ray is None else evidence.ray.address
    config = with_node_curves(config, args.gpu_curve, cluster, args.sample_gpus)
    cases = cases_for(
        config.agent, load_profile(config.profile), config.programme
    )  # bad --schemas or case names fail before any traffic
    startup = None if evidence.log_text is None else parse_startup_log(evidence.log_text)
    out = args.out or default_out("golive-run")
    async with load_clients(args.ray, args.workers, config, progress_line) as clients:
        return await _run_plan(args, config, evidence, cases, startup, out, clients)


async def _run_plan(
    args: argparse.Namespace,
    config: GoliveConfig,
    evidence: EnvEvidence,
    cases: Any,
    startup: StartupFacts | None,
    out: Path,
    clients: RayLoad | ProcessLoad | None,
) -> int:
    with RichProgress(err) as progress:
        sampled = evidence.ray if config.capacity.sample_gpus else None
        capacity = _capacity_inputs(  # the log parsed once
            args, config, startup, progress, chain_ray=sampled
        )
        plan = RunPlan(
            evidence=evidence,
            capacity=dataclasses.replace(capacity, clients=clients),
            cache=CacheSettings.from_config(config, startup),
            agent=AgentSettings.from_config(config, cases, progress),
        )

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            return await run_programme(ctx, plan)

        verdict = await judge(
            config,
            out,
            "run",
            programme,
            PROGRAMME,
            server_log=args.log,
            warn=warn,
            progress=progress,
            **judge_options(clients),
        )
    return finish(verdict, args)


async def _watch(args: argparse.Namespace) -> int:
    k8s = k8s_source(args)
    config = command_config(args)
    # a probe's answer is awaited no longer than its deadline
    deadline = {"read_timeout_s": config.watch.probe_deadline_s}
    config = config.model_copy(update={"target": config.target.model_copy(update=deadline)})
    out = args.out or default_out("golive-watch")
    if args.log is None:
        err.print(
            "note: no --log: the server is compared with the accepted deployment by its vLLM "
            "version, model, context length and the cache settings its /metrics states, if it "
            "states them; a relaunch with another tool parser or parallel layout is not told "
            "apart",
            highlight=False,
        )
    with RichProgress(err) as progress:
        settings = WatchSettings.from_config(
            config, args.accepted, args.registry, args.log, progress, k8s, vouch=require_rederived
        )
        summary = await watch_bundle(config, out, settings)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    if summary.tool_probes == 0:
        err.print(
            f"note: the tool probe ({summary.probe_case}) never answered in this window: the "
            "critical workflow was not watched (watch.tool_every)",
            highlight=False,
        )
    if summary.launch_not_compared:
        err.print(f"note: {escape(summary.launch_not_compared)}", highlight=False)
    for trigger in summary.triggers:
        kind = "ROLLBACK" if trigger.rollback else "alert"
        err.print(f"{kind} {trigger.rule}: {escape(trigger.reason)}", highlight=False)
    status = summary.http_status
    answers = (
        ", ".join(f"{k} {v:g}" for k, v in status.items())
        if status
        else "HTTP status counts not exposed by the server"
    )
    err.print(
        f"watch: {summary.intervals} intervals; engine restarts {summary.engine_restarts}; "
        f"answers {answers}; tool probe {summary.probe_case}; bundle: {out}",
        highlight=False,
    )
    return 0 if summary.clean else 1
