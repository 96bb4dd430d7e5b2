"""Reads timed by the kernel (benchmark/stamped.py): against a real loopback server, a chunk the client reads
late is still timed when it arrived; end of stream, abort and a write larger than the socket takes at once."""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time

import pytest
import uvloop

from firstlight.benchmark import stamped


class Recorder:
    def __init__(self) -> None:
        self.reads: list[tuple[bytes, float]] = []
        self.lost: list[Exception | None] = []
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def received(self, data: bytes, at: float) -> None:
        self.reads.append((data, at))

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


async def _serve(handler) -> tuple[asyncio.AbstractServer, int]:  # type: ignore[no-untyped-def]
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps are Linux's")
def test_a_chunk_read_late_is_timed_when_it_arrived() -> None:
    async def go() -> tuple[float, float, Recorder]:
        written = asyncio.get_running_loop().create_future()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(5)
            written.set_result(time.perf_counter())
            writer.write(b"chunk")
            await writer.drain()
            await asyncio.sleep(0.5)
            writer.close()

        server, port = await _serve(handler)
        transport, rec = await stamped.open_connection("127.0.0.1", port, Recorder)
        transport.write(b"hello")
        sent_at = await written
        time.sleep(0.05)  # the client busy elsewhere: the chunk waits in its socket
        while not rec.reads:
            await asyncio.sleep(0.001)
        transport.close()
        server.close()
        return sent_at, time.perf_counter(), rec

    sent_at, read_by, rec = uvloop.run(go())
    ((data, at),) = rec.reads
    assert data == b"chunk"
    assert sent_at <= at + 0.001 and at - sent_at < 0.01  # when it arrived, not 50 ms later when it was read
    assert read_by - at > 0.04


def test_end_of_stream_and_abort_tell_the_protocol_once() -> None:
    async def go() -> tuple[Recorder, Recorder]:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"bye")
            await writer.drain()
            writer.close()

        server, port = await _serve(handler)
        _, ended = await stamped.open_connection("127.0.0.1", port, Recorder)
        while not ended.lost:
            await asyncio.sleep(0.001)
        aborted_t, aborted = await stamped.open_connection("127.0.0.1", port, Recorder)
        aborted_t.abort()
        aborted_t.abort()
        aborted_t.write(b"ignored after abort")
        await asyncio.sleep(0.01)
        server.close()
        return ended, aborted

    ended, aborted = uvloop.run(go())
    assert b"".join(d for d, _ in ended.reads) == b"bye" and ended.lost == [None]
    assert aborted.lost == [None] and aborted.transport is not None and aborted.transport.is_closing()


def test_a_write_the_socket_cannot_take_at_once_is_sent_whole() -> None:
    payload = bytes(range(256)) * (16 * 1024)  # 4 MiB: more than a socket buffer

    async def go() -> bytes:
        got = asyncio.get_running_loop().create_future()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(0.05)  # not reading yet: the client's send must wait for room
            got.set_result(await reader.readexactly(len(payload)))
            writer.close()

        server, port = await _serve(handler)
        transport, _ = await stamped.open_connection("127.0.0.1", port, Recorder)
        transport.write(payload)
        data = await asyncio.wait_for(got, 10)
        transport.close()
        server.close()
        return data

    assert uvloop.run(go()) == payload


def test_refused_connection_raises_and_leaks_nothing() -> None:
    async def go() -> None:
        server, port = await _serve(lambda r, w: None)
        server.close()
        await server.wait_closed()
        with pytest.raises(OSError):
            await stamped.open_connection("127.0.0.1", port, Recorder)

    uvloop.run(go())


def test_every_address_a_name_resolves_to_is_tried_in_turn() -> None:
    # `localhost` is often ::1 first while the server listens on IPv4 only: the first address refusing must
    # not fail the connection
    async def go() -> bytes:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"hi")
            await writer.drain()
            writer.close()

        server, port = await _serve(handler)
        closed, closed_port = await _serve(lambda r, w: None)
        closed.close()
        await closed.wait_closed()
        loop = asyncio.get_running_loop()
        real_getaddrinfo = loop.getaddrinfo

        async def two_addresses(host: str, port_: int, **kw: object) -> list:  # type: ignore[type-arg]
            loop.getaddrinfo = real_getaddrinfo  # type: ignore[method-assign]  # sock_connect resolves again
            tcp = (socket.AF_INET, socket.SOCK_STREAM, 6, "")
            return [(*tcp, ("127.0.0.1", closed_port)), (*tcp, ("127.0.0.1", port))]

        loop.getaddrinfo = two_addresses  # type: ignore[method-assign,assignment]
        _, rec = await stamped.open_connection("somehost", port, Recorder)
        while not rec.lost:
            await asyncio.sleep(0.001)
        server.close()
        return b"".join(d for d, _ in rec.reads)

    assert uvloop.run(go()) == b"hi"


def test_a_stamp_that_cannot_be_true_is_not_trusted() -> None:
    clock = stamped.KernelClock()
    now = time.perf_counter()
    real = time.time()
    fresh = struct.pack("qq", int(real), int((real % 1) * 1e9)) + bytes(32)
    assert abs(clock.to_perf(fresh, now) - now) < 0.01
    stepped = struct.pack("qq", int(real) - 3600, 0) + bytes(32)  # an hour old: a realtime step, not a read
    assert clock.to_perf(stepped, now) == now
