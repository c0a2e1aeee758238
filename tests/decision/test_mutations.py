"""Issue 27 §6: the mutation suite. A programme bundle judged from the real CPU vLLM's recorded
demo, and a whole bundle sealed by `golive run` against vLLM 0.24 on an H200 (its GPU-only
kinds of file: the GPU inventory and memory curve, the host facts, the server log, the probe
after the load, the sustained window's scrapes, the health answers); every file in it is deleted, emptied, cut in half and given the wrong type (JSON of
another shape, or bytes that are not UTF-8), and the whole bundle gets the edits a reviewer
would make to look better (every answer HTTP 500, another model's id, another vLLM version,
frozen counters) — each followed by a re-seal, so `golive verify` passes. `golive decide`
must then disagree (naming what it found) for every mutation, and may agree only where the
file cannot change what the checklist decides: each such file is listed below with why. No
mutation may re-derive a better outcome, and none may end in a traceback.

The matrix (tried, caught, agreed and why) is in docs/reliability.md."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import shutil
import tarfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import zstandard

from golive.bundle.layout import MANIFEST, VERDICT
from golive.bundle.store import Bundle
from golive.errors import ConfigError
from golive.orchestration.rederive import rederive
from tests.helpers.sections import pinned_image, programme_bundle

pytestmark = pytest.mark.tampers_bundle

# Files whose damage cannot change the decision, and why; `None`: any mutation of it.
HARMLESS: dict[str, tuple[frozenset[str] | None, str]] = {
    "report.md": (None, "written for people from verdict.json; decide reads the evidence"),
    "report.html": (None, "written for people from verdict.json; decide reads the evidence"),
    "signoff.md": (None, "the sign-off sheet for people; signoff re-derives before signing"),
    "signoff.json": (
        None,
        "the sign-off record, read by `golive signoff` (which names a damaged one), not by decide",
    ),
    "metrics/reference.json": (
        None,
        "what each relied-on metric means (HELP texts) for a reader; no judge reads it",
    ),
    "metrics/capacity-calibration.json": (
        None,
        "the calibration window's rate, which sized each window's request cap; every judged "
        "window is held to its own records",
    ),
    "metrics/capacity-calibrate-before.prom": (None, "the calibration window is not judged"),
    "metrics/capacity-calibrate-after.prom": (None, "the calibration window is not judged"),
    "metrics/capacity-workload.json": (
        None,
        "the seed the load's prompts were drawn with; the records hold the prompts sent",
    ),
    "metrics/capacity-phases.json": (
        None,
        "phase spans for merging GPU curves from other nodes; this bundle has none",
    ),
    "metrics/smoke-delta.json": (
        None,
        "a summary of the smoke scrapes; smoke.metrics is judged from the two scrapes",
    ),
    "metrics/answer-probes.json": (
        frozenset({"delete", "wrong-type"}),
        "where the probes went; the probes sent under load are judged whatever it says",
    ),
    "environment/chain.json": (
        None,
        "the chain as judged, for people; decide judges it again from chain-inputs.json and "
        "the saved /version, /v1/models, startup log and container records, and the rollback "
        "registry takes the image from chain-inputs.json and the container record",
    ),
    "environment/server-log-errors.json": (
        None,
        "the server log's errors as attributed to checks; decide reads them again from "
        "environment/server.log",
    ),
    "metrics/identity.prom": (
        None,
        "the engine's process start time at the start, which every other scrape of the bundle "
        "also carries (a restart between them is named)",
    ),
    "requests/capacity-health.jsonl": (
        frozenset({"empty", "wrong-type"}),
        "the /health answers the load asked: they stand behind a recorded death, and this run "
        "recorded none (deleting the file is named)",
    ),
    "config/profile.yaml": (
        frozenset({"delete"}),
        "verdict.json names a bundled profile, which is judged from golive's own copy",
    ),
    "requests/agent-failures.jsonl": (
        frozenset({"empty", "wrong-type", "truncate"}),
        "examples of the failures, written from the judged cases; the cases are judged from "
        "their own streams, and the ledger counts no record in it (one moved there is missing)",
    ),
    "requests/identity.jsonl": (
        frozenset({"empty", "wrong-type"}),
        "the deployment's identity is read from every family's own /version and /v1/models "
        "records too",
    ),
}


@dataclass(frozen=True, slots=True)
class Tried:
    file: str
    mutation: str
    agrees: bool
    better: bool
    problem: str
    bundle: str = "cpu"  # the CPU programme bundle, or the H200 one


def _read(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".zst"):
        data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def _write(path: Path, data: bytes) -> None:
    if path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)


def _wrong_type(rel: str) -> bytes:
    if rel.endswith(".json"):
        return b"[]"
    if ".jsonl" in rel:
        return b'[1, 2]\n"text"\n'
    return b"\xff\xfe\x00 not text \xc3\x28\n"


FILE_MUTATIONS: dict[str, Callable[[Path, str], None]] = {
    "delete": lambda path, rel: path.unlink(),
    "empty": lambda path, rel: _write(path, b""),
    "truncate": lambda path, rel: _write(path, _read(path)[: len(_read(path)) // 2]),
    "wrong-type": lambda path, rel: _write(path, _wrong_type(rel)),
}


def _every(root: Path, pattern: str, edit: Callable[[bytes], bytes]) -> None:
    for path in root.glob(pattern):
        if path.is_file():
            _write(path, edit(_read(path)))


def _freeze(root: Path) -> None:
    """Every window's after-scrape replaced by its before-scrape (an exporter that stopped)."""
    for before in root.glob("metrics/*-before.prom"):
        after = before.with_name(before.name.replace("-before", "-after"))
        if after.is_file():
            shutil.copyfile(before, after)


