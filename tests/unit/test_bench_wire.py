"""The pipe between a worker process and the parent: a finished request crosses it intact, and every message
arrives whole and in order, however the bytes are split and however far the reader lags behind."""

from __future__ import annotations

import asyncio
import pickle
import socket
from array import array

from firstlight.benchmark.wire import Channel, Message, frame, open_channel, pack, unpack
from firstlight.records import RequestRecord


def test_a_record_crosses_the_pipe_intact() -> None:
    rec = RequestRecord(5, 10.0, sent=10.5, done=11.0, status=200, prompt_tokens=16, completion_tokens=3)
    rec.chunks = array("d", [10.6, 10.7, 10.9])
    rec.chunk_tokens = array("i", [1, 1, 1])
    assert unpack(pickle.loads(pickle.dumps(pack(rec)))) == rec
    failed = RequestRecord(6, 1.0, error_kind="timeout", error="no complete response", warmup=True)
    assert unpack(pack(failed)) == failed


def test_messages_split_anywhere_arrive_whole_and_in_order() -> None:
    got: list[Message] = []

    async def feed() -> None:
        channel = Channel(got.append, lambda: None)
        data = b"".join(frame(("record", i, b"x" * i)) for i in range(50))
        for at in range(0, len(data), 7):  # 7-byte reads: headers and bodies cut in every place
            channel.data_received(data[at : at + 7])

    asyncio.run(feed())
    assert got == [("record", i, b"x" * i) for i in range(50)]


def test_a_sender_never_blocks_and_nothing_is_lost_when_the_reader_lags() -> None:
    """Far more than a socket buffer holds, sent before the reader reads: the loop queues it (a blocking
    or failing send here once lost a worker's records), and the end comes after the last message."""
    got: list[Message] = []
    events: list[str] = []

    async def exchange() -> None:
        a, b = socket.socketpair()
        closed = asyncio.get_running_loop().create_future()

        def on_close() -> None:
            events.append(f"closed after {len(got)}")
            closed.set_result(None)

        sender = await open_channel(a, lambda m: None, lambda: None)
        for i in range(2000):
            sender.send(("record", i, b"c" * 2048))  # 4 MB
        await open_channel(b, got.append, on_close)
        await sender.close(10.0)
        await asyncio.wait_for(closed, 10.0)

    asyncio.run(exchange())
    assert [m[1] for m in got] == list(range(2000)) and events == ["closed after 2000"]
