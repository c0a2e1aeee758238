"""Record tests/data/golden-demo: `golive demo` on the bundled CPU vLLM with what a programme
decision needs (each Agent case 3 times per mode, a 600 s sustained window) and a team's
acceptance of the bundled model's tool_choice=auto defect as bounded, and the cache proof
on the generic profile's 1,024-token prefix. About 13 minutes.

    PYTHONPATH=src:. python -m tests.helpers.record_golden_demo /tmp/golden-new
    rm -rf tests/data/golden-demo && cp -r /tmp/golden-new tests/data/golden-demo
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from golive.orchestration import demo
from golive.target.models import VLLM_CPU_VERSION

DECISION_GRADE = {
    # the prefix the generic profile names (1,024 tokens): the demo's shorter one is relaxed
    "cache.prefix_tokens": None,
    "agent.repeat": 3,
    "agent.max_bounded_failure_share": 1.0,
    "programme.relaxed": [
        {
            "setting": "agent.max_bounded_failure_share",
            "owner": "demo team",
            "reason": "the bundled small model's tool_choice=auto defect is accepted as bounded",
        }
    ],
    "capacity.duration_s": 600,
    "capacity.min_sustained_s": 600,
    "capacity.min_sustained_completions": 30,
}


def main(out: Path) -> int:
    demo.DEMO_SETTINGS.update(DECISION_GRADE)
    verdict = asyncio.run(
        demo.run_demo("qwen", out, lambda m: print(m, flush=True), None, VLLM_CPU_VERSION)
    )
    print(f"{verdict.outcome.value}: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