def _versions(root: Path) -> None:
    """The bundle's own vLLM version replaced wherever it is written."""
    was = str(json.loads((root / VERDICT).read_text())["identity"]["vllm_version"]).encode()
    for pattern in ("requests/*.jsonl*", "environment/*", "metrics/*.prom"):
        _every(root, pattern, lambda data: data.replace(was, b"0.9.99"))


BUNDLE_MUTATIONS: dict[str, Callable[[Path], None]] = {
    "every answer HTTP 500": lambda root: _every(
        root,
        "requests/*.jsonl*",
        lambda data: re.sub(rb'"http_status": ?200\b', b'"http_status": 500', data),
    ),
    "another model's id in every answer": lambda root: _every(
        root,
        "requests/*.jsonl*",
        lambda data: re.sub(rb'("model": ?)"[^"]+"', rb'\1"other-model"', data),
    ),
    "another vLLM version everywhere": _versions,
    "every counter frozen": _freeze,
}


def _judge(base: Path, scratch: Path, name: str, rel: str | None, severity: int) -> Tried:
    """One mutation on a copy of `base`, re-sealed, then `golive decide`'s judgement."""
    root = scratch / re.sub(r"[^a-z0-9]+", "-", f"{rel or 'bundle'}-{name}".lower())
    shutil.copytree(base, root)
    if rel is None:
        BUNDLE_MUTATIONS[name](root)
    else:
        FILE_MUTATIONS[name](root / rel, rel)
    Bundle(root).seal()
    again = rederive(root)
    shutil.rmtree(root)
    return Tried(
        rel or "(every file)",
        name,
        again.agrees,
        again.decision.outcome.severity < severity,
        (again.problems or ("",))[0][:160],
    )


GPU_BUNDLE = Path(__file__).parents[1] / "data/vllm-gpu-0.24-h200x1-bundle/bundle.tgz"
# What the GPU bundle holds that the CPU one has no file of its kind for (its other files are
# the CPU bundle's kinds, mutated there): each re-derivation of the GPU bundle takes ~3 s
GPU_FILES = (
    "environment/host-vm.json",
    "environment/server.log",
    "environment/server-log-errors.json",
    "memory/gpus.json",
    "memory/capacity.csv",
    "metrics/identity.prom",
    "metrics/cache-after-load-before.prom",
    "metrics/cache-after-load-after.prom",
    "metrics/capacity-sustained-c16-before.prom",
    "metrics/capacity-sustained-c16-after.prom",
    "metrics/capacity-steps.jsonl",
    "requests/capacity-health.jsonl",
)


