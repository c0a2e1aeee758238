"""The sign-off record: the checklist's 17 sign-off items and its nine-item evidence package,
each ticked only from evidence in the bundle (with the paths), and the reviewer's signature.

Pure: built from the verdict (`verdict.document`) and the list of files in the bundle.
`golive signoff` adds the signature and re-seals (I/O in orchestration/signature.py).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from golive.bundle.layout import (
    CACHE_STEPS,
    CONTAINER,
    EFFECTIVE_CONFIG,
    PARTS,
    SIGNOFF_JSON,
    STARTUP_LOG,
    VERDICT,
)
from golive.errors import ConfigError
from golive.evidence.image_ref import split_image
from golive.operate.rollback import Signature
from golive.profiles import ChainExpectation, load_profile
from golive.results import SkipReason
from golive.verdict.document import ActionEntry, CheckEntry, VerdictDocument, tested_sentence

TICKED, FAILED, MISSING, WATCHED = "ticked", "failed", "missing", "watched"
NOT_ASSERTED = "not-asserted"  # an item stating a requirement the profile does not make
UNASSIGNED = "unassigned"  # an open item whose owner the sign-off config does not name
_BAD = ("fail", "error")


@dataclass(frozen=True, slots=True)
class Item:
    text: str
    # check ids that must be present and pass; patterns (with *) match optional checks,
    # which must pass where present
    checks: tuple[str, ...] = ()
    files: tuple[str, ...] = ()  # bundle path patterns that must exist
    # An item stating a fixed requirement (CUDA 13, R580, the Kimi K3 image) is ticked only
    # where the profile makes that requirement, so that its checks held the deployment to it:
    # a generic profile's passing CUDA check is no confirmation of CUDA 13.
    asserted: Callable[[ChainExpectation], bool] | None = None
    requirement: str = ""  # what the profile must require, in words


def _kimi_k3_image(image: str | None) -> bool:
    """Whether `image` is the Kimi K3 image as the bundled kimi-k3 profile names it (name and
    tag, as environment.image compares them): another image, however pinned, is not."""
    wanted = load_profile("kimi-k3").chain.image
    return (
        image is not None
        and wanted is not None
        and split_image(image)[:2] == split_image(wanted)[:2]
    )


ITEMS: tuple[Item, ...] = (
    Item(
        "The Kimi K3 image tag and digest are recorded.",
        ("environment.image",),
        asserted=lambda chain: chain.image_digest_required and _kimi_k3_image(chain.image),
        requirement="Kimi K3 image with its digest",
    ),
    Item("The vLLM version and source channel are recorded.", ("environment.vllm_version",)),
    Item(
        "CUDA 13 is confirmed inside the container.",
        ("environment.container_cuda",),
        asserted=lambda chain: chain.cuda_major == 13,
        requirement="CUDA 13 build",
    ),
    Item(
        "Every host meets the R580-or-newer driver requirement.",
        ("environment.host_driver",),
        asserted=lambda chain: (chain.min_driver_major or 0) >= 580,
        requirement="R580-or-newer driver",
    ),
    Item(
        "Host, container, and startup logs agree on the runtime chain.",
        ("environment.driver_runtime", "startup.log"),
    ),
    Item(
        "GPU count, topology, parallel settings, and interconnect settings are recorded.",
        ("environment.gpus", "startup.parallel"),
    ),
    Item("Model-load memory behavior is stable.", ("capacity.model_load",)),
    Item(
        "Long-input tests have saved memory curves and request parameters.",
        ("capacity.long_input",),
        ("memory/*.csv", "requests/capacity*.jsonl*"),
    ),
    Item(
        "Concurrent Agent tests have documented queue and latency behavior.",
        ("capacity.concurrency",),
    ),
    Item("Sustained testing has no unexplained process termination.", ("capacity.sustained",)),
    Item("Cold prefix-cache results are saved.", ("cache.prefix_reuse",), ("metrics/cache-*",)),
    Item(
        "Warm prefix-cache results show cache metrics and controlled reuse.",
        ("cache.prefix_reuse", "cache.controls"),
    ),
    Item(
        "Tool schemas pass repeated validation.",
        (
            "agent.one_arg.required",
            "agent.one_arg.named",
            "agent.nested.*",
            "agent.structured",
            "agent.multi_turn",
            "agent.schema.*",
        ),
    ),
    Item(
        "Reasoning, content, and tool_calls fields match the client contract.",
        ("agent.no_call", "agent.tool_result", "agent.one_arg.auto"),
    ),
    Item(
        "Retry and failure behavior is documented.",
        ("agent.retry", "agent.incomplete_args", "agent.invalid_args"),
    ),
    Item("Every failed item has an owner, deadline, and rollback action."),
    Item("A reviewer has signed the final go-live outcome."),
)

EVIDENCE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Container image and digest", (CONTAINER,)),
    ("vLLM version and launch command", (STARTUP_LOG, CONTAINER)),
    ("Host driver output", ("environment/nvidia-smi-*.xml", "environment/host-*.json")),
    ("Container-visible CUDA and GPU information", (CONTAINER,)),
    ("Startup logs", (STARTUP_LOG,)),
    ("Memory curves before and after any OOM", ("memory/*.csv",)),
    ("Cold and warm prefix-cache results", (CACHE_STEPS,)),
    ("Agent tool-call test results", ("requests/agent.*.jsonl",)),
    ("Test sample, concurrency, context settings, and reviewer name", (EFFECTIVE_CONFIG,)),
)


def _matching(checks: Sequence[CheckEntry], patterns: Sequence[str]) -> list[CheckEntry]:
    return [c for c in checks if any(fnmatch.fnmatchcase(c.id, p) for p in patterns)]


def _files(files: Sequence[str], patterns: Sequence[str]) -> list[str]:
    """Files matching a pattern, in the bundle or (combined bundles) inside one of its parts."""
    return sorted(
        f
        for f in files
        if any(fnmatch.fnmatchcase(_in_part(f), p) or fnmatch.fnmatchcase(f, p) for p in patterns)
    )


def _in_part(path: str) -> str:
    """`parts/<name>/rest` -> `rest`; other paths unchanged."""
    head, _, rest = path.partition("/")
    return rest.partition("/")[2] if head == PARTS and rest.count("/") else path


def build_signoff(
    verdict: VerdictDocument,
    files: Sequence[str],
    signature: Signature | None = None,
    chain: ChainExpectation | None = None,
) -> dict[str, Any]:
    """signoff.json: every item with its state, the checks and files behind it. `chain`: the
    profile's expectations (None: unknown, so no profile requirement is taken as made)."""
    checks = verdict.checks
    actions = verdict.actions
    items = []
    for number, item in enumerate(ITEMS, start=1):
        if number == 16:
            state, why, paths = _actions_state(actions)
        elif number == 17:
            state = TICKED if signature else MISSING
            why = (
                f"signed by {signature.reviewer} at {signature.signed_at}"
                if signature
                else "not signed yet: golive signoff BUNDLE --reviewer NAME --outcome OUTCOME"
            )
            paths = [SIGNOFF_JSON] if signature else []
        elif item.asserted is not None and (chain is None or not item.asserted(chain)):
            state, paths = NOT_ASSERTED, []
            why = (
                f"not asserted by the {verdict.profile} profile (it requires no "
                f"{item.requirement}): its checks do not confirm this item"
            )
        else:
            state, why, paths = _item_state(item, checks, files)
        items.append(
            {"number": number, "item": item.text, "state": state, "why": why, "evidence": paths}
        )
    package = []
    for name, patterns in EVIDENCE:
        found = _files(files, patterns)
        note = ""
        if name.endswith("reviewer name") and not signature:
            note = "reviewer missing until the bundle is signed"
        package.append(
            {
                "item": name,
                "present": bool(found) and not note,
                "evidence": found,
                "note": note or ("" if found else "not in this bundle"),
            }
        )
    return {
        "outcome": verdict.outcome.value,
        "tested": None if verdict.tested is None else verdict.tested.model_dump(mode="json"),
        "tested_sentence": tested_sentence(verdict.tested),
        "items": items,
        "evidence_package": package,
        "signature": signature.to_json() if signature else None,
    }


