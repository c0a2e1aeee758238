"""The commands that judge a live server: `smoke`, `env`, `capacity`, `cache`, `agent`, `run`,
`watch`, `demo`, and `target setup`. Each turns its flags into the orchestration's typed
inputs (`orchestration/sections.py`), runs it with a progress display, and shows the verdict."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

from rich.markup import escape

from golive.checks.env.collect import load_evidence
from golive.cli.command_inputs import cluster_evidence, k8s_source
from golive.cli.config_flags import command_config
from golive.cli.console import default_out, err, finish, progress_line, read_input, warn
from golive.cli.load_clients import load_clients
from golive.cli.progress import RichProgress
from golive.config import GoliveConfig, with_node_curves
from golive.errors import ConfigError
from golive.evidence.collect import collect_container, collect_host
from golive.evidence.gpu_curve import record_gpu_curve
from golive.evidence.ray_env import RaySource, require_ray
from golive.orchestration import sections
from golive.orchestration.sections import (
    CapacityRequest,
    Invocation,
    ServerLog,
    WatchRequest,
    agent_cases,
)
from golive.target.server import launched_server

# where each command's bundle goes without --out: PREFIX-<time>
OUT_PREFIX: Mapping[str, str] = {
    "smoke": "golive",
    "env": "golive-env",
    "capacity": "golive-capacity",
    "cache": "golive-cache",
    "agent": "golive-agent",
    "run": "golive-run",
    "watch": "golive-watch",
    "demo": "golive-demo",
}


def _out(args: argparse.Namespace) -> Path:
    given: Path | None = args.out
    return given or default_out(OUT_PREFIX[args.command])


def _invocation(
    args: argparse.Namespace, config: GoliveConfig, progress: RichProgress, out: Path | None = None
) -> Invocation:
    return Invocation(args.command, config, out or _out(args), progress, warn)


def _server_log(args: argparse.Namespace) -> ServerLog:
    """`--log`: its file, and its text (refused before any work when it cannot be read)."""
    path: Path | None = args.log
    return ServerLog(path, None if path is None else read_input(path, "--log"))


async def smoke(args: argparse.Namespace) -> int:
    config = command_config(args)
    with RichProgress(err) as progress:
        verdict = await sections.smoke(_invocation(args, config, progress))
    return finish(verdict, args)


async def env(args: argparse.Namespace) -> int:
    if args.action == "collect":
        return await _env_collect(args)
    evidence = load_evidence(
        args.log, args.nvidia_smi_xml, args.host_info, args.container_info, args.image
    )
    evidence = cluster_evidence(args, evidence, "--ray")
    config = command_config(args)
    with RichProgress(err) as progress:
        verdict = await sections.env(_invocation(args, config, progress), evidence)
    return finish(verdict, args)


async def _env_collect(args: argparse.Namespace) -> int:
    """`env collect`: this node's or this container's raw facts, or a GPU memory curve."""
    output: Path | None = args.output
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
    if args.gpu_curve and output is not None:
        rows = await record_gpu_curve(output, args.duration)
        progress_line(f"wrote {rows} samples to {output}")
        return 0
    if not (args.host or args.container) or output is None:
        raise ConfigError("env collect needs --host, --container or --gpu-curve, and -o FILE")
    if args.host:
        host = await asyncio.to_thread(collect_host, args.node)
        text, problems = host.model_dump_json(indent=2), host.errors
    else:
        container = await asyncio.to_thread(collect_container, args.python, args.image)
        text, problems = container.model_dump_json(indent=2), container.errors
    output.write_text(text + "\n")
    for problem in problems:
        progress_line(f"note: {problem}")
    progress_line(f"wrote {output}")
    return 0


def _chain_ray(args: argparse.Namespace) -> RaySource | None:
    """`golive capacity --chain-ray`: the vLLM Ray cluster whose GPUs are sampled."""
    if args.chain_ray is None:
        return None
    require_ray()
    return RaySource(args.chain_ray)


async def capacity(args: argparse.Namespace) -> int:
    # `golive capacity --chain-ray` samples the cluster's GPU nodes whatever the config says
    config = with_node_curves(
        command_config(args), args.gpu_curve, args.chain_ray, args.chain_ray is not None
    )
    out = _out(args)
    # Ray's job client is looked for before a server is launched
    request = CapacityRequest(args.sample, args.target_pid, _chain_ray(args))
    if args.launch is None:
        return await _capacity(args, config, out, request, _server_log(args))
    if config.target.url is None:
        raise ConfigError(
            "--launch: give --target URL (where the launched server listens), target.url in "
            "the config file, or GOLIVE_TARGET_URL"
        )
    served = config.target.model or ""
    async with launched_server(args.launch, config.target.url, served, progress_line) as up:
        log = ServerLog(up.log_path, up.log_path.read_text(errors="replace"))
        launched = CapacityRequest(args.sample, args.target_pid, request.chain_ray, up)
        return await _capacity(args, config, out, launched, log)


async def _capacity(
    args: argparse.Namespace,
    config: GoliveConfig,
    out: Path,
    request: CapacityRequest,
    log: ServerLog,
) -> int:
    async with load_clients(args.ray, args.workers, config, progress_line) as clients:
        with RichProgress(err) as progress:
            run = _invocation(args, config, progress, out)
            verdict = await sections.capacity(run, request, log, clients)
    return finish(verdict, args)


async def cache(args: argparse.Namespace) -> int:
    config = command_config(args)
    log = _server_log(args)
    with RichProgress(err) as progress:
        verdict = await sections.cache(_invocation(args, config, progress), log)
    return finish(verdict, args)


async def agent(args: argparse.Namespace) -> int:
    config = command_config(args)
    cases = agent_cases(config)  # bad --schemas or case names fail before any traffic
    out = _out(args)
    async with load_clients(args.ray, args.workers, config, progress_line) as clients:
        with RichProgress(err) as progress:
            verdict = await sections.agent(_invocation(args, config, progress, out), cases, clients)
    return finish(verdict, args)


async def run(args: argparse.Namespace) -> int:
    config = command_config(args)
    evidence = load_evidence(
        args.log, args.nvidia_smi_xml, args.host_info, args.container_info, args.image
    )
    evidence = cluster_evidence(args, evidence, "--chain-ray")
    cluster = None if evidence.ray is None else evidence.ray.address
    config = with_node_curves(config, args.gpu_curve, cluster, args.sample_gpus)
    cases = agent_cases(config)  # bad --schemas or case names fail before any traffic
    out = _out(args)
    request = CapacityRequest(args.sample, args.target_pid)
    async with load_clients(args.ray, args.workers, config, progress_line) as clients:
        with RichProgress(err) as progress:
            verdict = await sections.whole_programme(
                _invocation(args, config, progress, out),
                evidence,
                cases,
                request,
                clients,
                server_log=args.log,
            )
    return finish(verdict, args)


async def watch(args: argparse.Namespace) -> int:
    request = WatchRequest(args.accepted, args.registry, args.log, k8s_source(args))
    config = command_config(args)
    out = _out(args)
    if args.log is None:
        err.print(
            "note: no --log: the server is compared with the accepted deployment by its vLLM "
            "version, model, context length and the cache settings its /metrics states, if it "
            "states them; a relaunch with another tool parser or parallel layout is not told "
            "apart",
            highlight=False,
        )
    with RichProgress(err) as progress:
        summary = await sections.watch(config, out, request, progress)
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


async def demo(args: argparse.Namespace) -> int:
    from golive.orchestration.demo import run_demo

    with RichProgress(err) as phases:
        verdict = await run_demo(
            args.model, _out(args), progress_line, phases, vllm_version=args.engine_version
        )
    return finish(verdict, args)


async def target(args: argparse.Namespace) -> int:
    """`golive target setup`: the engine venv and the converted models."""
    from golive.target.install import ensure_target

    for model in args.model or ["qwen", "smollm2"]:
        paths = await ensure_target(model, progress_line)
        progress_line(f"target ready: {paths.spec.name} at {paths.model_dir} (engine {paths.venv})")
    return 0
