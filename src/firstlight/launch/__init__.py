"""Launching: start an engine (own process group, or a systemd unit), watch it, decide, stop it."""

from firstlight.launch.control import StopResult
from firstlight.launch.handle import Launch, down, get_launch, up, wait
from firstlight.store import LaunchRecord, LaunchState

__all__ = [
    "Launch",
    "LaunchRecord",
    "LaunchState",
    "StopResult",
    "down",
    "get_launch",
    "up",
    "wait",
]
