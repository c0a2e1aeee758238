"""The evidence bundle: written as evidence is produced, sealed with a sha256 manifest.

Every write goes to disk at once (append + flush), so a run that is killed leaves a readable
partial bundle. `seal` writes `manifest-sha256.txt` (BagIt style: `<sha256>  <path>`) over
every other file; `verify` names each altered, missing or extra file. Known secret values
are scrubbed from everything written, as a last line of defence behind never storing them.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import traceback
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import zstandard
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from golive.bundle.layout import GOLIVE_TRACEBACK, MANIFEST, PARTS
from golive.bundle.request_line import NOT_RECORDS, RequestRecordLine, decode_line
from golive.bundle.signing import (
    SIGNATURE,
    SignatureCheck,
    check_signature,
    load_public_key,
    sign_manifest,
)
from golive.errors import BundleError, ConfigError, RecordLineError

SUBDIRS = ("config", "environment", "requests", "metrics", "memory")
REDACTED = "***REDACTED***"
ZSTD = ".zst"  # a compressed record stream: `zstd -dc FILE` or golive.bundle.store.read_lines
ZSTD_LEVEL = 9


def jsonl_text(obj: Any) -> str:
    """One JSON line as every record stream in a bundle holds it."""
    return json.dumps(obj, ensure_ascii=False, default=str) + "\n"


class Bundle:
    """A bundle directory being written. Paths given to methods are relative to it."""

    def __init__(self, root: Path, secrets: Iterable[str] = ()) -> None:
        self.root = root
        self._secrets = tuple(s for s in secrets if s)
        self._open: dict[str, IO[str]] = {}

    @classmethod
    def create(cls, root: Path, secrets: Iterable[str] = ()) -> Bundle:
        """Create a new bundle; refuse a directory that already holds files."""
        try:
            if root.exists() and any(root.iterdir()):
                raise BundleError(
                    f"{root} already exists and is not empty; give --out a new directory "
                    "so no earlier evidence is overwritten"
                )
            for sub in SUBDIRS:
                (root / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BundleError(f"cannot create bundle directory {root}: {exc}") from exc
        return cls(root, secrets)

    def path(self, rel: str) -> Path:
        return self.root / rel

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return text

    def append_jsonl(self, rel: str, obj: Any) -> None:
        """Append one JSON line and flush it to the OS at once."""
        self.append_text(rel, jsonl_text(obj))

    def keep_traceback(self, where: str, exc: BaseException) -> None:
        """golive's own crash (in `where`: a section, or golive itself), its traceback
        appended to `GOLIVE_TRACEBACK` for the bug report; the command exits 3 once sealed
        (`cli.console.exit_code`)."""
        text = "".join(traceback.format_exception(exc))
        try:
            self.append_text(GOLIVE_TRACEBACK, f"--- {where}\n{text}\n")
        except OSError:  # a full disk must not stop the seal that follows; stderr has it
            traceback.print_exception(exc)

    def append_text(self, rel: str, text: str) -> None:
        """Append text (one or more whole lines) and flush it to the OS at once."""
        handle = self._open.get(rel)
        try:
            if handle is None:
                self.path(rel).parent.mkdir(parents=True, exist_ok=True)
                handle = self.path(rel).open("a", encoding="utf-8")
                self._open[rel] = handle
            handle.write(self.scrub(text))
            handle.flush()
        except OSError as exc:
            raise BundleError(f"cannot append to {self.path(rel)}: {exc}") from exc

    def write_json(self, rel: str, obj: Any) -> Path:
        text = json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n"
        return self.write_text(rel, text)

    def write_text(self, rel: str, text: str) -> Path:
        """Write a whole file atomically (temp file + rename), scrubbed of secrets."""
        target = self.path(rel)
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(self.scrub(text), encoding="utf-8")
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)  # a half-written temp file is not the bundle's
            raise BundleError(f"cannot write {target}: {exc}") from exc
        return target

    def compress(self, rel: str) -> str:
        """Move the finished stream `rel` into `rel.zst` (appended as a new frame if one is
        already there) and return the path that now holds it. Written and flushed before the
        plain file is removed, so a failure leaves the records in one of the two."""
        handle = self._open.pop(rel, None)
        if handle is not None:
            handle.close()
        plain, packed = self.path(rel), self.path(rel + ZSTD)
        if not plain.exists():
            return rel + ZSTD if packed.exists() else rel
        try:
            frame = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(plain.read_bytes())
            with packed.open("ab") as out:
                out.write(frame)
                out.flush()
                os.fsync(out.fileno())
            plain.unlink()
        except OSError as exc:
            raise BundleError(f"cannot compress {plain} into {packed}: {exc}") from exc
        return rel + ZSTD

    def close(self) -> None:
        for handle in self._open.values():
            handle.close()
        self._open.clear()

    def seal(self, key: Ed25519PrivateKey | None = None) -> Path:
        """Close open files and write the manifest over every other file; with `key`, sign
        it. A signature left from an earlier seal no longer matches and is removed."""
        self.close()
        lines = [f"{digest}  {rel}" for rel, digest in sorted(_hash_tree(self.root).items())]
        manifest = self.write_text(MANIFEST, "\n".join(lines) + "\n")
        if key is not None:
            sign_manifest(self.root, manifest.read_bytes(), key)
        else:
            self.path(SIGNATURE).unlink(missing_ok=True)
        return manifest


@dataclass(frozen=True, slots=True)
class VerifyReport:
    altered: tuple[str, ...]
    missing: tuple[str, ...]
    extra: tuple[str, ...]
    signature: SignatureCheck | None = None
    key_given: bool = False

    @property
    def ok(self) -> bool:
        files_ok = not (self.altered or self.missing or self.extra)
        signed_ok = not self.key_given or (self.signature is not None and self.signature.valid)
        return files_ok and signed_ok


def verify(root: Path, key: Ed25519PublicKey | None = None) -> VerifyReport:
    """Compare a bundle with its manifest, and with `key` check the manifest's signature.
    `BundleError` when there is no readable manifest."""
    manifest = root / MANIFEST
    try:
        raw = manifest.read_bytes()
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BundleError(
            f"{manifest} cannot be read ({exc}); the bundle was never sealed"
        ) from exc
    expected: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        digest, sep, rel = line.partition("  ")
        if not sep or len(digest) != 64:
            raise BundleError(f"{manifest}:{number} is not '<sha256>  <path>': {line!r}")
        expected[rel] = digest
    actual = _hash_tree(root)
    signed = (root / SIGNATURE).exists()
    return VerifyReport(
        altered=tuple(sorted(r for r in expected if r in actual and actual[r] != expected[r])),
        missing=tuple(sorted(r for r in expected if r not in actual)),
        extra=tuple(sorted(r for r in actual if r not in expected)),
        signature=check_signature(root, raw, key) if key is not None or signed else None,
        key_given=key is not None,
    )


def _hash_tree(root: Path) -> dict[str, str]:
    digests: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() and not path.is_symlink():
            continue
        rel = path.relative_to(root).as_posix()
        if rel in (MANIFEST, SIGNATURE):
            continue
        if path.is_symlink():
            digests[rel] = hashlib.sha256(f"symlink:{os.readlink(path)}".encode()).hexdigest()
            continue
        sha = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                sha.update(block)
        digests[rel] = sha.hexdigest()
    return digests


def locate(root: Path, rel: str) -> Path:
    """`root/rel`, or in a combined bundle the first part that holds it."""
    direct = root / rel
    if direct.exists():
        return direct
    for part in sorted((root / PARTS).glob("*")):
        if (part / rel).exists():
            return part / rel
    return direct


def locate_all(root: Path, pattern: str) -> list[Path]:
    """Files matching `pattern` in the bundle and, in a combined bundle, in its parts."""
    return sorted([*root.glob(pattern), *root.glob(f"{PARTS}/*/{pattern}")])


def read_lines(path: Path) -> Iterator[str]:
    """The lines of a record stream, plain or zstd-compressed (every frame), as text."""
    try:
        if not path.name.endswith(ZSTD):
            with path.open(encoding="utf-8", errors="replace") as text:
                yield from text
            return
        with path.open("rb") as raw:
            reader = zstandard.ZstdDecompressor().stream_reader(
                raw, read_across_frames=True, closefd=False
            )
            with io.TextIOWrapper(reader, encoding="utf-8", errors="replace") as text:
                yield from text
    except (OSError, zstandard.ZstdError) as exc:
        raise BundleError(f"cannot read {path}: {exc}") from exc


def record_streams(root: Path, pattern: str = "*") -> list[Path]:
    """`requests/<pattern>.jsonl` files, plain or compressed."""
    folder = root / "requests"
    return sorted([*folder.glob(f"{pattern}.jsonl"), *folder.glob(f"{pattern}.jsonl{ZSTD}")])


def size_bytes(root: Path) -> int:
    """What the bundle's files weigh on disk, in bytes (verdict.json `bundle_bytes`)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


