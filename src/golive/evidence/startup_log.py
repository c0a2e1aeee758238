"""Pure parser of a vLLM startup log: what the engine says it started as, and what went wrong.

Line prefixes (`(EngineCore_DP0 pid=N) INFO 11-29 18:29:58 [core.py:133] `) are stripped and
messages are matched on their text only (line numbers in `[file.py:N]` change every
release). Unknown lines are ignored; nothing here raises on odd input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from golive.evidence.printed_values import parse_config_pairs, parse_python_dict
from golive.evidence.startup_signatures import PATTERNS, STALL_WHEN_SERVING, Severity, Signature

_PREFIX = re.compile(
    r"^(?:\((?P<proc>[^)]*?)(?: pid=\d+)?\)\s+)?"
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\]\s?(?P<msg>.*)$"
)


@dataclass(frozen=True, slots=True)
class OtherLaunch:
    """A launch in the same file that is not the serving one: history, not evidence."""

    number: int
    first_line: int
    last_line: int
    vllm_version: str | None
    ready: bool
    fatal: tuple[Signature, ...]


@dataclass(frozen=True, slots=True)
class StartupFacts:
    """What the log says the engine started as; `None` where the log does not say."""

    vllm_version: str | None = None
    version_line: int | None = None
    model: str | None = None
    non_default_args: Mapping[str, Any] = field(default_factory=dict)
    args_line: int | None = None
    engine_config: Mapping[str, str] = field(default_factory=dict)
    engine_line: int | None = None
    architecture: str | None = None
    max_model_len: int | None = None
    kv_cache_tokens: int | None = None
    kv_cache_device: str | None = None
    max_concurrency: float | None = None
    kv_cache_line: int | None = None
    available_kv_gib: float | None = None
    weights_load_s: float | None = None
    model_load_gib: float | None = None
    init_engine_s: float | None = None
    compile_s: float | None = None  # torch.compile, in total
    cuda_graph_gib: float | None = None  # CUDA graph pool memory, actual
    auto_tool_choice: bool = False
    mamba_cache_mode: str | None = None
    mamba_prefix_caching: bool | None = None
    attention_block_size: int | None = None
    ready_line: int | None = None
    signatures: tuple[Signature, ...] = ()
    engine_version: str | None = None  # from the engine-config line, beside the banner's
    launch: int = 1  # which launch of the file this is (1-based), of `launches`
    launches: int = 1
    first_line: int = 1
    last_line: int = 0
    other_launches: tuple[OtherLaunch, ...] = ()
    line_count: int = 0
    text: str = field(default="", repr=False, compare=False)  # the log as parsed

    def arg(self, name: str) -> Any:
        """A setting from the non-default args, else from the engine config line."""
        if name in self.non_default_args:
            return self.non_default_args[name]
        return self.engine_config.get(name)

    @property
    def tool_parser(self) -> str | None:
        value = self.arg("tool_call_parser")
        return str(value) if value else None

    @property
    def reasoning_parser(self) -> str | None:
        value = self.arg("reasoning_parser") or self.engine_config.get("reasoning_parser")
        return str(value) if value else None

    @property
    def prefix_caching(self) -> bool | None:
        value = self.arg("enable_prefix_caching")
        if value is None:
            return None
        return str(value).lower() == "true"

    def load_figures(self) -> dict[str, float | None]:
        """What loading the model cost, as the engine printed it (None where it did not)."""
        return {
            "weights_load_s": self.weights_load_s,
            "model_load_gib": self.model_load_gib,
            "init_engine_s": self.init_engine_s,
            "compile_s": self.compile_s,
            "cuda_graph_gib": self.cuda_graph_gib,
            "available_kv_gib": self.available_kv_gib,
        }

    def parallel(self) -> dict[str, int]:
        """Tensor, pipeline, data and expert parallel settings the engine started with."""
        sizes: dict[str, int] = {}
        for key, name in zip(PARALLEL_KEYS, ("tp", "pp", "dp"), strict=True):
            count = parallel_count(self.arg(key))
            sizes[name] = 1 if count is None else count
        sizes["ep"] = (
            1 if not _truthy(self.arg("enable_expert_parallel")) else sizes["tp"] * sizes["dp"]
        )
        return sizes

    def launch_lines(self) -> list[str]:
        """The log's lines of this launch, from `first_line` to `last_line` (to the end where
        `last_line` is 0, as in facts built without a file)."""
        return self.text.splitlines()[self.first_line - 1 : self.last_line or None]

    def served_names(self) -> list[str]:
        """The model names the launch serves under (served_model_name, else model)."""
        names = self.arg("served_model_name") or self.arg("model")
        if not names:
            return []
        return [str(n) for n in names] if isinstance(names, list | tuple) else [str(names)]

    @property
    def fatal(self) -> tuple[Signature, ...]:
        return tuple(s for s in self.signatures if s.severity is Severity.FATAL)


@dataclass(frozen=True, slots=True)
class LiveServer:
    """What the running server says of itself; None where it was not asked."""

    version: str | None = None
    max_model_len: str | None = None
    model: str | None = None

    def contradictions(self, facts: StartupFacts) -> list[str]:
        """Each fact both sides state and disagree on, as "<fact> in the log, <value> live"."""
        found = []
        if self.version and facts.vllm_version and facts.vllm_version != self.version:
            found.append(f"vLLM {facts.vllm_version} in the log, {self.version} live")
        if (
            self.max_model_len
            and facts.max_model_len is not None
            and str(facts.max_model_len) != self.max_model_len
        ):
            found.append(
                f"max_model_len {facts.max_model_len} in the log, {self.max_model_len} live"
            )
        names = facts.served_names()
        if self.model and names and self.model not in names:
            found.append(f"model {', '.join(names)} in the log, {self.model} live")
        return found

    def agrees(self, facts: StartupFacts) -> bool:
        return not self.contradictions(facts)


PARALLEL_KEYS = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
_COUNT = re.compile(r"\s*(\d{1,9})\s*", re.ASCII)


def parallel_count(value: Any) -> int | None:
    """A parallel size as the log prints it (`2`, `'2'`); None where absent or not a plain
    count of at most nine ASCII digits (`'²'` passes str.isdigit but is no number)."""
    found = None if value is None else _COUNT.fullmatch(str(value))
    return int(found[1]) if found else None


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("true", "1", "yes")


def _message(raw: str) -> str:
    match = _PREFIX.match(raw)
    return match.group("msg") if match else raw


# The launch's own version line, anchored at the message's start (a logged prompt that
# quotes one is not a launch): the logo banner, the banner with the logo off, older servers.
_VERSION = re.compile(r"^\s*[█▀▄][█▀▄ ]*\s+version (\d+\.\d+\.\d+\S*)")
_PLAIN_VERSION = re.compile(r"^vLLM (?:API )?server version (\d+\.\d+\.\d+[^\s,]*)")
_READY = re.compile(
    r"^(?:Starting vLLM server on|(?:\([^)]*\)\s+)?INFO:\s+Application startup complete)"
)


def _version_in(msg: str) -> str | None:
    """The version a launch's banner line states (None: not a banner line)."""
    found = _VERSION.match(msg) or _PLAIN_VERSION.match(msg)
    return found.group(1) if found else None


