"""Issue 29 §2: the cache proof on a smaller prefix than the profile's workload shares is a
weaker proof. `cache.prefix_tokens` below `cache.min_shared_prefix_tokens` is a programme gap
in `cache.coverage` unless an owner relaxes it, never relaxable where the profile requires
prefix caching (kimi-k3), and judged from the cold request's prompt as the records hold it."""

from __future__ import annotations

from pathlib import Path

import pytest

from golive.checks.cache.collect import fitted_words
from golive.checks.cache.prefix_size import prefix_refusals, prefix_size_gaps
from golive.checks.coverage import cache_coverage
from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.orchestration.pipeline import run_inputs
from golive.orchestration.rederive import rederive
from golive.profiles import load_profile
from golive.programme_config import ProgrammeConfig, RelaxedSetting
from golive.results import Status

OWNED = RelaxedSetting(setting="cache.prefix_tokens", owner="cache team", reason="short prompts")
SEALED_DEMO = Path(__file__).parents[1] / "data/demo-sealed-2026-12-01"


@pytest.mark.parametrize(
    ("profile", "prompt", "owned", "gap", "said"),
    [
        # the generic profile names 1,024-token prefixes; the CPU demo's proof sent 641
        ("generic", 641, False, "prompt held 641 tokens, under the 1024-token prefixes", None),
        ("generic", 641, True, None, "cache.prefix_tokens relaxed (cache team: short prompts)"),
        # the calibration lands within ~1%: 1,022 for a 1,024 target is the profile's size
        ("generic", 1022, False, None, None),
        ("generic", 1024, False, None, None),
        # kimi-k3 requires prefix caching: its 16K-token proof is relaxed by no owner
        ("kimi-k3", 4096, True, "no owner can relax it", None),
        ("kimi-k3", 16384, False, None, None),
        # no prompt count: the reuse check says no_data; coverage adds nothing of its own
        ("generic", None, False, None, None),
    ],
)
def test_the_proofs_prefix_against_the_profiles(
    profile: str, prompt: int | None, owned: bool, gap: str | None, said: str | None
) -> None:
    """A proof's cold prompt under the profile's shared prefix (less 5% for calibration)
    is a gap naming both sizes, said with its owner where one relaxes it (none can under
    kimi-k3); at the profile's size, or without a count, nothing is added."""
    programme = ProgrammeConfig(relaxed=(OWNED,) if owned else ())
    weaker = prefix_size_gaps(programme, load_profile(profile), prompt, 4096)
    coverage = cache_coverage(3, "metrics/cache-steps.jsonl", weaker)
    if gap is None:
        assert coverage.status is Status.PASS, coverage.summary
    else:
        assert coverage.status is Status.SKIPPED
        assert gap in coverage.summary
    if said is not None:
        assert said in coverage.summary


def test_a_short_context_is_named_as_the_cap() -> None:
    """A server whose max_model_len cannot hold the profile's prefix, and a proof aimed at
    its edge: the gap names the cap and asks for a longer context, not for a setting the
    user never made; a smaller size the config asked for on the same server is the
    config's (the CPU target at 1,024 with --prefix-tokens 320 was said to be capped)."""
    weaker = prefix_size_gaps(ProgrammeConfig(), load_profile("generic"), 870, 1000, 872)
    (gap,) = weaker.gaps
    assert "max_model_len 1000 caps it" in gap
    assert "serve a longer --max-model-len" in gap
    asked = prefix_size_gaps(ProgrammeConfig(), load_profile("generic"), 321, 1024, 320)
    (gap,) = asked.gaps
    assert "caps it" not in gap
    assert "leave cache.prefix_tokens unset" in gap


@pytest.mark.parametrize(
    ("profile", "tokens", "refused"),
    [("kimi-k3", 1024, True), ("kimi-k3", 16384, False), ("generic", 640, False)],
)
def test_a_run_refuses_a_small_prefix_the_profile_requires(
    profile: str, tokens: int, refused: bool
) -> None:
    """Under kimi-k3 (prefix caching required) a smaller `cache.prefix_tokens` is refused
    before traffic, naming the setting and the profile's size; under generic the run goes on
    and the verdict's coverage says it."""
    config = load_config(None, {"profile": profile, "cache.prefix_tokens": tokens})
    assert bool(prefix_refusals(load_profile(profile), config)) is refused
    if refused:
        with pytest.raises(ConfigError, match=r"cache\.prefix_tokens is 1024, under the 16384"):
            run_inputs(config)


def test_the_sealed_demos_640_token_proof_is_a_gap_on_decide() -> None:
    """The demo sealed on 2026-12-01 proved reuse on a 640-token prefix with no owner: decide
    names the gap in cache.coverage (its 637-token cold prompt, from the records)."""
    coverage = next(c for c in rederive(SEALED_DEMO).checks if c.id == "cache.coverage")
    assert coverage.status is Status.SKIPPED
    assert "prompt held 637 tokens, under the 1024-token prefixes the generic" in (coverage.summary)


@pytest.mark.parametrize(
    ("a", "b", "target", "words"),
    [
        # a count linear in the filler (7 + a token a word + 400 for the rest): exact
        ((481, 888), (555, 962), 1024, 617),
        # the second trial's words where the counts cannot say (no count, no slope)
        ((481, None), (555, 962), 1024, 555),
        ((481, 888), (481, 888), 1024, 481),
        ((481, 900), (555, 890), 1024, 555),
    ],
)
def test_the_proof_is_sized_from_two_warm_up_counts(
    a: tuple[int, int | None], b: tuple[int, int | None], target: int, words: int
) -> None:
    """Two warm-ups of the proof's shape, their prompts counted by the server: the filler
    that makes the target is on the line through them."""
    assert fitted_words(a, b, target) == words
