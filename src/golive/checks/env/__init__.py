"""The env family: `collect` gathers the version chain's evidence into the bundle; `judge` applies
the chain rules to it.
"""
