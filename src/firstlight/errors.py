"""One root, `FirstlightError`, and a family per stage: callers catch one thing, the CLI maps each to an exit code.

Every message says what is wrong and what to do; `exit_code` is what the command line exits with.
"""

from __future__ import annotations

from typing import Any


class FirstlightError(Exception):
    """Anything firstlight refuses or cannot do, with a one-line reason."""

    exit_code = 1


class SpecError(FirstlightError, ValueError):
    """A spec that cannot be used: the message names the field, the problem and a right value."""

    exit_code = 2


class FactsError(FirstlightError):
    """Facts that cannot be read (a recorded facts file that is missing or holds no facts)."""

    exit_code = 2


class StoreError(FirstlightError):
    """The store cannot be opened (not a SQLite file, no permission)."""

    exit_code = 2


class LaunchError(FirstlightError):
    """A launch that cannot be started, found or stopped."""


class PreflightFailed(LaunchError):
    """A preflight check failed, so the launch was not started (pass force=True to launch anyway)."""

    exit_code = 2

    def __init__(self, message: str, findings: list[Any]) -> None:
        super().__init__(message)
        self.findings = findings


class LaunchInTheWay(LaunchError):
    """Another launch in the store already runs (or is starting) at the same address."""

    exit_code = 2


class SystemdUnavailable(LaunchError):
    """systemd is not the init system here (a container, CI): the message says what to use instead."""

    exit_code = 2


class LaunchNotFound(LaunchError, LookupError):
    """No such launch in the store."""


class BenchError(FirstlightError):
    """A benchmark that cannot start: bad options, a missing dataset, a URL it cannot use."""

    exit_code = 2


class BenchAborted(BenchError):
    """A benchmark that stopped early (the server is unreachable or died, requests kept failing); what
    finished is kept, in the run `run_id` (None when the run was never stored)."""

    exit_code = 1

    def __init__(self, message: str, run_id: int | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


class RunNotFound(BenchError, LookupError):
    """No such benchmark run in the store."""

    exit_code = 1


class RenderError(FirstlightError, ValueError):
    """A spec value that cannot be rendered safely; the message says which and why."""

    exit_code = 2


__all__ = [
    "BenchAborted",
    "BenchError",
    "FactsError",
    "FirstlightError",
    "LaunchError",
    "LaunchNotFound",
    "PreflightFailed",
    "RenderError",
    "RunNotFound",
    "SpecError",
    "StoreError",
    "SystemdUnavailable",
]
