"""What the version chain's rules judge (`ChainInputs`: the profile, the live API's answers, the
startup log, the container and host facts, the pods' images, each with where it lives in the
bundle); their results are built by `golive.results.ENVIRONMENT_RESULT` (and
`STARTUP_RESULT`).

The checklist's gate: "the image, runtime, host driver, and startup path must describe one
coherent environment". A rule judges what it was given; a rule that needs evidence the
user did not give is `no_data` (critical where the profile makes it so), never `pass`.
Every result cites its evidence (bundle path, and line or field).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from golive.bundle.layout import CONTAINER, K8S_PODS, STARTUP_LOG
from golive.config import CustomBuild, ParallelConfig
from golive.evidence.facts import ContainerInfo, HostInfo
from golive.evidence.startup_log import StartupFacts
from golive.profiles import Profile


@dataclass(frozen=True, slots=True)
class Source:
    """A piece of evidence and where it lives in the bundle."""

    value: str
    where: str


@dataclass(frozen=True, slots=True)
class PodImage:
    """An engine pod's container: its spec image and the imageID its node resolved."""

    image: str | None
    image_id: str | None


@dataclass(frozen=True, slots=True)
class ChainInputs:
    profile: Profile
    live_version: Source | None = None
    live_max_model_len: Source | None = None
    live_model: Source | None = None  # the served model id from /v1/models
    image: Source | None = None
    startup: StartupFacts | None = None
    startup_path: str = STARTUP_LOG
    container: ContainerInfo | None = None
    container_path: str = CONTAINER
    # each node's serving container (multi-node: environment/container-<node>.json); None
    # where chain-inputs.json lists a file the bundle lacks
    node_containers: tuple[tuple[ContainerInfo | None, str], ...] = ()
    hosts: tuple[tuple[HostInfo, str], ...] = ()
    declared_parallel: ParallelConfig | None = None
    gpu_class: str | None = None  # declared by the config, else the profile
    gpu_total: int | None = None
    custom_build: CustomBuild | None = None
    cache_info: Mapping[str, str] = field(default_factory=dict)
    # each engine pod's image as the cluster says it runs it (environment/k8s-pods.json)
    pods: tuple[PodImage, ...] = ()
    pods_path: str = K8S_PODS

    def most_node_gpus(self) -> int | None:
        """The most GPUs one host of the evidence shows; None where none shows any."""
        return max((len(host.gpus) for host, _ in self.hosts if host.gpus), default=None)
