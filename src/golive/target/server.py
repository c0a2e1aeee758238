"""Start and stop the local vLLM (CPU) server by PID on 127.0.0.1, and wait until healthy."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from golive.errors import LocalTargetError
from golive.evidence.sampling import tree_rss_mib
from golive.target.install import Progress, TargetPaths
from golive.traffic.client import ClientSettings, TargetClient

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """The flags the tests and the demo vary; the rest follow vllm-cpu-target.md."""

    port: int | None = None
    prefix_caching: bool = True
    # usage.prompt_tokens_details.cached_tokens: vLLM leaves it off by default, like a
    # production server; the cache proof then reads the engine's own counters
    prompt_tokens_details: bool = False
    tool_parser: str | None = "hermes"
    max_num_seqs: int | None = None
    max_model_len: int = 4096
    kv_cache_gib: int = 1
    extra_args: tuple[str, ...] = ()
    ready_timeout_s: float = 300.0
    dtype: str | None = None  # None: bfloat16 where the CPU has bf16 units, else float32


@dataclass(frozen=True, slots=True)
class RunningTarget:
    url: str
    pid: int
    port: int
    log_path: Path
    served_name: str
    argv: tuple[str, ...] = field(repr=False, default=())
    load_curve: tuple[tuple[float, float], ...] = field(repr=False, default=())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def cpu_dtype(cpuinfo: str | None = None) -> str:
    """bf16 only where the CPU computes it natively (AVX512-BF16 or AMX). Elsewhere (an
    AVX2-only EPYC, say) oneDNN cannot build bf16 matmuls and vLLM falls back to a torch
    path measured ~10x slower, so float32 serves faster."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return "float32"
    flags = set(cpuinfo.split())
    return "bfloat16" if flags & {"avx512_bf16", "amx_bf16"} else "float32"


def serve_argv(paths: TargetPaths, options: ServeOptions, port: int) -> list[str]:
    """The server command line: deprecated-but-working module entry (the `vllm` script fails)."""
    argv = [
        str(paths.python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(paths.model_dir),
        "--served-model-name",
        paths.spec.served_name,
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        "--dtype",
        options.dtype or cpu_dtype(),
        "--max-model-len",
        str(options.max_model_len),
        "--enforce-eager",
        "--enable-server-load-tracking",
        "--enable-prefix-caching" if options.prefix_caching else "--no-enable-prefix-caching",
    ]
    if options.prompt_tokens_details:  # off by default in vLLM and in the Kimi K3 recipe
        argv.append("--enable-prompt-tokens-details")
    if options.tool_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", options.tool_parser]
    if options.max_num_seqs is not None:
        argv += ["--max-num-seqs", str(options.max_num_seqs)]
    return [*argv, *options.extra_args]


SMALL_HOST_CPUS = 2


# The engine's compute threads are vLLM's own choice: on a 2-core host it keeps one core for
# its API server and engine loop and computes on the other. Computing on both (golive set
# VLLM_CPU_NUM_OF_RESERVED_CPU=0 until 2026-12-06) was ~1.5x faster on a quiet machine but
# ~3x slower in decode beside any busy process, even one at SCHED_IDLE, golive's own load
# client and vLLM's API server among them: the two pinned OpenMP threads wait on each other
# many times a step. One thread lost 10-15 % there (docs/development.md, bench/cpu_engine.py).

SMALL_HOST_NICENESS = 5


def engine_niceness(cpus: int) -> int:
    """On a small host the engine and its API server take every core golive's own load
    client needs, and a client starved of its core measures itself, not the server: its
    sends go out late and the window is not judged (`golive.client_headroom`). Seen on a
    2-core CI runner: a worker process's first sends ~2.2 s late. The bundled engine
    therefore runs a little below golive (niceness 5: about a third of golive's CPU weight
    when both want a core), so the client is served first and the engine has every cycle it
    leaves. Larger hosts keep the engine at golive's own priority."""
    return SMALL_HOST_NICENESS if cpus <= SMALL_HOST_CPUS else 0


async def start_target(
    paths: TargetPaths, options: ServeOptions, run_dir: Path, progress: Progress = print
) -> RunningTarget:
    """Start the server in its own session and wait for `/health`; stop it on failure."""
    port = options.port or free_port()
    log_path = run_dir / f"vllm-{port}.log"
    cpus = len(os.sched_getaffinity(0))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_CPU_KVCACHE_SPACE": str(options.kv_cache_gib),
        "VLLM_CACHE_ROOT": str(paths.root / "vllm-cache"),
        "PYTHONUNBUFFERED": "1",
    }
    argv = serve_argv(paths, options, port)
    return await launch(
        argv,
        f"http://{LOOPBACK}:{port}",
        log_path,
        paths.spec.served_name,
        env,
        options.ready_timeout_s,
        progress,
        niceness=engine_niceness(cpus),
    )


