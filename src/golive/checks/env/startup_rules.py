"""Pure rules on the startup log: failures, parsers, prefix caching, KV cache (the parallel
layout and ranks: `startup_parallel`).

A startup failure (CUDA init, NCCL, missing kernels, OOM at load) means the deployment never
reached an application-level test: `rebuild` (environment or topology), not traffic tuning.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from golive.checks.env.chain_inputs import ChainInputs
from golive.evidence.startup_log import LiveServer, StartupFacts
from golive.evidence.startup_signatures import Severity, Signature, explain
from golive.results import STARTUP_RESULT, CheckClass, CheckResult, ResultsOf, Status

NO_LOG = "no startup log: pass --log with the first complete engine initialization log"


def _quote(signature: Signature) -> str:
    text = signature.text if len(signature.text) <= 110 else signature.text[:107] + "..."
    return f'{explain(signature)}: "{text}" (line {signature.line})'


_KERNEL = re.compile(r"during inference: (\w+)")


def _history(facts: StartupFacts) -> str:
    """The file's other launches, as history: their failures are not this launch's."""
    if facts.launches < 2:
        return ""
    parts = []
    for other in facts.other_launches:
        what = (
            "; ".join(_quote(s) for s in other.fatal[:2])
            if other.fatal
            else ("reached ready" if other.ready else "never reached ready")
        )
        parts.append(
            f"launch {other.number} (lines {other.first_line}-{other.last_line}, vLLM "
            f"{other.vllm_version or 'unknown'}): {what}"
        )
    return (
        f" [judged: launch {facts.launch} of {facts.launches} in the file (lines "
        f"{facts.first_line}-{facts.last_line}), the one serving; the other launches are not "
        f"evidence about it: {' | '.join(parts)}]"
    )


def _self_contradiction(facts: StartupFacts) -> str | None:
    """The launch's banner and its engine-config line name different vLLM versions."""
    if facts.engine_version is None or facts.vllm_version in (None, facts.engine_version):
        return None
    return (
        f"the log contradicts itself: the banner says vLLM {facts.vllm_version} (line "
        f"{facts.version_line}) but the engine-config line says v{facts.engine_version} (line "
        f"{facts.engine_line}); the image's version string or the log is not what it seems"
    )


def check_startup_log(inputs: ChainInputs) -> CheckResult:
    facts, path = inputs.startup, inputs.startup_path
    if facts is None:
        return STARTUP_RESULT("startup.log", Status.NO_DATA, NO_LOG)
    fatal = facts.fatal
    warnings = [s for s in facts.signatures if s.severity is Severity.WARNING]
    measurements: dict[str, float | int | str | bool | None] = {
        "lines": facts.line_count,
        "fatal_signatures": len(fatal),
        "warning_signatures": len(warnings),
        **facts.load_figures(),
        "info_signatures": sum(1 for s in facts.signatures if s.severity is Severity.INFO),
    }
    jit = sorted({m.group(1) for s in warnings if (m := _KERNEL.search(s.text))})
    if jit:
        measurements["jit_kernels"] = ", ".join(jit)
    history = _history(facts)
    if facts.launches > 1:
        measurements |= {
            "launches": facts.launches,
            "judged_launch": facts.launch,
            "judged_lines": f"{facts.first_line}-{facts.last_line}",
            "other_launches_fatal": sum(len(o.fatal) for o in facts.other_launches),
        }
    # a launch after the judged one that failed or never reached ready: which one serves is
    # in doubt (a restart still loading, hung, or its log cut)
    later = [
        o for o in facts.other_launches if o.number > facts.launch and (o.fatal or not o.ready)
    ]
    if fatal:
        found = "; ".join(_quote(s) for s in fatal[:5])
        kinds = sorted({s.kind for s in fatal})
        measurements["failure_kinds"] = ", ".join(kinds)
        return STARTUP_RESULT(
            "startup.log",
            Status.FAIL,
            f"startup failed: {found}{history}",
            measurements,
            evidence=[f"{path}#L{s.line}" for s in fatal[:10]],
        )
    if facts.ready_line is None:
        return STARTUP_RESULT(
            "startup.log",
            Status.NO_DATA,
            "the log never shows the server ready (no 'Starting vLLM server' line): it is not a "
            f"complete initialization log{history}",
            measurements,
            evidence=[path],
        )
    contradiction = _self_contradiction(facts)
    if later:
        what = (
            f"failed (launch {later[0].number}: {_quote(later[0].fatal[0])})"
            if later[0].fatal
            else f"never reached ready (launch {later[0].number}, lines "
            f"{later[0].first_line}-{later[0].last_line}: still loading, hung, or its log cut)"
        )
        contradiction = "; ".join(
            [
                *([contradiction] if contradiction else []),
                f"a later launch in the file {what}: make sure the running server is launch "
                f"{facts.launch}, the one judged",
            ]
        )
    if warnings or contradiction:
        found = "; ".join(
            [*([contradiction] if contradiction else []), *(_quote(s) for s in warnings[:5])]
        )
        lines = [facts.version_line, facts.engine_line] if contradiction else []
        return STARTUP_RESULT(
            "startup.log",
            Status.WARN,
            f"started, with warnings: {found}{history}",
            measurements,
            evidence=[f"{path}#L{n}" for n in [*lines, *(s.line for s in warnings[:10])] if n],
        )
    return STARTUP_RESULT(
        "startup.log",
        Status.PASS,
        f"started cleanly: no failure signature{history}",
        measurements,
        evidence=[path],
    )


