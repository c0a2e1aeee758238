"""The sign-off sheet of a bundle and the reviewer's signature over it: `signoff.json/.md`
written from the verdict and the profile the bundle keeps, and `golive signoff` recording a
signature on an intact bundle that re-derives, then re-sealing and registering it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from golive.bundle.layout import MANIFEST, PROFILE, REPORT_HTML, SIGNOFF_JSON, SIGNOFF_MD
from golive.bundle.signing import SIGNATURE, load_private_key
from golive.bundle.store import Bundle, BundleReader, require_trusted, verify
from golive.errors import ConfigError
from golive.operate.rollback import (
    ACCEPTED,
    Signature,
    programme_scope,
    register,
    registry_dir,
    require_artifact,
)
from golive.orchestration.rederive import require_rederived
from golive.orchestration.signoff import (
    build_signoff,
    bundle_files,
    read_signoff,
    render_signoff,
    unowned,
)
from golive.profiles import ChainExpectation, load_profile, parse_profile
from golive.report.html import render_html
from golive.results import Outcome
from golive.verdict.document import ExercisedEnvelope, VerdictDocument, timestamp


def write_signoff(bundle: Bundle, document: VerdictDocument, signature: Signature | None) -> None:
    """signoff.json/.md from what the bundle holds, then report.html (which shows them)."""
    bundle.close()
    record = build_signoff(document, bundle_files(bundle.root), signature, _chain(bundle, document))
    bundle.write_json(SIGNOFF_JSON, record)
    bundle.write_text(SIGNOFF_MD, render_signoff(record))
    bundle.write_text(REPORT_HTML, render_html(bundle.root, document))


def _chain(bundle: Bundle, document: VerdictDocument) -> ChainExpectation | None:
    """The profile's expectations as the bundle keeps them (a combined bundle: by name);
    None where they cannot be read, so that no profile requirement is taken as made."""
    text = BundleReader(bundle.root).text(PROFILE)
    try:
        if text is not None:
            return parse_profile(text, str(bundle.root / PROFILE)).chain
        return load_profile(document.profile).chain
    except ConfigError:
        return None


def sign_bundle(
    root: Path,
    reviewer: str,
    outcome: Outcome,
    override_reason: str | None,
    registry: Path | None = None,
    sign_key: Path | None = None,
    trusted: Sequence[Path] = (),
) -> Signed:
    """Record the reviewer's signature over an intact bundle and re-seal it; an accepted
    outcome registers the bundle as a rollback artifact (`operate/rollback.py`). With
    `trusted` public keys, the bundle must have been sealed by one of them."""
    key = None if sign_key is None else load_private_key(sign_key)
    if trusted:
        require_trusted(root, trusted)
    report = verify(root)
    if not report.ok:
        raise ConfigError(
            f"{root} does not match its manifest (altered {list(report.altered)}, missing "
            f"{list(report.missing)}, added {list(report.extra)}): refusing to sign it"
        )
    document = VerdictDocument.read(root)
    previous = read_signoff(root).get("signature")
    if previous:
        raise ConfigError(
            f"{root} is already signed by {previous['reviewer']} ({previous['outcome']}); a "
            "signature is never replaced: run golive again for a new bundle"
        )
    verdict_outcome = document.outcome
    if not reviewer.strip():
        raise ConfigError("--reviewer must name a person")
    check_signable(document, outcome, override_reason, root)
    taken: tuple[str, ...] = ()
    if outcome.value in ACCEPTED:
        again = require_rederived(root, f"signing {outcome.value}", override_reason)
        # before anything is written: an accepted deployment must be one a rollback can reach
        require_artifact(root, f"signing {outcome.value}")
        taken = again.as_sealed
        # the sheet states the envelope the evidence gives, not verdict.json's word: a
        # `tested` deleted from it (older bundles never had one) cannot hide it
        document = document.model_copy(update={"tested": ExercisedEnvelope.of(again.checks)})
    manifest = (root / MANIFEST).read_bytes()
    signature = Signature(
        reviewer=reviewer.strip(),
        signed_at=timestamp(),
        outcome=outcome,
        verdict_outcome=verdict_outcome,
        bundle_digest="sha256:" + hashlib.sha256(manifest).hexdigest(),
        override_reason=(override_reason or "").strip() or None,
        taken_as_sealed=taken,  # accepted on the bundle's word, by the override
    )
    registry_path = registry_dir(registry)
    if outcome.value in ACCEPTED:
        writable_registry(registry_path)  # before the bundle is touched: signing is atomic
    kept = {rel: _bytes(root / rel) for rel in SIGNED_FILES}
    try:
        bundle = Bundle(root)
        write_signoff(bundle, document, signature)
        bundle.seal(key)
        registered = register(root, signature, registry_path, require_rederived)
    except BaseException:
        for rel, content in kept.items():  # the bundle as it was: a retry may sign it
            (root / f".{rel}.tmp").unlink(missing_ok=True)
            if content is None:
                (root / rel).unlink(missing_ok=True)
            else:
                (root / rel).write_bytes(content)
        raise
    return Signed(signature, registered)


@dataclass(frozen=True, slots=True)
class Signed:
    """A signature recorded, and where the registry keeps the bundle (None: not an accepted
    outcome, so not a rollback artifact)."""

    signature: Signature
    registered: Path | None


# what signing writes: restored as they were when signing cannot finish
SIGNED_FILES = (SIGNOFF_JSON, SIGNOFF_MD, REPORT_HTML, MANIFEST, SIGNATURE)


def _bytes(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def writable_registry(registry: Path) -> None:
    """The rollback registry can take an entry, or a named error before anything is signed."""
    probe = registry / f".golive-write-check-{os.getpid()}"
    try:
        registry.mkdir(parents=True, exist_ok=True)
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"cannot write to the registry {registry} ({exc.strerror or exc}): nothing was "
            "signed; give a writable --registry (or GOLIVE_REGISTRY)"
        ) from exc


def check_signable(
    document: VerdictDocument, outcome: Outcome, override_reason: str | None, root: Path
) -> None:
    """What a signature may claim: an accepted outcome only over the whole programme with
    every open item owned; an outcome better than the verdict's only with a reason."""
    verdict_outcome = document.outcome
    if outcome is Outcome.SECTION_PASSED:
        raise ConfigError("section-passed is not a decision to sign: sign a programme bundle")
    if outcome.value in ACCEPTED:
        programme_scope(document, root, f"signing {outcome.value}")
        open_items = unowned(document.actions)
        if open_items:
            raise ConfigError(
                f"signing {outcome.value} needs an owner, deadline and rollback action for "
                f"every limit, warning and gap; unassigned: {', '.join(open_items)} (set "
                "signoff.actions in the config and run again)"
            )
    if outcome.severity < verdict_outcome.severity and not (
        override_reason and override_reason.strip()
    ):
        raise ConfigError(
            f"the verdict is {verdict_outcome.value}: signing the better outcome "
            f"{outcome.value} over it needs --override-reason TEXT, recorded with the signature"
        )
