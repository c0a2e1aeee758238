"""The command line: parse, load config, one `asyncio.run`, map the outcome to an exit code.

This is the only module that prints or exits. Exit codes: 0 go-live, 10
observe-with-limits, 11 hold, 12 expand-capacity, 13 rebuild, 2 usage or config error,
3 golive could not do its job (bundle, local target); `verify`: 0 intact, 1 altered.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from golive import __version__
from golive.bundle import verify
from golive.checks.cache import CacheSettings, run_cache
from golive.checks.capacity import CapacityInputs
from golive.checks.capacity_phases import run_capacity
from golive.checks.context import CheckContext
from golive.checks.env import env_programme, load_evidence
from golive.checks.smoke import run_smoke
from golive.config import PROFILES, GoliveConfig, load_config
from golive.errors import ConfigError, GoliveError
from golive.evidence.collect import collect_container, collect_host
from golive.evidence.startup_log import parse_startup_log
from golive.gpu_curve import record_gpu_curve
from golive.progress import RichProgress
from golive.results import EXIT_INTERNAL, EXIT_USAGE, CheckResult
from golive.run import Verdict, judge
from golive.target.server import RunningTarget, launch, stop_target
from golive.traffic.workload import read_sample

err = Console(stderr=True)
_STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "red",
    "no_data": "magenta",
    "error": "red",
    "skipped": "dim",
}


def _progress(message: str) -> None:
    """Progress lines on stderr, never wrapped (paths and PIDs stay greppable)."""
    err.print(message, soft_wrap=True, highlight=False, markup=False)


def _target_options(parser: argparse.ArgumentParser, target_required: bool = True) -> None:
    parser.add_argument("--target", required=target_required, help="OpenAI-compatible base URL")
    parser.add_argument("--metrics-url", help="Prometheus metrics URL (default <target>/metrics)")
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="environment variable holding the API key"
    )
    parser.add_argument("--model", help="served model name (default: the first one listed)")
    parser.add_argument("--engine-url", help="gateway mode: the engine behind the --target gateway")
    parser.add_argument("--config", type=Path, help="YAML config file (unknown keys are errors)")
    parser.add_argument("--profile", help=f"{' | '.join(PROFILES)} | path to a profile YAML")
    parser.add_argument("--out", type=Path, help="bundle directory (default ./golive-<time>)")
    parser.add_argument("--json", action="store_true", help="print verdict.json to stdout")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="golive", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"golive {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    smoke = sub.add_parser(
        "smoke", help="post-start checks: health, version, models, text, metrics"
    )
    _target_options(smoke)
    env = sub.add_parser(
        "env",
        help="prove the version chain (image, vLLM, CUDA, drivers, startup log); "
        "`env collect` gathers raw facts on a node or in the container",
    )
    env.add_argument("action", nargs="?", choices=("collect",), help="collect raw facts here")
    _target_options(env, target_required=False)
    env.add_argument("--log", type=Path, help="the vLLM startup log (first complete init log)")
    env.add_argument(
        "--nvidia-smi-xml",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="`nvidia-smi -q -x` output of one node (repeat per node)",
    )
    env.add_argument(
        "--host-info",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="JSON from `golive env collect --host` (repeat per node)",
    )
    env.add_argument(
        "--container-info",
        type=Path,
        metavar="FILE",
        help="JSON from `golive env collect --container`",
    )
    env.add_argument("--image", help="image reference, name:tag@sha256:digest")
    collect = env.add_mutually_exclusive_group()
    collect.add_argument("--host", action="store_true", help="collect: this node's GPUs and driver")
    collect.add_argument("--container", action="store_true", help="collect: this container")
    env.add_argument("-o", "--output", type=Path, help="collect: where to write the JSON")
    env.add_argument("--python", default="python3", help="collect --container: vLLM's Python")
    env.add_argument("--node", help="collect --host: node name (default: hostname)")
    env.add_argument(
        "--gpu-curve",
        action="store_true",
        help="collect: sample this node's GPU memory (NVML, 5 Hz) into -o as CSV",
    )
    env.add_argument("--duration", type=float, default=600.0, help="collect --gpu-curve: seconds")
    capacity = sub.add_parser(
        "capacity", help="the four pressure phases: model load, long input, concurrency, sustained"
    )
    _target_options(capacity)
    capacity.add_argument("--concurrency", type=int, help="highest concurrency of the ramp")
    capacity.add_argument("--max-context", type=int, help="intended max input tokens")
    capacity.add_argument("--duration", type=float, help="sustained phase, seconds")
    capacity.add_argument("--step-duration", type=float, help="each ramp step, seconds")
    capacity.add_argument("--sample", type=Path, help="JSONL of chat bodies to use as the workload")
    capacity.add_argument("--log", type=Path, help="startup log, for the model-load phase")
    capacity.add_argument("--target-pid", type=int, help="PID of a local server: sample its RSS")
    capacity.add_argument(
        "--launch",
        metavar="CMD",
        help='start this server command first (e.g. "vllm serve ..."), record its load, '
        "run the phases against --target, then stop it",
    )
    capacity.add_argument(
        "--gpu-curve",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a node's `env collect --gpu-curve` CSV, merged by phase (repeat)",
    )
    cache = sub.add_parser(
        "cache", help="prove prefix-cache reuse: cold, warm and control requests"
    )
    _target_options(cache)
    cache.add_argument(
        "--prefix-tokens", type=int, help="shared prefix size (default: from blocks)"
    )
    cache.add_argument("--warm-repeats", type=int, default=5, help="warm requests (default 5)")
    cache.add_argument(
        "--cold-samples", type=int, default=3, help="cold requests for the TTFT test"
    )
    cache.add_argument("--log", type=Path, help="startup log: block size, Mamba mode, retention")
    check = sub.add_parser("verify", help="check a bundle against its manifest")
    check.add_argument("bundle", type=Path)
    demo = sub.add_parser(
        "demo", help="start the bundled local vLLM (CPU) and run golive against it"
    )
    demo.add_argument("--model", default="qwen", choices=("qwen", "smollm2"))
    demo.add_argument("--out", type=Path, help="bundle directory (default ./golive-demo-<time>)")
    demo.add_argument("--json", action="store_true", help="print verdict.json to stdout")
    target = sub.add_parser("target", help="the bundled local vLLM target")
    target_sub = target.add_subparsers(dest="target_command", required=True)
    setup = target_sub.add_parser("setup", help="install the engine venv and convert the models")
    setup.add_argument("--model", action="append", choices=("qwen", "smollm2"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return asyncio.run(_dispatch(args))
    except ConfigError as exc:
        err.print(f"[red]config error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_USAGE
    except GoliveError as exc:
        err.print(f"[red]golive error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]: the bundle keeps what was written so far")
        return 130


async def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "verify":
        return _verify(args.bundle)
    if args.command == "smoke":
        config = load_config(args.config, _target_overrides(args))
        verdict = await judge(config, args.out or _default_out("golive"), "smoke", run_smoke)
        return _finish(verdict, args.json)
    if args.command == "env":
        return await _env(args)
    if args.command == "capacity":
        return await _capacity(args)
    if args.command == "cache":
        return await _cache(args)
    if args.command == "demo":
        from golive.demo import run_demo

        verdict = await run_demo(args.model, args.out or _default_out("golive-demo"), _progress)
        return _finish(verdict, args.json)
    if args.command == "target":
        from golive.target.install import ensure_target

        for model in args.model or ["qwen", "smollm2"]:
            paths = await ensure_target(model, _progress)
            _progress(f"target ready: {paths.spec.name} at {paths.model_dir} (engine {paths.venv})")
        return 0
    raise ConfigError(f"unknown command {args.command!r}")


async def _env(args: argparse.Namespace) -> int:
    if args.action == "collect":
        if args.gpu_curve and args.output is not None:
            rows = await record_gpu_curve(args.output, args.duration)
            _progress(f"wrote {rows} samples to {args.output}")
            return 0
        if not (args.host or args.container) or args.output is None:
            raise ConfigError("env collect needs --host, --container or --gpu-curve, and -o FILE")
        if args.host:
            facts: Any = await asyncio.to_thread(collect_host, args.node)
        else:
            facts = await asyncio.to_thread(collect_container, args.python, args.image)
        args.output.write_text(facts.model_dump_json(indent=2) + "\n")
        for problem in facts.errors:
            _progress(f"note: {problem}")
        _progress(f"wrote {args.output}")
        return 0
    evidence = load_evidence(
        args.log, args.nvidia_smi_xml, args.host_info, args.container_info, args.image
    )
    config = load_config(args.config, _target_overrides(args))
    verdict = await judge(
        config,
        args.out or _default_out("golive-env"),
        "env",
        env_programme(evidence),
        require_target=False,
    )
    return _finish(verdict, args.json)


async def _capacity(args: argparse.Namespace) -> int:
    overrides = {
        **_target_overrides(args),
        "capacity.concurrency": args.concurrency,
        "capacity.max_context": args.max_context,
        "capacity.duration_s": args.duration,
        "capacity.step_duration_s": args.step_duration,
    }
    config = load_config(args.config, overrides)
    out = args.out or _default_out("golive-capacity")
    if args.launch is None:
        log_text = None if args.log is None else _read(args.log, "--log")
        return await _run_capacity(args, config, out, log_text, None)
    assert config.target.url is not None
    log_path = Path(tempfile.mkdtemp(prefix="golive-launch-")) / "server.log"
    started = time.time()
    target = await launch(
        shlex.split(args.launch),
        config.target.url,
        log_path,
        config.target.model or "",
        progress=_progress,
    )
    try:
        return await _run_capacity(
            args, config, out, log_path.read_text(errors="replace"), target, (started, time.time())
        )
    finally:
        await stop_target(target)
        _progress(f"stopped the launched server (pid {target.pid}); its log: {log_path}")


async def _run_capacity(
    args: argparse.Namespace,
    config: GoliveConfig,
    out: Path,
    log_text: str | None,
    launched: RunningTarget | None,
    load_span: tuple[float, float] | None = None,
) -> int:
    sample = (
        () if args.sample is None else tuple(read_sample(args.sample, config.target.model or ""))
    )
    with RichProgress(err) as progress:
        inputs = CapacityInputs(
            target_pid=launched.pid if launched else args.target_pid,
            startup=None if log_text is None else parse_startup_log(log_text),
            load_curve=launched.load_curve if launched else (),
            sample=sample,
            progress=progress,
            gpu_curves=tuple(args.gpu_curve),
            load_span=load_span,
        )

        async def programme(ctx: CheckContext) -> list[CheckResult]:
            if log_text is not None:
                ctx.bundle.write_text("environment/startup.log", log_text)
            return await run_capacity(ctx, inputs)

        verdict = await judge(config, out, "capacity", programme)
    return _finish(verdict, args.json)


async def _cache(args: argparse.Namespace) -> int:
    config = load_config(args.config, _target_overrides(args))
    log_text = None if args.log is None else _read(args.log, "--log")
    settings = CacheSettings(
        prefix_tokens=args.prefix_tokens,
        warm_repeats=max(1, args.warm_repeats),
        cold_samples=max(1, args.cold_samples),
        startup=None if log_text is None else parse_startup_log(log_text),
    )

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        if log_text is not None:
            ctx.bundle.write_text("environment/startup.log", log_text)
        return await run_cache(ctx, settings)

    verdict = await judge(config, args.out or _default_out("golive-cache"), "cache", programme)
    return _finish(verdict, args.json)


def _read(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot be read ({exc.strerror})") from exc


def _target_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "target.url": args.target,
        "target.metrics_url": args.metrics_url,
        "target.api_key_env": args.api_key_env,
        "target.model": args.model,
        "target.engine_url": args.engine_url,
        "profile": args.profile,
    }


def _default_out(prefix: str) -> Path:
    return Path(f"{prefix}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")


def _verify(bundle: Path) -> int:
    report = verify(bundle)
    if report.ok:
        print(f"{bundle}: intact (every file matches manifest-sha256.txt)")
        return 0
    for kind, paths in (
        ("altered", report.altered),
        ("missing", report.missing),
        ("extra", report.extra),
    ):
        for path in paths:
            print(f"{kind}: {path}")
    print(f"{bundle}: NOT intact", file=sys.stderr)
    return 1


def _finish(verdict: Verdict, as_json: bool) -> int:
    if as_json:
        print(json.dumps(verdict.data, indent=2))
    else:
        _print_table(verdict.data)
    err.print(f"bundle: {verdict.bundle}")
    return verdict.outcome.exit_code


def _print_table(data: dict[str, Any]) -> None:
    table = Table(title=f"golive {data['command']}: {data['outcome']}", title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("summary", overflow="fold")
    for check in data["checks"]:
        style = _STYLE.get(check["status"], "")
        table.add_row(check["id"], f"[{style}]{check['status']}[/{style}]", check["summary"])
    Console().print(table)
    for rule in data["rules_fired"]:
        Console().print(f"{rule['outcome']}: {rule['reason']} ({', '.join(rule['checks'])})")