def check_parsers(inputs: ChainInputs) -> CheckResult:
    """Tool-call and reasoning parsers as the profile requires, from non-default args."""
    chain = inputs.profile.chain
    critical = chain.tool_parser is not None or chain.reasoning_parser is not None
    facts = inputs.startup
    if facts is None:
        return STARTUP_RESULT("startup.parsers", Status.NO_DATA, NO_LOG, critical=critical)
    if facts.args_line is None:  # the log does not say: not evidence of a wrong parser
        return STARTUP_RESULT(
            "startup.parsers",
            Status.NO_DATA,
            "the startup log has no `non-default args:` line, so the parsers it started with "
            "are unknown: give the first complete engine-initialization log (--log)",
            critical=critical,
            evidence=[inputs.startup_path],
        )
    where = (
        [f"{inputs.startup_path}#L{facts.args_line}"] if facts.args_line else [inputs.startup_path]
    )
    measurements = {
        "tool_call_parser": facts.tool_parser,
        "reasoning_parser": facts.reasoning_parser,
        "auto_tool_choice": facts.auto_tool_choice or bool(facts.arg("enable_auto_tool_choice")),
    }
    problems = []
    if chain.tool_parser is not None:
        if facts.tool_parser != chain.tool_parser:
            problems.append(
                f"tool-call parser is {facts.tool_parser!r}, "
                f"the profile needs {chain.tool_parser!r}"
            )
        if not measurements["auto_tool_choice"]:
            problems.append("auto tool choice is not enabled (--enable-auto-tool-choice)")
    if chain.reasoning_parser is not None and facts.reasoning_parser != chain.reasoning_parser:
        problems.append(
            f"reasoning parser is {facts.reasoning_parser!r}, "
            f"the profile needs {chain.reasoning_parser!r}"
        )
    if problems:
        return STARTUP_RESULT(
            "startup.parsers", Status.FAIL, "; ".join(problems), measurements, evidence=where
        )
    return STARTUP_RESULT(
        "startup.parsers",
        Status.PASS,
        f"tool-call parser {facts.tool_parser!r}, reasoning parser {facts.reasoning_parser!r}",
        measurements,
        critical=critical,
        evidence=where,
    )


