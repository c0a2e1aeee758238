"""golive: decide whether a vLLM deployment may go live, and prove it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("golive")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
