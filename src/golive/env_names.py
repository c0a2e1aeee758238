"""Names of environment variables, told apart from keys pasted in their place: an API key
is read from a variable golive is given the name of, and an error may print that name only
where it cannot be a key."""

from __future__ import annotations

# how API keys and tokens begin (a dash is never in a name anyway); case-sensitive, so a
# variable such as SK_TOKEN stays a name
_KEY_PREFIXES = ("sk_", "pk_", "rk_", "hf_", "ghp_", "gho_", "github_pat_", "xoxb")


def is_env_name(value: str) -> bool:
    """An environment variable's name, not a key pasted in its place (an API key's prefix, a
    dash, or more than 64 characters)."""
    return (
        0 < len(value) <= 64
        and value.replace("_", "").isalnum()
        and value.isascii()
        and not value[0].isdigit()
        and not (value.startswith(_KEY_PREFIXES) and len(value) >= 24)
    )


def shown_env_name(value: str) -> str:
    """The variable's name as an error may print it: a conventional name (upper case,
    digits, _) as given; anything else, which may be a key that passed for a name (a
    lower-case or mixed-case token), never."""
    conventional = is_env_name(value) and value.isupper() and len(value) <= 48
    return value if conventional else "the variable given (not shown)"
