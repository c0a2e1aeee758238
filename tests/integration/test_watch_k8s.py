"""Issue 29 §8: the watch reads the engine container's restart count and the reason its last
run ended from Kubernetes (kmock, an in-process API emulator), not only log text: a
container OOMKilled under the approved traffic is the OOM rollback; one restarted for
another reason alerts. The engine is the fake serving as the demo's accepted deployment."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("kmock", reason="needs the dev extra (kmock)")
pytest.importorskip("kubernetes", reason="needs golive[k8s]")

from golive.cli.main import main
from tests.helpers.fakes.vllm import fake_vllm
from tests.helpers.k8s_cluster import PODS, emulated_cluster, engine_pod
from tests.helpers.sections import PINNED_IMAGE, pinned_image
from tests.helpers.watching import accepted_bundle, as_accepted, quick_watch, rules, watching

LABELS = {"app": "vllm", "role": "engine"}
K8S = ("--k8s-namespace", "llm", "--selector", "app=vllm,role=engine")


@pytest.mark.parametrize(
    ("reason", "rule", "rollback"),
    [("OOMKilled", "oom", True), ("Error", "engine-restart", False)],
)
async def test_a_container_restart_is_read_from_kubernetes(
    tmp_path: Path, reason: str, rule: str, rollback: bool
) -> None:
    """Mid-watch the engine pod's container restarts once: OOMKilled is the OOM rollback
    naming the pod and its counts; another reason is an alert."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    state = as_accepted()
    async with emulated_cluster(tmp_path) as cluster, fake_vllm(state) as url:
        cluster.add_pod("vllm-0", "gpu-0")
        watch = quick_watch(
            url, accepted, tmp_path / "w", 6, *K8S, "--kubeconfig", str(cluster.kubeconfig)
        )
        await watching(tmp_path / "w")  # its baseline read: restarts before it are history
        cluster.emulator.objects[PODS, "llm", "vllm-0"] = engine_pod(
            "vllm-0", "gpu-0", "sha256:" + "a" * 64, LABELS, restarts=1, last_reason=reason
        )
        code, summary = await watch
    assert code == (1 if rollback else 0)
    assert rules(summary) == [rule]
    (fired,) = summary["triggers"]
    assert fired["rollback"] is rollback
    assert f"pod vllm-0: engine container restarts 0 to 1 ({reason})" in fired["reason"]


async def test_a_watch_that_cannot_read_its_pods_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Told to read pods in a cluster it has no credentials for, the watch stops before its
    first interval, naming the fix (exit 2)."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    state = as_accepted()
    missing = tmp_path / "no-such-kubeconfig"
    async with fake_vllm(state) as url:
        argv = [
            "watch", "--target", url, "--accepted", str(accepted), "--out", str(tmp_path / "w"),
            "--k8s-namespace", "llm", "--selector", "app=vllm", "--kubeconfig", str(missing),
        ]  # fmt: skip
        code = await asyncio.to_thread(main, argv)
    assert code == 2
    assert "watch --k8s-namespace: no Kubernetes credentials" in capsys.readouterr().err
    assert not (tmp_path / "w/watch/observations.jsonl").exists()


async def test_a_selector_matching_no_engine_container_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped --k8s-container (or a selector matching nothing) would read nothing for the
    whole watch: refused before the first interval, naming the pods it selected."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    state = as_accepted()
    async with emulated_cluster(tmp_path) as cluster, fake_vllm(state) as url:
        cluster.add_pod("vllm-0", "gpu-0")
        argv = [
            "watch", "--target", url, "--accepted", str(accepted), "--out", str(tmp_path / "w"),
            "--k8s-namespace", "llm", "--selector", "app=vllm", "--k8s-container", "vllm-engine",
            "--kubeconfig", str(cluster.kubeconfig),
        ]  # fmt: skip
        code = await asyncio.to_thread(main, argv)
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no pod runs the engine container of the accepted image" in err
    assert "without the container: vllm-0" in err


async def test_the_other_colours_pods_are_not_the_accepted_deployment(tmp_path: Path) -> None:
    """Blue/green under one label: the accepted bundle's image digest picks its pods; the
    old colour's container OOMKilled mid-watch is not this deployment's OOM."""
    accepted = await accepted_bundle(tmp_path / "accepted", pinned_image)
    ours = PINNED_IMAGE.split("@")[1]
    state = as_accepted()
    async with emulated_cluster(tmp_path) as cluster, fake_vllm(state) as url:
        cluster.add_pod("green-0", "gpu-0", ours)
        cluster.add_pod("blue-0", "gpu-1", "sha256:" + "b" * 64)
        watch = quick_watch(
            url, accepted, tmp_path / "w", 5, *K8S, "--kubeconfig", str(cluster.kubeconfig)
        )
        await watching(tmp_path / "w")
        cluster.emulator.objects[PODS, "llm", "blue-0"] = engine_pod(
            "blue-0", "gpu-1", "sha256:" + "b" * 64, LABELS, restarts=1, last_reason="OOMKilled"
        )
        code, summary = await watch
    assert code == 0, summary["triggers"]
    assert rules(summary) == []
