"""Checks: each a function from a context to `CheckResult`s, composed by literal lists."""