def check_prefix_caching_flag(inputs: ChainInputs) -> CheckResult:
    """The flag only: reuse itself is proved by `golive cache`. Records the retention policy."""
    required = inputs.profile.chain.prefix_caching_required
    facts = inputs.startup
    labels = inputs.cache_info
    from_log = facts.prefix_caching if facts is not None else None
    from_metrics = labels.get("enable_prefix_caching")
    enabled = (
        from_log
        if from_log is not None
        else (None if from_metrics is None else from_metrics == "True")
    )
    retention = (
        (facts.arg("prefix_cache_retention_interval") if facts else None)
        or labels.get("prefix_cache_retention_interval")
        or (
            inputs.container.environment.get("VLLM_PREFIX_CACHE_RETENTION_INTERVAL")
            if inputs.container
            else None
        )
    )
    measurements = {
        "enable_prefix_caching": enabled,
        "mamba_cache_mode": (facts.mamba_cache_mode if facts else None)
        or labels.get("mamba_cache_mode"),
        "mamba_prefix_caching": facts.mamba_prefix_caching if facts else None,
        "retention_interval": None if retention is None else str(retention),
        "block_size": labels.get("block_size"),
    }
    where = []
    if facts is not None:
        where.append(f"{inputs.startup_path}#L{facts.engine_line or facts.args_line}")
    if labels:
        where.append("metrics/env.prom#vllm:cache_config_info")
    prefix_caching = ResultsOf(CheckClass.CACHE, tuple(where), critical=required)
    if enabled is None:
        return prefix_caching(
            "startup.prefix_caching",
            Status.NO_DATA,
            "prefix-caching state unknown: needs the startup log or the engine's metrics",
            measurements,
        )
    if not enabled:
        return prefix_caching(
            "startup.prefix_caching",
            Status.FAIL if required else Status.WARN,
            "prefix caching is disabled in the engine config"
            + (" but the profile requires it (pass --enable-prefix-caching)" if required else ""),
            measurements,
        )
    return prefix_caching(
        "startup.prefix_caching",
        Status.PASS,
        "prefix caching is enabled (the flag only; `golive cache` proves reuse)"
        + (
            f"; mamba cache mode {measurements['mamba_cache_mode']}"
            if measurements["mamba_cache_mode"]
            else ""
        ),
        measurements,
    )


def check_kv_cache(inputs: ChainInputs) -> CheckResult:
    """KV cache size and concurrency as logged; max_model_len as served agrees with the log."""
    facts = inputs.startup
    if facts is None:
        return STARTUP_RESULT("startup.kv_cache", Status.NO_DATA, NO_LOG, critical=False)
    where = (
        [f"{inputs.startup_path}#L{facts.kv_cache_line}"]
        if facts.kv_cache_line
        else [inputs.startup_path]
    )
    measurements: dict[str, float | int | str | bool | None] = {
        "kv_cache_tokens": facts.kv_cache_tokens,
        "kv_cache_device": facts.kv_cache_device,
        "max_concurrency_at_max_len": facts.max_concurrency,
        "max_model_len_log": facts.max_model_len,
        "max_model_len_live": None
        if inputs.live_max_model_len is None
        else inputs.live_max_model_len.value,
        "attention_block_size": facts.attention_block_size,
    }
    live = inputs.live_max_model_len
    if (
        live is not None
        and facts.max_model_len is not None
        and str(facts.max_model_len) != live.value
    ):
        return STARTUP_RESULT(
            "startup.kv_cache",
            Status.WARN,
            f"the log says max_model_len {facts.max_model_len} but the server reports "
            f"{live.value}: the log may be from another launch",
            measurements,
            critical=False,
            evidence=[*where, live.where],
        )
    if facts.kv_cache_tokens is None:
        return STARTUP_RESULT(
            "startup.kv_cache",
            Status.NO_DATA,
            "no KV cache size line in the log",
            measurements,
            critical=False,
            evidence=where,
        )
    return STARTUP_RESULT(
        "startup.kv_cache",
        Status.PASS,
        f"{facts.kv_cache_device} KV cache {facts.kv_cache_tokens:,} tokens, max concurrency "
        f"{facts.max_concurrency}x at max_model_len {facts.max_model_len}",
        measurements,
        critical=False,
        evidence=where,
    )


def other_launch(inputs: ChainInputs) -> list[str]:
    """Where the startup log contradicts the live server on max_model_len or the served
    model: it is then the log of another launch, and says nothing about the one being judged
    (a version that differs is `environment.vllm_version`'s finding: the layers disagree)."""
    if inputs.startup is None:
        return []
    live = LiveServer(
        max_model_len=None
        if inputs.live_max_model_len is None
        else inputs.live_max_model_len.value,
        model=None if inputs.live_model is None else inputs.live_model.value,
    )
    return live.contradictions(inputs.startup)


def as_other_launch(results: Sequence[CheckResult], reasons: Sequence[str]) -> list[CheckResult]:
    """The startup checks become no_data when the log is of another launch."""
    if not reasons:
        return list(results)
    why = (
        "the startup log contradicts the live server (" + "; ".join(reasons) + "): it is the "
        "log of another launch, so it proves nothing here; give the running server's log"
    )
    return [
        dataclasses.replace(r, status=Status.NO_DATA, summary=why)
        if r.id.startswith("startup.")
        else r
        for r in results
    ]
