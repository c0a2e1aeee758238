"""Issue 29 §6/§7: the container probe records the serving process's own runtime variables
(from /proc, not the probe's environment), its command line, the GPUs torch sees and the
container runtime. Run under this Python against a stand-in serving process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from golive.errors import EvidenceError
from golive.evidence.collect import collect_container


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line reads like `vllm serve` and whose environment the probe's
    own lacks."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "VLLM_GOLIVE_PROBE_MARKER": "from-the-server",
        "VLLM_API_KEY": "sk-never-copied",
        "CUDA_VISIBLE_DEVICES": "2,3",
    }
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "vllm", "serve", "some/model"]
    process = subprocess.Popen(argv, env=env)
    time.sleep(0.2)  # its /proc entry is complete
    yield process
    process.kill()
    process.wait()


def test_the_servers_runtime_variables_not_the_probes(
    serving: subprocess.Popen[bytes],
) -> None:
    """The variables come from the serving process (secrets redacted), named as such; its
    CUDA_VISIBLE_DEVICES is recorded; no torch here, so what torch sees is unknown (None,
    never "none": that would read as a runtime hiding the GPUs)."""
    facts = collect_container(sys.executable, pid=serving.pid)
    assert facts.environment_source == f"serving process {serving.pid}"
    assert facts.environment["VLLM_GOLIVE_PROBE_MARKER"] == "from-the-server"
    assert facts.environment["VLLM_API_KEY"] == "***REDACTED***"
    assert "sk-never-copied" not in facts.model_dump_json()
    assert facts.cuda_visible_devices == "2,3"
    assert facts.serve_command[-3:] == ("vllm", "serve", "some/model")
    assert facts.gpus is None
    assert any("the GPUs torch sees are unknown" in e for e in facts.errors)


def test_an_unreadable_server_falls_back_to_the_probe_and_says_so() -> None:
    """A pid that is not there: the probe's own variables, named as the probe's, and the
    reason in the errors."""
    facts = collect_container(sys.executable, pid=2**22 - 1)
    assert facts.environment_source == "probe"
    assert any("serving process's environment" in e for e in facts.errors), facts.errors


def test_the_probe_runs_where_golive_is_not_installed(serving: subprocess.Popen[bytes]) -> None:
    """`--python` may be a command that reaches into the container (`docker exec -i CTR
    python3`, `kubectl exec -i … -- python3`): the stdlib-only probe goes in on its stdin. Here
    the command is an isolated interpreter with an empty environment, where `import golive`
    fails, as in a serving image."""
    command = f"env -i {sys.executable} -I -S"
    isolated = subprocess.run(
        [*command.split(), "-c", "import golive"], capture_output=True, text=True, check=False
    )
    assert isolated.returncode != 0  # golive cannot be imported there
    facts = collect_container(command, pid=serving.pid)
    assert facts.environment["VLLM_GOLIVE_PROBE_MARKER"] == "from-the-server"
    assert facts.serve_command[-3:] == ("vllm", "serve", "some/model")


def test_a_command_that_cannot_start_names_the_fix() -> None:
    """A container command that is not there is an error naming --python."""
    with pytest.raises(EvidenceError, match="--python"):
        collect_container("no-such-docker exec -i ctr python3")
