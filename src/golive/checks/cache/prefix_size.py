"""How big a prefix the cache proof shared, against what the profile's workload shares
(checklist: the cache proof holds where the workload depends on reuse).

A proof on a smaller prefix than the profile names fills fewer cache blocks: reuse that holds
for it says little of a hybrid cache whose blocks are thousands of tokens (Kimi K3's profile
names 16K-token prefixes for that reason). So `cache.prefix_tokens` set below the profile's
`cache.min_shared_prefix_tokens` weakens the proof: a programme gap in `cache.coverage` unless
`programme.relaxed` names an owner, and never relaxable where the profile requires prefix
caching (a run refuses it before traffic). Judged from the cold request's prompt as the
records hold it, never from the config's word.
"""

from __future__ import annotations

from golive.checks.relaxations import Relaxations
from golive.config import GoliveConfig
from golive.profiles import Profile
from golive.programme_config import ProgrammeConfig

SETTING = "cache.prefix_tokens"
# the calibration of words to tokens lands within about 1% of its target on the real runs
# (1,022-1,026 prompt tokens for 1,024 on an H200, 637-641 for 640 on the CPU target)
CALIBRATION_SLACK = 0.95


def _needed(profile: Profile) -> int:
    return profile.cache.min_shared_prefix_tokens


def prefix_refusals(profile: Profile, config: GoliveConfig) -> list[str]:
    """A run's refusal where `cache.prefix_tokens` is below the profile's shared prefix and
    the profile requires prefix caching (no owner relaxes that proof)."""
    given = config.cache.prefix_tokens
    if given is None or given >= _needed(profile) or not profile.chain.prefix_caching_required:
        return []
    return [
        f"{SETTING} is {given}, under the {_needed(profile)}-token prefixes the "
        f"{profile.name} profile's workload shares, and the profile requires prefix caching: "
        f"leave it unset (golive sizes the prefix from the profile), or set it to at least "
        f"{_needed(profile)} (no owner can relax it)"
    ]


def prefix_size_gaps(
    programme: ProgrammeConfig,
    profile: Profile,
    prompt_tokens: int | None,
    max_model_len: object = None,
    target_tokens: object = None,
) -> Relaxations:
    """The cache proof's size against the profile: a gap where the cold request's prompt held
    fewer than the profile's shared-prefix tokens (less the calibration's slack) and no owner
    relaxed `cache.prefix_tokens` (none can where the profile requires prefix caching)."""
    needed = _needed(profile)
    if prompt_tokens is None or prompt_tokens >= needed * CALIBRATION_SLACK:
        return Relaxations()
    # the server's context set the size only where the protocol aimed at its edge (a size
    # the config asked for is the config's)
    edge = max_model_len - 128 if isinstance(max_model_len, int) else None
    capped = edge is not None and edge < needed and target_tokens == edge
    what = (
        f"the prefix-cache proof's prompt held {prompt_tokens} tokens"
        f"{f' (the server max_model_len {max_model_len} caps it)' if capped else ''}, under the "
        f"{needed}-token prefixes the {profile.name} profile's workload shares "
        f"(cache.min_shared_prefix_tokens), so reuse is proved on fewer cache blocks than the "
        "workload fills"
    )
    if profile.chain.prefix_caching_required:
        return Relaxations(
            (f"{what}; the profile requires prefix caching, so no owner can relax it",)
        )
    said = next((r for r in programme.relaxed if r.setting == SETTING), None)
    if said is not None:
        return Relaxations((), (said,))
    fix = (
        "serve a longer --max-model-len"
        if capped
        else f"leave {SETTING} unset (golive sizes the prefix from the profile)"
    )
    return Relaxations(
        (f"{what}: {fix}, or record {SETTING} under programme.relaxed with an owner and a reason",)
    )