def _passed(check: CheckEntry) -> bool:
    """pass, or skipped because the config says the class is not used."""
    if check.status == "pass":
        return True
    return check.status == "skipped" and check.result().skip_reason is SkipReason.NOT_USED


def _item_state(
    item: Item, checks: Sequence[CheckEntry], files: Sequence[str]
) -> tuple[str, str, list[str]]:
    """Ticked only when every check the item names is present and passed, and its files
    are saved: one measured check never ticks an item for the others."""
    found = _matching(checks, item.checks)
    paths = sorted({e for c in found for e in c.evidence})
    paths += [f for f in _files(files, item.files) if f not in paths]
    present = {c.id for c in found}
    absent = [p for p in item.checks if "*" not in p and p not in present]
    bad = [c.id for c in found if c.status in _BAD]
    if bad:
        return FAILED, f"failed: {', '.join(bad)}", paths
    unmeasured = [c.id for c in found if c.status in ("no_data", "skipped") and not _passed(c)]
    if absent or unmeasured or not found:
        gaps = [
            *(f"{a} (not in this bundle)" for a in absent),
            *(f"{u} (no data)" for u in unmeasured),
        ]
        return MISSING, "no evidence: " + ", ".join(gaps or list(item.checks)), paths
    warned = [c.id for c in found if c.status == "warn"]
    if warned:
        return WATCHED, f"passed with warnings, watched with an owner: {', '.join(warned)}", paths
    files_absent = [p for p in item.files if not _files(files, (p,))]
    if files_absent:
        return MISSING, f"the saved files are missing ({', '.join(files_absent)})", paths
    return TICKED, "passed: " + ", ".join(c.id for c in found), paths


