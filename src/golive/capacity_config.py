"""The `capacity:` section of the config (re-exported by `golive.config`): the four pressure
phases, their bounds, the stability rules and the production need judged against."""

from __future__ import annotations

from pydantic import Field, model_validator

from golive import prometheus_input
from golive.strict_model import StrictModel


class CapacityConfig(StrictModel):
    """The four pressure phases. Every phase is bounded by time and by a request cap."""

    max_retry_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="retries (client.retries) per request above which a window is a retry "
        "storm: not stable",
    )

    concurrency: int = Field(8, ge=1, le=4096, description="highest concurrency of the ramp")
    required_concurrency: int | None = Field(
        None,
        ge=1,
        description="the concurrency production needs: a ceiling below it where the engine "
        "saturated is expand-capacity; with no need stated, a ceiling is a limit to observe",
    )
    headroom: float = Field(
        0.2,
        ge=0,
        le=4,
        description="spare capacity kept above the required load when a capacity request "
        "sizes replicas (0.2: 20%)",
    )
    max_context: int | None = Field(
        None, ge=16, description="intended max input; default max_model_len"
    )
    required_context: int | None = Field(
        None,
        ge=16,
        description="the context (tokens in a request) production needs: an input that ran "
        "the engine out of memory below it is expand-capacity; one the server refuses, or "
        "never asked, is a context limit",
    )
    duration_s: float = Field(
        600.0,
        gt=0,
        description="sustained phase length; lengthened (at most 2x) where the ramp's rate at "
        "that level gives fewer than the 30 answers (+25%) a drift is judged on, or than the "
        "stated SLOs need (59 with the ramp's step at that level, for a p95 bound)",
    )
    min_sustained_s: float = Field(
        600.0,
        ge=0,
        description="the shortest sustained window judged (long enough to expose memory "
        "growth and queue behaviour); shorter is no_data saying how long to run. A lower value "
        "is for a quick look: a programme decision needs 600 s and 30 answers whatever this "
        "says (capacity.coverage)",
    )
    min_sustained_completions: int = Field(
        30, ge=1, description="the fewest answers a sustained window is judged on; fewer: no_data"
    )
    step_duration_s: float = Field(20.0, gt=0, description="length of each ramp step")
    knee_repeats: int = Field(
        3,
        ge=1,
        le=10,
        description="windows measured at each of the two steps around a candidate throughput "
        "knee (alternating order); the knee is set only when their 95% interval excludes "
        "'no knee' (1: judge the single windows, counting noise only)",
    )
    step_max_requests: int | None = Field(
        None,
        ge=1,
        description="hard request cap of every load window; default: sized from the rate a "
        "calibration window measured (x3), so a fast engine is never cut short",
    )
    max_latency_growth: float = Field(
        0.2,
        gt=0,
        description="sustained phase: latency growth (fit over the run and last third vs "
        "first third, both) that makes a significant drift a traffic limit",
    )
    min_memory_headroom: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="GPU memory a GPU keeps spare at its peak (model load, KV cache, load), "
        "as a share of it; less is a limit (capacity.memory)",
    )
    max_memory_growth: float = Field(
        0.02,
        gt=0,
        le=1,
        description="significant growth of a GPU's memory over the sustained window after "
        "its warm-up, as a share of the GPU's memory, that is a limit",
    )
    max_kv_growth: float = Field(
        0.05,
        gt=0,
        le=1,
        description="likewise for KV cache usage, as a share of the cache (it swings with the "
        "requests in flight)",
    )
    answer_probes: bool = Field(
        True,
        description="send known-answer probes at idle and inside the sustained window "
        "(capacity.answers_under_load)",
    )
    probe_repeats: int = Field(
        2, ge=1, le=20, description="how often each probe goes inside the sustained window"
    )
    probe_deadline_s: float = Field(
        60.0, gt=0, description="whole-request limit of one answer probe (a few tokens each)"
    )
    calibration_s: float = Field(
        5.0, gt=0, description="the concurrency-1 window that measures the request rate"
    )
    drain_s: float | None = Field(
        None,
        ge=0,
        description="time requests in flight get to finish after a phase's duration; then the "
        "watchdog ends them (default: 3x the phase, at most 120 s)",
    )
    restart_wait_s: float = Field(
        0.0,
        ge=0,
        description="after the engine died above a stable ramp step, how long to wait for the "
        "deployment to serve again (its platform restarting it) before the sustained window "
        "measures the ceiling; 0: no wait (with --launch golive starts the command again)",
    )
    prometheus_url: str | None = Field(
        None,
        description="a Prometheus scraping the DCGM exporter on the engine's nodes: each GPU's "
        "memory over the pressure phases is read from it into capacity.gpu_memory (no sampler "
        "on the nodes, no CSV to copy; with golive off the GPU hosts, the headroom check "
        "capacity.memory judges the engine's GPUs on these curves); needs dcgm_selector",
    )
    gpu_curves: tuple[str, ...] = Field(
        (),
        description="node GPU memory curves (`golive env collect --gpu-curve` files, read after "
        "the phases) merged by phase into capacity.gpu_memory; with golive off the GPU hosts, "
        "capacity.memory judges the engine's GPUs on them; --gpu-curve FILE (repeat) adds one",
    )
    sample_gpus: bool = Field(
        False,
        description="sample every GPU node of the --chain-ray cluster over the pressure phases "
        "(golive capacity --chain-ray always does); --sample-gpus",
    )
    dcgm_selector: str | None = Field(
        None,
        description="PromQL label matchers picking the deployment's own GPUs among the DCGM "
        'series, e.g. namespace="llm",pod=~"vllm-.*" or Hostname=~"gpu-node-[0-3]"',
    )
    long_max_tokens: int = Field(8, ge=1, description="generation limit of long-input requests")
    stall_s: float = Field(
        20.0, gt=0, description="no byte of any answer this long, requests in flight: a stall"
    )
    client_max_lag_ms: float = Field(
        5.0, gt=0, description="golive's send/event-loop lag p99 beyond which a window is its own"
    )
    client_max_cpu_share: float = Field(
        0.8, gt=0, description="golive's CPU per window (1.0 = a core) beyond which likewise"
    )
    max_queue_s: float = Field(
        0.5, ge=0, description="queue time (p95) a step may show whatever its latency: noise"
    )
    max_queue_share: float = Field(
        0.25,
        ge=0,
        description="queue time as a share of the median end-to-end latency beyond which a step "
        "waits too long (the larger of the two limits applies)",
    )
    system_prompt_words: int = Field(
        450, ge=0, description="load workload: words of the shared system prompt"
    )
    tools: int = Field(3, ge=0, description="load workload: tool definitions per request")
    turns: int = Field(2, ge=0, description="load workload: earlier turns in each conversation")
    long_share: float = Field(0.2, ge=0, le=1, description="load workload: share of long inputs")
    long_prompt_words: int = Field(1500, ge=0, description="load workload: words of a long input")
    structured_share: float = Field(
        0.25, ge=0, le=1, description="load workload: share of structured-output requests"
    )
    max_tokens: int = Field(24, ge=1, description="load workload: answer length (max_tokens)")

    @model_validator(mode="after")
    def _dcgm_needs_a_selector(self) -> CapacityConfig:
        if (self.prometheus_url is None) != (self.dcgm_selector is None):
            raise ValueError(
                "capacity.prometheus_url and capacity.dcgm_selector go together "
                "(--prometheus-url, --dcgm-selector): the Prometheus scraping the DCGM "
                "exporter, and the label matchers of this deployment's GPUs (a shared "
                "Prometheus holds others')"
            )
        if self.prometheus_url is not None:
            problem = prometheus_input.url_problem(self.prometheus_url)
            if problem is not None:
                raise ValueError(f"capacity.prometheus_url: {problem}")
        if self.dcgm_selector is not None:
            problem = prometheus_input.selector_problem(self.dcgm_selector)
            if problem is not None:
                raise ValueError(f"capacity.dcgm_selector: {problem}")
        return self
