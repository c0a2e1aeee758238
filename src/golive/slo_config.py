"""The `slo:` section of the config (re-exported by `golive.config`): the latency and error
targets production states. Each is optional; with none stated the capacity ceiling is the
throughput knee alone, as before. Every latency target is held at the 95th percentile (95% of
answers meet it), the per-user speed at the 5th (95% of users get at least it)."""

from __future__ import annotations

from pydantic import Field

from golive.strict_model import StrictModel


class SloConfig(StrictModel):
    """Service-level objectives a capacity step must meet to count towards the SLO ceiling."""

    ttft_p95_ms: float | None = Field(
        None, gt=0, description="time to first token, 95th percentile, ms (from intended send)"
    )
    itl_p95_ms: float | None = Field(
        None, gt=0, description="inter-token latency (gaps between streamed tokens), p95, ms"
    )
    e2e_p95_ms: float | None = Field(
        None, gt=0, description="end-to-end latency, 95th percentile, ms (from intended send)"
    )
    error_rate: float | None = Field(
        None, ge=0, le=1, description="share of requests that failed or never finished"
    )
    min_output_tokens_per_s_per_user: float | None = Field(
        None,
        gt=0,
        description="each answer's decode speed after its first token (1/TPOT), held at the "
        "5th percentile: 95% of users get at least this",
    )

    @property
    def stated(self) -> bool:
        """Whether any objective is set (without one, no SLO check runs)."""
        return any(v is not None for v in self.model_dump().values())
