"""Waiting for an event with a timeout, without losing a Ctrl-C.

`asyncio.wait_for` before Python 3.12 returns normally when the task awaiting it is cancelled in the same loop
turn as the awaited thing completes: the cancellation is lost. A benchmark that waits on a message from its
workers every few milliseconds meets that turn often, and then runs on to the end after Ctrl-C.
"""

from __future__ import annotations

import asyncio


async def wait_set(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until `event` is set or `timeout` seconds pass (None: no limit); whether it is set. A cancellation
    of the caller always propagates."""
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    return event.is_set()
