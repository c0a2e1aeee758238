"""vLLM's API server as the bottleneck: the client held N requests in flight, the engine saw
far fewer, and the time outside the engine grew with load (Little's law on a ramp step's own
figures). A known limit at high request rates with its own remedy (`--api-server-count`),
reported beside the ramp's classification, never blamed on the engine's capacity."""

from __future__ import annotations

from collections.abc import Sequence

from golive.checks.capacity.step_stats import StepStats

FRONTEND_SHARE = 0.5  # the engine must hold at least this share of the requests in flight
FRONTEND_GROWTH = 2.0  # ... or the time outside it per request must not have grown this much


def outside_engine_s(step: StepStats) -> float | None:
    """Little's law: the seconds each request spent in flight but not in the engine (vLLM's
    API server, the network, golive) = (in flight - engine's running + waiting) / throughput."""
    if step.engine_held is None or step.throughput_rps <= 0:
        return None
    return max(0.0, step.concurrency - step.engine_held) / step.throughput_rps


def api_server_bound(step: StepStats, base: StepStats) -> str | None:
    """The client held `concurrency` requests in flight but the engine saw far fewer, and the
    time each request spent outside the engine grew with the load (against the lowest step,
    `base`): the requests queued in vLLM's API server (tokenising, detokenising, streaming).
    A fixed per-request overhead that does not grow is not a bottleneck. A known limit at high
    request rates, with its own remedy; never a silent latency rise."""
    if step.engine_held is None or step.concurrency < 4 or base.concurrency >= step.concurrency:
        return None
    if step.engine_held >= FRONTEND_SHARE * step.concurrency:
        return None
    now, then = outside_engine_s(step), outside_engine_s(base)
    if now is None or then is None or now < FRONTEND_GROWTH * then:
        return None
    return (
        f"API server bound: at concurrency {step.concurrency} the engine held "
        f"{step.engine_held:.1f} requests on average (running + waiting), and the time each "
        f"request spent outside the engine grew from {then * 1000:.0f} ms at concurrency "
        f"{base.concurrency} to {now * 1000:.0f} ms: the others queued in the API server, not "
        "the engine; add API server processes (--api-server-count)"
    )


def api_server_finding(steps: Sequence[StepStats]) -> str | None:
    """The first step of the ramp that `api_server_bound` names, against the lowest one."""
    ramp = sorted(steps, key=lambda s: s.concurrency)
    return next((f for s in ramp[1:] if (f := api_server_bound(s, ramp[0])) is not None), None)
