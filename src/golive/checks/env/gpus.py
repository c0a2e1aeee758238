"""`environment.gpus`: the GPU class and count against the profile and the config, with MIG,
persistence, the NVLink fabric and IMEX (`evidence/fabric.py`)."""

from __future__ import annotations

import re

from golive.checks.env.chain_inputs import ChainInputs
from golive.evidence.fabric import fabric_findings
from golive.results import ENVIRONMENT_RESULT, CheckResult, Status


def is_gpu_class(name: str, wanted: str) -> bool:
    """Whether the GPU `name` (NVML's) is of the class `wanted`: its words in order, each a
    whole word of the name ("H200" is "NVIDIA H200 NVL"; "H20" is not an H200, "B200" not a
    GB200, "A10" not an A100-SXM4-80GB)."""
    have = re.findall(r"[a-z0-9]+", name.lower())
    want = re.findall(r"[a-z0-9]+", wanted.lower())
    return bool(want) and any(
        have[i : i + len(want)] == want for i in range(len(have) - len(want) + 1)
    )


def check_gpus(inputs: ChainInputs) -> CheckResult:
    """GPU class and count against the profile (at least its `min_gpus`) and what the config
    or profile declares (`gpu_class`, exactly `gpus`); MIG, persistence, the NVLink fabric and
    IMEX (`fabric.py`)."""
    want = inputs.profile.chain.min_gpus
    declared = inputs.gpu_class is not None or inputs.gpu_total is not None
    critical = want is not None or declared or bool(inputs.hosts)
    if not inputs.hosts:
        return ENVIRONMENT_RESULT(
            "environment.gpus",
            Status.NO_DATA,
            "no host evidence, so GPU count and class are unknown"
            + (f" (the profile needs at least {want})" if want else "")
            + (" (declared: give --host-info from each node)" if declared else ""),
            critical=critical,
        )
    where = [path for _, path in inputs.hosts]
    gpus = [(host.node, gpu) for host, _ in inputs.hosts for gpu in host.gpus]
    names = sorted({gpu.name for _, gpu in gpus})
    measurements: dict[str, float | int | str | bool | None] = {
        "gpu_count": len(gpus),
        "nodes": len(inputs.hosts),
        "gpu_classes": ", ".join(names),
    }
    failures: list[str] = []
    warnings: list[str] = []
    if want is not None and len(gpus) < want:
        failures.append(f"{len(gpus)} GPU(s) visible, the profile needs at least {want}")
    if len(names) > 1:
        failures.append(f"mixed GPU classes: {', '.join(names)}")
    if inputs.gpu_total is not None and len(gpus) != inputs.gpu_total:
        failures.append(f"{len(gpus)} GPU(s) visible, {inputs.gpu_total} declared")
    wanted = inputs.gpu_class
    others = [n for n in names if wanted is not None and not is_gpu_class(n, wanted)]
    if others:
        failures.append(f"GPU class {', '.join(others)} is not the declared {wanted}")
    fabric = fabric_findings([host for host, _ in inputs.hosts])
    failures += fabric.failures
    warnings += fabric.warnings
    if fabric.domains:
        measurements["nvlink_domains"] = len(set(fabric.domains.values()))
    for node, gpu in gpus:
        if gpu.mig_mode == "Enabled":
            warnings.append(f"{node} GPU {gpu.index}: MIG enabled")
        if gpu.persistence_mode == "Disabled":
            warnings.append(f"{node} GPU {gpu.index}: persistence mode off")
    if failures:
        return ENVIRONMENT_RESULT(
            "environment.gpus", Status.FAIL, "; ".join(failures), measurements, evidence=where
        )
    summary = f"{len(gpus)} x {', '.join(names) or 'no GPU'} on {len(inputs.hosts)} node(s)"
    if warnings:
        return ENVIRONMENT_RESULT(
            "environment.gpus",
            Status.WARN,
            f"{summary}; {'; '.join(warnings)}",
            measurements,
            critical=critical,
            evidence=where,
        )
    return ENVIRONMENT_RESULT(
        "environment.gpus", Status.PASS, summary, measurements, critical=critical, evidence=where
    )
