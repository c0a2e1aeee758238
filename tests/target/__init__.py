"""Tests against the real local vLLM (CPU) target: every test here is marked `target`."""
