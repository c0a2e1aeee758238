"""From check results to one outcome: the decision and its policy, scope, ledger, interruption,
combining section bundles, and re-deriving a sealed bundle's checks.
"""