async def launch(
    argv: list[str],
    url: str,
    log_path: Path,
    served_name: str,
    env: dict[str, str] | None = None,
    ready_timeout_s: float = 300.0,
    progress: Progress = print,
    niceness: int = 0,
    spawned: Callable[[RunningTarget], None] | None = None,
) -> RunningTarget:
    """Start any server command (ours, or a user's `vllm serve ...`) in its own session,
    log to `log_path`, sample its memory while it loads, and wait for `url`/health.
    `niceness` > 0 runs it below golive's priority (`nice` execs it: the PID is the
    server's, and `argv` is what is recorded)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    lowered = ["nice", "-n", str(niceness)] if niceness else []
    try:
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                *lowered,
                *argv,
                stdout=log,
                stderr=log,
                stdin=asyncio.subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
    except OSError as exc:
        raise LocalTargetError(f"cannot start {argv[0]!r}: {exc.strerror}") from exc
    log_path.with_suffix(".pid").write_text(f"{process.pid}\n")
    port = int(url.rsplit(":", 1)[1].split("/", maxsplit=1)[0]) if url.count(":") == 2 else 0
    target = RunningTarget(url, process.pid, port, log_path, served_name, tuple(argv))
    if spawned is not None:  # the caller tracks it before it is ready (stopped however it ends)
        spawned(target)
    progress(f"target: starting vLLM (pid {process.pid}) on {target.url}, log {log_path}")
    try:
        curve = await _wait_ready(target, process, ready_timeout_s)
    except BaseException:
        await stop_target(target)
        raise
    return dataclasses.replace(target, load_curve=tuple(curve))


async def _wait_ready(
    target: RunningTarget, process: asyncio.subprocess.Process, timeout_s: float
) -> list[tuple[float, float]]:
    """Poll /health; meanwhile sample the RSS of the server's process tree (model load)."""
    start = time.monotonic()
    deadline = start + timeout_s
    curve: list[tuple[float, float]] = []
    settings = ClientSettings(target.url, connect_timeout_s=5, read_timeout_s=5)
    async with TargetClient(settings) as client:
        while time.monotonic() < deadline:
            if process.returncode is not None:
                raise LocalTargetError(
                    f"vLLM exited with code {process.returncode} before it was healthy; "
                    f"see {target.log_path}:\n{_tail(target.log_path)}"
                )
            rss = tree_rss_mib(target.pid)
            if rss is not None:
                curve.append((round(time.monotonic() - start, 2), round(rss, 1)))
            if (await client.get("/health", "startup-health")).ok:
                return curve
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 0.25)
    raise LocalTargetError(
        f"vLLM was not healthy within {timeout_s:g} s; see {target.log_path}:\n"
        f"{_tail(target.log_path)}"
    )


async def stop_target(target: RunningTarget, grace_s: float = 20.0) -> None:
    """SIGTERM the server PID, wait, then SIGKILL its whole process group if needed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(target.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_alive(target.pid):
        await asyncio.sleep(0.25)
    if _group_alive(target.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(target.pid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the server's session is left (asyncio reaps the leader)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(log unreadable)"


@contextlib.asynccontextmanager
async def running_target(
    paths: TargetPaths, options: ServeOptions, run_dir: Path, progress: Progress = print
) -> AsyncIterator[RunningTarget]:
    target = await start_target(paths, options, run_dir, progress)
    try:
        yield target
    finally:
        await stop_target(target)


class Launched:
    """A server golive started from the user's command (`capacity --launch`). After an
    engine death, `relaunch` starts the same command again (its log beside the first). The
    process is tracked from the moment it is spawned, so one stopped mid-start (an
    interrupt while it loads) is still stopped at the end."""

    def __init__(
        self, argv: list[str], url: str, served_name: str, log_path: Path, progress: Progress
    ) -> None:
        self.argv = argv
        self.url = url
        self.served_name = served_name
        self.log_path = log_path  # the first launch's: the startup log judged
        self.load_span = (0.0, 0.0)  # wall clock, start to healthy: the model load
        self.launches = 0
        self._spawned: RunningTarget | None = None
        self._progress = progress

    @property
    def target(self) -> RunningTarget:
        assert self._spawned is not None, "not started"
        return self._spawned

    async def start(self) -> None:
        started = time.time()
        await self._launch(self.log_path)
        self.load_span = (started, time.time())

    async def relaunch(self) -> int:
        """Stop what is left of the server and start its command again: the new PID."""
        await self.stop()
        return (await self._launch(self.log_path.with_name(f"server-{self.launches + 1}.log"))).pid

    async def stop(self) -> None:
        if self._spawned is not None:
            await stop_target(self._spawned)

    async def _launch(self, log_path: Path) -> RunningTarget:
        self.launches += 1

        def spawned(target: RunningTarget) -> None:
            self._spawned = target

        self._spawned = await launch(
            self.argv, self.url, log_path, self.served_name, progress=self._progress,
            spawned=spawned,
        )  # fmt: skip
        return self._spawned


@contextlib.asynccontextmanager
async def launched_server(
    command: str, url: str, served_name: str, progress: Progress = print
) -> AsyncIterator[Launched]:
    """Start `command` (e.g. "vllm serve ..."), its log in a new temporary folder, wait until
    `url` is healthy; stop it by PID however the block ends, saying where its logs are."""
    log_path = Path(tempfile.mkdtemp(prefix="golive-launch-")) / "server.log"
    up = Launched(shlex.split(command), url, served_name, log_path, progress)
    try:
        await up.start()
        yield up
    finally:
        await up.stop()
        progress(f"stopped the launched server; its logs: {log_path.parent}")