_ENGINE = re.compile(r"Initializing a V1 LLM engine \(v(\S+)\) with config: (.*)$")
_KV = re.compile(
    r"(GPU|CPU|XPU|TPU) KV cache size: ([\d,]+) tokens(?:, Maximum concurrency for ([\d,]+) "
    r"tokens per request: ([\d.]+)x)?"
)
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_NUMBER_AFTER = {
    "max_model_len": re.compile(r"Using max model len (\d+)"),
    "available_kv_gib": re.compile(r"Available KV cache memory: ([\d.]+) GiB"),
    "weights_load_s": re.compile(r"Loading weights took ([\d.]+) seconds"),
    "init_engine_s": re.compile(r"init engine \(.*\) took ([\d.]+) s"),
    "attention_block_size": re.compile(r"Setting attention block size to (\d+) tokens"),
    "compile_s": re.compile(r"torch\.compile took ([\d.]+) s in total"),
    "cuda_graph_gib": re.compile(r"CUDA graph pool memory: ([\d.]+) GiB \(actual\)"),
}
_MODEL_LOAD = re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) seconds")
_MAMBA_MODE = re.compile(r"Mamba cache mode is set to '(\w+)'")
_MAMBA_PREFIX = re.compile(
    r"Prefix caching in Mamba cache '\w+' mode is currently (enabled|disabled)"
)


