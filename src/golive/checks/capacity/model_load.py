"""`capacity.model_load` (phase 1) judged from the bundle alone: what the serving launch
printed (`environment/startup.log`) and the host memory curve while golive's own launch
loaded the model (`memory/load.csv`)."""

from __future__ import annotations

from typing import Any

from golive.bundle.layout import LOAD_CURVE, STARTUP_LOG
from golive.bundle.store import BundleReader
from golive.checks.env.judge import serving_launch
from golive.results import CAPACITY_RESULT, STARTUP_RESULT, CheckResult, Status


def judge_model_load(evidence: BundleReader) -> CheckResult:
    """`capacity.model_load` (phase 1) from what the engine printed (`environment/startup.log`)
    and the load curve when golive started it (`memory/load.csv`)."""
    facts = serving_launch(evidence)
    if facts is None:
        return CAPACITY_RESULT(
            "capacity.model_load",
            Status.NO_DATA,
            "no startup log: model-load memory and timing unknown (pass --log)",
            critical=False,
        )
    rows = (evidence.text(LOAD_CURVE) or "").splitlines()[1:]
    curve = [float(row.split(",")[1]) for row in rows if row.strip()]
    measurements: dict[str, Any] = {
        **facts.load_figures(),
        "kv_cache_tokens": facts.kv_cache_tokens,
        "peak_load_rss_mib": max(curve, default=None),
        "load_curve_points": len(curve),
        **{f"parallel_{k}": v for k, v in facts.parallel().items()},
    }
    evidence_files = [STARTUP_LOG] + ([LOAD_CURVE] if curve else [])
    if facts.fatal:
        kinds = ", ".join(sorted({s.kind for s in facts.fatal}))
        return STARTUP_RESULT(
            "capacity.model_load",
            Status.FAIL,
            f"the model did not load cleanly ({kinds}): rebuild the environment or "
            "fix the topology, not traffic",
            measurements,
            evidence=evidence_files,
        )
    fallbacks = [s for s in facts.signatures if s.kind == "fallback"]
    summary = (
        f"weights loaded in {facts.weights_load_s} s, engine init {facts.init_engine_s} s"
        + (f", peak {measurements['peak_load_rss_mib']:.0f} MiB host RSS" if curve else "")
        + (f"; {len(fallbacks)} fallback message(s)" if fallbacks else "")
    )
    return CAPACITY_RESULT(
        "capacity.model_load",
        Status.WARN if fallbacks else Status.PASS,
        summary,
        measurements,
        critical=False,
        evidence=evidence_files,
    )
