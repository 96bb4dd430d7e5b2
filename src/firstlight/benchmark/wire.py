"""What crosses the pipe between a worker process and the parent: each message a length-prefixed pickle,
read and written by the event loop (a `Channel`), and a finished request as a flat tuple.

A record is a tuple of numbers, strings and two byte strings: pickling it costs one small tuple per request,
the chunk times copied in C (`array.tobytes`), never a Python object per chunk. The loop does the writing, so
a sender never blocks on a full pipe (the loop buffers until the reader catches up) and a reader never
blocks on half a message (it waits for the rest like any other bytes).
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import socket
import struct
from array import array
from collections.abc import Callable
from typing import Any

from firstlight.records import RequestRecord

Packed = tuple[int, float, float, float, int, int | None, int | None, str | None, str | None, bool, bytes, bytes]
Message = tuple[Any, ...]
HEADER = struct.Struct("!I")  # the length of the pickle that follows


def pack(rec: RequestRecord) -> Packed:
    return (
        rec.index,
        rec.scheduled,
        rec.sent,
        rec.done,
        rec.status,
        rec.prompt_tokens,
        rec.completion_tokens,
        rec.error_kind,
        rec.error,
        rec.warmup,
        rec.chunks.tobytes(),
        rec.chunk_tokens.tobytes(),
    )


def unpack(packed: Packed) -> RequestRecord:
    index, scheduled, sent, done, status, prompt, completion, kind, error, warmup, chunks, tokens = packed
    rec = RequestRecord(
        index,
        scheduled,
        sent=sent,
        done=done,
        status=status,
        prompt_tokens=prompt,
        completion_tokens=completion,
        error_kind=kind,
        error=error,
        warmup=warmup,
    )
    rec.chunks = array("d", chunks)
    rec.chunk_tokens = array("i", tokens)
    return rec


def frame(message: Message) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(body)) + body


class Channel(asyncio.Protocol):
    """One end of the pipe on the running loop: each whole message goes to `on_message` in order, and the
    pipe's end (the other side closed it, or died) to `on_close`, after every message that came before it."""

    def __init__(self, on_message: Callable[[Message], None], on_close: Callable[[], None]) -> None:
        self.on_message, self.on_close = on_message, on_close
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        at = 0
        while len(buf) - at >= HEADER.size:
            (n,) = HEADER.unpack_from(buf, at)
            if len(buf) - at - HEADER.size < n:
                break
            start = at + HEADER.size
            at = start + n
            self.on_message(pickle.loads(buf[start:at]))
        del buf[:at]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._lost.done():
            self._lost.set_result(None)
        self.on_close()

    def send(self, message: Message) -> None:
        """Queue one message; the loop writes it (a closed pipe drops it: its reader is gone)."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame(message))

    async def close(self, timeout: float) -> None:
        """Close once everything queued is written (or the timeout runs out)."""
        if self.transport is not None:
            self.transport.close()
        with contextlib.suppress(asyncio.TimeoutError):  # not the builtin TimeoutError before 3.11
            await asyncio.wait_for(asyncio.shield(self._lost), timeout)


async def open_channel(
    sock: socket.socket, on_message: Callable[[Message], None], on_close: Callable[[], None]
) -> Channel:
    """A channel over one end of a socket pair, on the running loop."""
    loop = asyncio.get_running_loop()
    _, channel = await loop.connect_accepted_socket(lambda: Channel(on_message, on_close), sock)
    return channel
