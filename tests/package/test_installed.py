"""The installed wheel, in a fresh venv, is the golive a user runs: `golive --version`
answers, the stdlib probe runs from the package, and a smoke section against a fake
OpenAI-compatible server on loopback completes and writes a sealed verdict."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.secret_search import encodings, file_bytes
from tests.package.conftest import Installed, clean_env, run

KEY_VARIABLE = "GOLIVE_PACKAGE_TEST_KEY"
KEY = "sk-package-test-8d1f0c"  # a test key only the fake server sees


def test_golive_version_answers_from_the_venv(installed: Installed, tmp_path: Path) -> None:
    """`golive --version` in the fresh venv prints the wheel's version, and `import golive`
    there loads the installed copy, not this checkout's source."""
    wheel_version = installed.wheel.name.split("-")[1]
    assert run([str(installed.golive), "--version"], tmp_path, 60).strip() == (
        f"golive {wheel_version}"
    )
    where = run(
        [str(installed.python), "-c", "import golive; print(golive.__file__)"], tmp_path, 60
    )
    assert Path(where.strip()).is_relative_to(installed.venv)
    print(f"package tier seconds: {installed.seconds}")


def test_the_container_probe_runs_from_the_installed_package(
    installed: Installed, tmp_path: Path
) -> None:
    """`golive env collect --container --python PY` finds the stdlib probe inside the
    installed package and writes the facts it gathered."""
    out = tmp_path / "ctr.json"
    argv = [str(installed.golive), "env", "collect", "--container"]
    run([*argv, "--python", str(installed.python), "-o", str(out)], tmp_path, 120)
    facts = json.loads(out.read_text())
    assert facts["kind"] == "container"
    assert Path(facts["python"].split()[0]).is_relative_to(installed.venv)


async def test_a_smoke_run_from_the_wheel_writes_a_sealed_verdict(
    installed: Installed, tmp_path: Path
) -> None:
    """`golive smoke` from the installed wheel, against a fake vLLM on 127.0.0.1, with the
    API key read from the variable the config names: it exits 0 (section-passed), the server
    saw the key, the bundle verifies with the installed golive and holds no copy of the key."""
    config = tmp_path / "golive.yaml"
    config.write_text(
        f"target: {{api_key_env: {KEY_VARIABLE}}}\n"
        "smoke: {classes: false}\n"
        "programme:\n  not_used:\n"
        "    - {part: smoke.classes, owner: packaging, reason: 'one text request only'}\n"
    )
    out = tmp_path / "bundle"
    state = FakeState()
    async with fake_vllm(state) as url:
        smoke = await asyncio.create_subprocess_exec(
            str(installed.golive),
            *("smoke", "--target", url, "--config", str(config), "--out", str(out)),
            cwd=tmp_path,
            env=clean_env(**{KEY_VARIABLE: KEY}),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        said, _ = await asyncio.wait_for(smoke.communicate(), 180)
    assert smoke.returncode == 0, said.decode()
    verdict = json.loads((out / "verdict.json").read_text())
    assert verdict["outcome"] == "section-passed"
    assert verdict["scope"] == ["smoke"]
    assert (out / "report.html").is_file()
    assert state.seen_auth
    assert set(state.seen_auth) == {f"Bearer {KEY}"}
    run([str(installed.golive), "verify", str(out)], tmp_path, 60)
    forms = encodings(KEY)
    leaks = [
        f"{p.relative_to(out)} ({name})"
        for p in out.rglob("*")
        if p.is_file()
        for name, form in forms.items()
        if form in file_bytes(p)
    ]
    assert leaks == []