def parse_startup_log(text: str, live: LiveServer | None = None) -> StartupFacts:
    """Parse a whole startup log and return the facts of the launch that serves. Never raises.

    A file may hold several launches (a restart appends to the same log): it is split at each
    launch's banner or `non-default args:` line, and the judged launch is the last one that
    agrees with what the live server says of itself (`live`) and reached ready; the others
    are kept as history (`other_launches`), never as evidence about the serving one.
    """
    lines = text.splitlines()
    parsed = _launches(lines)
    bounds = [bound for bound, _ in parsed]
    launches = [facts for _, facts in parsed]
    index = _serving(launches, live or LiveServer())
    others = tuple(
        OtherLaunch(
            number + 1,
            first + 1,
            end,
            facts.vllm_version,
            facts.ready_line is not None,
            facts.fatal,
        )
        for number, (facts, (first, end)) in enumerate(zip(launches, bounds, strict=True))
        if number != index
    )
    first, end = bounds[index]
    return dataclasses.replace(
        launches[index],
        launch=index + 1,
        launches=len(launches),
        first_line=first + 1,
        last_line=end,
        other_launches=others,
        line_count=len(lines),
        text=text,
    )


def _opener(msg: str) -> str | None:
    """The kind of line that opens a launch: the version banner, or the args line."""
    if _version_in(msg) is not None:
        return "version"
    if msg.startswith("non-default args:"):
        return "args"
    return None


def launch_starts(lines: Sequence[str]) -> list[int]:
    """The 0-based index of each launch's first line. A launch opens with its version banner
    and then its `non-default args:` line; a second of either (or a banner after args) is the
    next launch, which starts at the top of its banner block."""
    starts, seen = [0], set[str]()
    for index, raw in enumerate(lines):
        kind = _opener(_message(raw))
        if kind is None:
            continue
        if kind in seen or (kind == "version" and "args" in seen):
            top = index
            while top - 1 > starts[-1] and _banner_art(_message(lines[top - 1])):
                top -= 1
            starts.append(top)
            seen = set()
        seen.add(kind)
    return starts


def _launches(lines: Sequence[str]) -> list[tuple[tuple[int, int], StartupFacts]]:
    """Each launch's [first, end) line indexes and its facts. A piece with neither the args
    line nor the engine-config line is not a launch of its own (a stray banner-like line): it
    stays with the launch before it, and so do its failures. A launch is parsed once, unless
    such a piece joined it (then it is parsed again whole)."""
    starts = launch_starts(lines)
    merged: list[tuple[tuple[int, int], StartupFacts | None]] = []
    for first, end in zip(starts, [*starts[1:], len(lines)], strict=True):
        piece = _parse_launch(lines[first:end], first)
        if merged and piece.args_line is None and piece.engine_line is None:
            merged[-1] = ((merged[-1][0][0], end), None)
        else:
            merged.append(((first, end), piece))
    return [
        ((first, end), facts if facts is not None else _parse_launch(lines[first:end], first))
        for (first, end), facts in merged
    ]


def _banner_art(msg: str) -> bool:
    text = msg.strip()
    return not text or text[0] in "█▀▄"