def _tried(base: Path, scratch: Path, files: Sequence[str]) -> list[Tried]:
    """Every mutation of `files` and of the whole bundle, a worker process per core."""
    first = rederive(base)
    assert first.agrees, first.problems
    jobs: list[tuple[str, str | None]] = [(n, rel) for rel in files for n in FILE_MUTATIONS]
    jobs += [(name, None) for name in BUNDLE_MUTATIONS]
    severity = first.decision.outcome.severity
    with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        futures = [pool.submit(_judge, base, scratch, n, rel, severity) for n, rel in jobs]
        return [f.result() for f in futures]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> list[Tried]:
    """Every file of the CPU programme bundle, and the GPU bundle's own kinds of file."""
    base = tmp_path_factory.mktemp("programme") / "b"
    asyncio.run(programme_bundle(base, pinned_image))
    files = sorted(
        p.relative_to(base).as_posix()
        for p in base.rglob("*")
        if p.is_file() and p.name not in (MANIFEST, VERDICT)
    )
    cpu = _tried(base, tmp_path_factory.mktemp("mutations"), files)
    gpu_root = tmp_path_factory.mktemp("gpu")
    with tarfile.open(GPU_BUNDLE) as packed:
        packed.extractall(gpu_root, filter="data")
    gpu = _tried(gpu_root / "b", tmp_path_factory.mktemp("gpu-mutations"), GPU_FILES)
    return cpu + [dataclasses.replace(t, bundle="gpu") for t in gpu]


def test_no_mutation_reaches_a_better_outcome(matrix: list[Tried]) -> None:
    """Whatever was deleted, damaged or edited, decide never re-derives a better outcome."""
    assert len(matrix) > 300
    assert {t.bundle for t in matrix} == {"cpu", "gpu"}
    better = [(t.bundle, t.file, t.mutation) for t in matrix if t.better]
    assert better == []


def test_decide_disagrees_unless_the_file_cannot_change_the_decision(matrix: list[Tried]) -> None:
    """Every mutation is caught, except those of files listed as harmless (with why)."""
    silent = []
    for tried in matrix:
        allowed, _ = HARMLESS.get(tried.file, (frozenset(), ""))
        if tried.agrees and not (allowed is None or tried.mutation in allowed):
            silent.append((tried.bundle, tried.file, tried.mutation))
    assert silent == []


def test_the_reviewers_own_edits_are_each_named(matrix: list[Tried]) -> None:
    """The edits a reviewer makes to look better are caught, each with a named problem."""
    edits = [t for t in matrix if t.file == "(every file)"]
    assert {t.mutation for t in edits} == set(BUNDLE_MUTATIONS)
    assert all(not t.agrees and t.problem for t in edits), edits


def test_the_harmless_list_is_no_wider_than_what_agrees(matrix: list[Tried]) -> None:
    """A file listed as harmless must still be in the bundle and agree for a listed mutation:
    a list kept after golive began to judge the file would hide a regression."""
    agreed = {(t.file, t.mutation) for t in matrix if t.agrees}
    for file, (allowed, why) in HARMLESS.items():
        assert why
        tried = {m for f, m in agreed if f == file}
        assert tried, f"{file} is listed as harmless but no mutation of it agreed"
        if allowed is not None:
            assert tried <= allowed, (file, tried)


def test_an_unreadable_verdict_is_named(tmp_path: Path) -> None:
    """verdict.json itself damaged: nothing to compare with, so decide names the file (the
    CLI says "config error" and exits 2), never a traceback."""
    root = tmp_path / "b"
    asyncio.run(programme_bundle(root, pinned_image))
    (root / VERDICT).write_bytes(b"[]")
    Bundle(root).seal()
    with pytest.raises(ConfigError, match=r"verdict\.json: not a golive verdict"):
        rederive(root)