def unowned(actions: Sequence[ActionEntry]) -> list[str]:
    """The open items (verdict.json `actions`) without an owner, deadline or rollback."""
    return [a.check for a in actions if UNASSIGNED in (a.owner, a.deadline, a.rollback)]


def _actions_state(actions: Sequence[ActionEntry]) -> tuple[str, str, list[str]]:
    open_items = unowned(actions)
    if not actions:
        return TICKED, "no failed item", [VERDICT]
    if open_items:
        return FAILED, f"no owner/deadline/rollback for: {', '.join(open_items)}", [VERDICT]
    return (
        TICKED,
        f"{len(actions)} failed item(s), each with owner, deadline, rollback",
        [VERDICT],
    )


def render_signoff(record: Mapping[str, Any]) -> str:
    """signoff.md: the checklist as a reviewer reads it."""
    mark = {
        TICKED: "[x]",
        FAILED: "[ ] FAILED",
        MISSING: "[ ] missing",
        WATCHED: "[ ] WATCHED",
        NOT_ASSERTED: "[ ] not asserted",
    }
    lines = [f"# Go-live sign-off — verdict **{record['outcome']}**", ""]
    if record.get("tested_sentence"):
        lines += [str(record["tested_sentence"]), ""]
    lines += ["## Checklist", ""]
    for item in record["items"]:
        evidence = ", ".join(f"`{p}`" for p in item["evidence"][:6])
        lines.append(
            f"- {mark[item['state']]} {item['number']}. {item['item']} — {item['why']}"
            + (f" ({evidence})" if evidence else "")
        )
    lines += ["", "## Evidence package", ""]
    for entry in record["evidence_package"]:
        state = "present" if entry["present"] else f"MISSING ({entry['note']})"
        paths = ", ".join(f"`{p}`" for p in entry["evidence"][:6])
        lines.append(f"- {entry['item']}: {state}" + (f" — {paths}" if paths else ""))
    lines += ["", "## Reviewer", ""]
    signature = record.get("signature")
    if signature:
        lines.append(
            f"Signed **{signature['outcome']}** by {signature['reviewer']} at "
            f"{signature['signed_at']} over bundle {signature['bundle_digest']}"
        )
        if signature.get("override"):
            lines.append(
                f"\n**Accepted with override** of the verdict ({signature['verdict_outcome']}): "
                f"{signature['override_reason']}. The rollback registry keeps it, but never as "
                "the default rollback target."
            )
        elif signature.get("override_reason"):
            lines.append(f"\nReviewer's note: {signature['override_reason']}")
    else:
        lines.append("Not signed. Reviewer: ____________________  Outcome: __________")
    return "\n".join(lines) + "\n"


def bundle_files(root: Any) -> list[str]:
    """Relative paths of the files in a bundle directory (for ticking items)."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )


def read_signoff(root: Path) -> dict[str, Any]:
    """signoff.json, or a ConfigError naming it: every bundle golive seals has one."""
    path = root / SIGNOFF_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot be read ({exc.strerror}); every bundle golive seals has one, so "
            "this is not a complete golive bundle: run golive again"
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc}); run golive again") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a sign-off record (a JSON object); run golive again")
    return data
