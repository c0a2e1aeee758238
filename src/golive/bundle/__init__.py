"""The evidence bundle: the store (written as evidence is produced, sealed with a manifest), its
signature and the sign-off record.
"""
