"""After approval: the watch window and its rules, the alerting guardrails, the rollback
registry.
"""