def _serving(launches: Sequence[StartupFacts], live: LiveServer) -> int:
    """The index of the launch that serves: the last that agrees with the live server and
    reached ready (else the last that agrees; where none agrees, the last that reached ready,
    which the startup rules then find contradicting the live server)."""
    agreeing = [n for n, facts in enumerate(launches) if live.agrees(facts)]
    candidates = agreeing or list(range(len(launches)))
    ready = [n for n in candidates if launches[n].ready_line is not None]
    return (ready or candidates)[-1]


def _parse_launch(lines: Sequence[str], offset: int) -> StartupFacts:
    """One launch's lines; line numbers are the file's (1-based), `offset` lines in."""
    facts: dict[str, Any] = {}
    signatures: list[Signature] = []
    for number, raw in enumerate(lines, start=offset + 1):
        msg = _message(raw)
        with contextlib.suppress(ValueError):  # a malformed fact line is not a fact
            _read_facts(msg, number, facts)
        for pattern in PATTERNS:
            if pattern.regex.search(msg):
                signatures.append(
                    Signature(pattern.kind, pattern.severity, number, msg.strip()[:300])
                )
                break
    ready = facts.get("ready_line")
    signatures = [
        Signature(s.kind, Severity.INFO, s.line, s.text)
        if s.kind in STALL_WHEN_SERVING and (ready is None or s.line < ready)
        else s
        for s in signatures
    ]
    return StartupFacts(**facts, signatures=tuple(signatures))


def _read_facts(msg: str, number: int, facts: dict[str, Any]) -> None:
    if facts.get("vllm_version") is None and (version := _version_in(msg)) is not None:
        facts["vllm_version"], facts["version_line"] = version, number
    if msg.lstrip().startswith(("█", "▀")) and " model " in msg and "model" not in facts:
        facts["model"] = msg.split(" model ", 1)[1].strip()
    if msg.startswith("non-default args:") and "non_default_args" not in facts:
        facts["non_default_args"] = parse_python_dict(msg.partition(":")[2].strip())
        facts["args_line"] = number
    elif (engine := _ENGINE.search(msg)) and "engine_config" not in facts:
        facts["engine_config"] = parse_config_pairs(engine.group(2))
        facts["engine_line"] = number
        facts["engine_version"] = engine.group(1)
        facts.setdefault("vllm_version", engine.group(1))
        facts.setdefault("version_line", number)
    elif (kv := _KV.search(msg)) is not None:
        facts["kv_cache_device"] = kv.group(1)
        facts["kv_cache_tokens"] = int(kv.group(2).replace(",", ""))
        facts["kv_cache_line"] = number
        if kv.group(4):
            facts["max_concurrency"] = float(kv.group(4))
    elif (conc := _CONCURRENCY.search(msg)) is not None:
        facts["max_concurrency"] = float(conc.group(2))
    elif msg.startswith("Resolved architecture:"):
        facts["architecture"] = msg.split(":", 1)[1].strip()
    elif (load := _MODEL_LOAD.search(msg)) is not None:
        # each pipeline stage prints its own: the largest is what a GPU of the engine holds
        facts["model_load_gib"] = max(float(load.group(1)), facts.get("model_load_gib", 0.0))
        facts.setdefault("weights_load_s", float(load.group(2)))
    elif '"auto" tool choice has been enabled' in msg:
        facts["auto_tool_choice"] = True
    elif (mode := _MAMBA_MODE.search(msg)) is not None:
        facts["mamba_cache_mode"] = mode.group(1)
    elif (mamba := _MAMBA_PREFIX.search(msg)) is not None:
        facts["mamba_prefix_caching"] = mamba.group(1) == "enabled"
    elif _READY.match(msg):
        facts.setdefault("ready_line", number)
    else:
        for key, regex in _NUMBER_AFTER.items():
            if (found := regex.search(msg)) is not None:
                value = found.group(1)
                figure: float = float(value) if "." in value else int(value)
                if key == "available_kv_gib" and key in facts:
                    # each pipeline stage prints its own pool; the engine allocates the least
                    # of them on every GPU (vLLM sizes the cache to the smallest worker's)
                    figure = min(figure, facts[key])
                facts[key] = figure
                break
