"""Connections whose every read carries the kernel's receive time, on the client's clock.

Why: a server streams one chunk per running request at each decode step, so a client with C streams is handed
C chunks at the same instant and reads them one after another. Timed when each read returns, the last of them
is late by the time the client took to read the others: about 10 us a chunk, so at 500 streams a process
several milliseconds of TTFT and ITL that belong to the client, not the server (measured against the truth
server, docs/bench-at-scale.md). The kernel stamps each segment as it arrives (SO_TIMESTAMPING, software
receive stamps); reading with recvmsg returns that stamp with the bytes, so a chunk is timed when it reached
this host however long the client then took to get to it. The cost is a recvmsg instead of uvloop's read, and
the stamp's conversion: about 1 us a token on a 2-core VM (about 5% more CPU at C=512).

A read that returns several segments carries the stamp of the last (TCP's rule): one that was waiting a whole
inter-token gap is timed with the next. That happens only when the client falls a whole gap behind, which the
level's health reports as client-limited anyway. Where the kernel gives no stamp (not Linux, or the option
refused), the time the read returned is used, as before.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)  # Linux; Python does not name it
RX_SOFTWARE_STAMPS = (1 << 3) | (1 << 4)  # SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE
READ_SIZE = 64 * 1024  # recvmsg allocates this much for every read: 256 KiB made each read 5x dearer (mmap)
ANCILLARY_SIZE = socket.CMSG_SPACE(48) if hasattr(socket, "CMSG_SPACE") else 0  # struct scm_timestamping
_TIMESPEC = struct.Struct("qq")
_clock = time.perf_counter
_realtime = time.time


class KernelClock:
    """Moves the kernel's receive stamps (CLOCK_REALTIME) onto time.perf_counter's clock. The offset between
    the two changes only when the realtime clock is stepped (NTP slews both alike), so it is read again every
    REFRESH_S rather than for every read, which would cost as much as the rest of the conversion. A stamp
    outside (now - PLAUSIBLE_S, now], as around a step, is not trusted: the read's own time is used."""

    REFRESH_S = 0.1
    PLAUSIBLE_S = 10.0

    def __init__(self) -> None:
        self._offset = 0.0
        self._until = 0.0

    def to_perf(self, stamp: bytes, now: float) -> float:
        if now >= self._until:
            self._offset = _realtime() - _clock()
            self._until = now + self.REFRESH_S
        sec, nsec = _TIMESPEC.unpack_from(stamp)
        at = sec + nsec * 1e-9 - self._offset
        return at if now - self.PLAUSIBLE_S < at <= now else now


CLOCK = KernelClock()


class StampedTransport(asyncio.Transport):
    """A TCP socket read on the event loop with recvmsg: each read is handed to the protocol with its time,
    `protocol.received(data, at)`. Writes go out at once (a request is small); what the socket does not take
    waits for it to be writable. Closing or aborting tells the protocol once, as asyncio transports do."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: Any, stamped: bool) -> None:
        super().__init__()
        self._loop, self._sock, self._protocol = loop, sock, protocol
        self._fd = sock.fileno()
        self._stamped = stamped
        self._pending = b""
        self._closing = False
        loop.add_reader(self._fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            if self._stamped:
                data, ancillary, _, _ = self._sock.recvmsg(READ_SIZE, ANCILLARY_SIZE)
            else:
                data, ancillary = self._sock.recv(READ_SIZE), []
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._shut(e)
            return
        now = _clock()
        if not data:
            self._shut(None)
            return
        self._protocol.received(data, CLOCK.to_perf(ancillary[0][2], now) if ancillary else now)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        idle = not self._pending
        self._pending += data
        if idle and not self._flush() and not self._closing:
            self._loop.add_writer(self._fd, self._on_writable)

    def _on_writable(self) -> None:
        if self._flush():
            self._loop.remove_writer(self._fd)

    def _flush(self) -> bool:
        """Send what is pending; True once all of it has gone (a send that fails shuts the transport)."""
        try:
            sent = self._sock.send(self._pending)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as e:
            self._shut(e)
            return False
        self._pending = self._pending[sent:]
        return not self._pending

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._shut(None)

    def abort(self) -> None:
        self._shut(None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._sock if name == "socket" else default

    def _shut(self, exc: Exception | None) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        if self._pending:
            self._loop.remove_writer(self._fd)
        self._sock.close()
        self._loop.call_soon(self._lost, exc)

    def _lost(self, exc: Exception | None) -> None:
        protocol, self._protocol = self._protocol, None  # the protocol keeps the transport: no cycle is left
        protocol.connection_lost(exc)


async def open_connection(host: str, port: int, protocol_factory: Callable[[], Any]) -> tuple[StampedTransport, Any]:
    """Connect without blocking the loop, trying each address the host resolves to in turn (`localhost` is
    often ::1 first, and a server may listen on IPv4 only), as loop.create_connection does; the protocol gets
    `connection_made(transport)` before this returns. Raises the last address's OSError."""
    loop = asyncio.get_running_loop()
    failure: OSError | None = None
    for family, kind, proto, _, address in await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request leaves at once
            stamped = _ask_for_stamps(sock)
            await loop.sock_connect(sock, address)
            protocol = protocol_factory()
            transport = StampedTransport(loop, sock, protocol, stamped)
        except OSError as e:
            sock.close()
            failure = e
            continue
        except BaseException:
            sock.close()
            raise
        protocol.connection_made(transport)
        return transport, protocol
    raise failure or OSError(f"{host}:{port}: the name resolved to no address")


def _ask_for_stamps(sock: socket.socket) -> bool:
    if not ANCILLARY_SIZE:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, RX_SOFTWARE_STAMPS)
    except OSError:
        return False
    return True
