"""The one exception tree of golive.

    GoliveError                     anything golive raises on purpose
    ├── ConfigError                 bad config file, profile, flag or environment variable (exit 2)
    ├── TargetError                 the server under test misbehaved at the transport level
    │   ├── TargetUnreachable       connection refused, DNS, TLS, connect/read timeout
    │   ├── TargetNotMeasurable     preflight: the target cannot be measured at all (exit 4)
    │   └── BadResponse             reachable, but the answer is not what the protocol promises
    ├── LocalTargetError            the bundled CPU vLLM could not be set up, started or stopped
    ├── BundleError                 the evidence bundle could not be written, read or sealed
    │   └── RecordLineError         a request record line is not one (file, line, field named)
    ├── EvidenceError               an evidence file given by the user cannot be read
    └── LoadClientError             a load client (a --workers process) stopped answering

Library errors (transport, pydantic, yaml, OSError) are translated into these at the module
that talks to the library; nothing above that layer catches a foreign exception.
"""

from __future__ import annotations


class GoliveError(Exception):
    """Base class of every error golive raises on purpose."""


class ConfigError(GoliveError):
    """A config file, profile, flag or variable is invalid; the message names the fix."""


class TargetError(GoliveError):
    """The target could not be talked to as an OpenAI-compatible vLLM server."""


class TargetUnreachable(TargetError):
    """Connection refused, name not resolved, or a timeout before any answer."""


class TargetNotMeasurable(TargetError):
    """Preflight: the target cannot be measured at all (unreachable, not authorised, a wrong
    path, not an OpenAI-compatible server, another served model); the message names the
    fix. No bundle is written: there is no verdict about a deployment never reached."""


class BadResponse(TargetError):
    """The target answered, but not in the shape the protocol promises."""


class LocalTargetError(GoliveError):
    """The bundled local vLLM (CPU) target failed to install, start or stop."""


class BundleError(GoliveError):
    """The evidence bundle could not be written, read or sealed."""


class RecordLineError(BundleError):
    """A line of a request record stream that is not a request record line
    (`bundle.request_line.RequestRecordLine`), named with where and why. `is_object`: a JSON
    object all the same (else an unreadable line, the ledger's finding)."""

    def __init__(self, where: str, why: str, is_object: bool) -> None:
        super().__init__(f"{where}: {why}")
        self.is_object = is_object


class EvidenceError(GoliveError):
    """A user-supplied evidence file is missing or unreadable."""


class LoadClientError(GoliveError):
    """A load client golive started (a `--workers` process) died or stopped answering."""
