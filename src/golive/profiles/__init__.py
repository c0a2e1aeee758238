"""Bundled profiles (data): generic.yaml and kimi-k3.yaml."""