class BundleReader:
    """Read-only access to a bundle's evidence: what a family's `judge` reads, in a run and
    again in `golive decide` (no writes, no network). A file that is absent reads as None."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def text(self, rel: str) -> str | None:
        path = locate(self.root, rel)
        if not path.is_file():
            return None
        try:
            return path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise BundleError(f"cannot read {path}: {exc.strerror}") from exc

    def json(self, rel: str) -> Any:
        text = self.text(rel)
        if text is None:
            return None
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise BundleError(f"{self.root / rel}: not JSON ({exc})") from exc

    def jsonl(self, rel: str) -> list[dict[str, Any]]:
        """The rows of a JSON-lines file, plain or zstd-compressed; [] when it is absent."""
        path = self._lines_file(rel)
        if path is None:
            return []
        rows = []
        for number, line in enumerate(read_lines(path), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise BundleError(f"{path}:{number}: not a JSON line ({exc})") from exc
            if not isinstance(row, dict):
                raise BundleError(f"{path}:{number}: a JSON object was expected")
            rows.append(row)
        return rows

    def records(self, rel: str) -> list[RequestRecordLine]:
        """The request records of a stream (`requests/<name>.jsonl`, plain or compressed); []
        when it is absent. A line that is not a record is `RecordLineError`, naming the file, the
        line and the field: never read as defaults."""
        path = self._lines_file(rel)
        if path is None:
            return []
        where = _relative(path, self.root)
        return [
            decode_line(line, f"{where} line {number}")
            for number, line in enumerate(read_lines(path), start=1)
            if line.strip()
        ]

    def _lines_file(self, rel: str) -> Path | None:
        """A JSON-lines file as saved (plain, else compressed); None where it is absent."""
        for name in (rel, rel + ZSTD):
            path = locate(self.root, name)
            if path.is_file():
                return path
        return None


def stream_records(root: Path, path: Path) -> Iterator[RequestRecordLine]:
    """The records of one stream under `root` (from `record_streams`), for a judge that scans
    every stream: a line that is not a JSON object is left out (an unreadable line is the
    ledger's finding); an object that is not a record is `RecordLineError`, named. The examples of
    failures beside the streams (`NOT_RECORDS`) hold no records."""
    where = _relative(path, root)
    if where.removesuffix(ZSTD) in NOT_RECORDS:
        return
    for number, line in enumerate(read_lines(path), start=1):
        try:
            yield decode_line(line, f"{where} line {number}")
        except RecordLineError as exc:
            if exc.is_object:
                raise


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def require_trusted(root: Path, trusted: Sequence[Path]) -> None:
    """The bundle's manifest signature is valid under one of the `trusted` public keys."""
    problems = []
    for path in trusted:
        signature = verify(root, load_public_key(path)).signature
        if signature is not None and signature.valid:
            return
        problems.append(f"{path}: {signature.problem if signature else 'not checked'}")
    raise ConfigError(
        f"{root} is not sealed by a trusted key ({'; '.join(problems)}): sign-off accepts "
        "only bundles golive sealed with --sign-key under a key named by --trust-key or "
        "signoff.trusted_keys"
    )
