"""The streaming client's parser on well-formed, malformed and truncated streams (no server needed)."""

from __future__ import annotations

import asyncio
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from firstlight.benchmark.client import StreamConnection, Target
from firstlight.records import RequestRecord


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.aborted = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.written += data

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True


def feed(parts: list[bytes], lose: bool = False, numbered: bool = False) -> RequestRecord:
    """The record of a stream read in these parts; `numbered`: read i is timed i (seconds)."""
    loop = asyncio.new_event_loop()
    try:
        conn = StreamConnection(loop)
        conn.connection_made(FakeTransport())
        rec = RequestRecord(0, 0.0)
        fut = conn.start(rec, Target.from_url("http://h:1", "/v1/completions").request_head(2), b"{}", 60)
        for i, p in enumerate(parts):
            if numbered:
                conn.received(p, float(i))
            else:
                conn.data_received(p)
        if lose or not fut.done():
            conn.connection_lost(None)
        assert fut.done()
        return fut.result()
    finally:
        loop.close()


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def event(payload: str) -> bytes:
    return chunk(f"data: {payload}\n\n".encode())


GOOD = [
    HEAD,
    event('{"choices":[{"index":0,"text":" a"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}'),
    event('{"choices":[{"index":0,"text":" b c"}],"usage":{"prompt_tokens":3,"completion_tokens":3}}'),
    event('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}'),
    event("[DONE]"),
    b"0\r\n\r\n",
]


def test_well_formed_stream_with_continuous_usage() -> None:
    r = feed(GOOD)
    assert r.ok and r.status == 200
    assert list(r.chunk_tokens) == [1, 2] and r.completion_tokens == 3 and r.prompt_tokens == 3


def test_role_only_first_chat_delta_is_not_a_token() -> None:
    parts = [
        HEAD,
        event('{"choices":[{"delta":{"role":"assistant","content":""}}]}'),
        event('{"choices":[{"delta":{"content":"hi"}}]}'),
        event("[DONE]"),
        b"0\r\n\r\n",
    ]
    r = feed(parts)
    assert r.ok and len(r.chunks) == 1


def test_http_error_keeps_status_and_message() -> None:
    body = b'{"error":{"message":"The model `x` does not exist."}}'
    r = feed([b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)])
    assert r.error_kind == "http_404" and "does not exist" in r.error


def test_malformed_event_and_truncated_stream() -> None:
    r = feed([HEAD, chunk(b"data: not json\n\n"), b"0\r\n\r\n"])
    assert r.error_kind == "malformed_stream"
    r = feed(GOOD[:3], lose=True)
    assert r.error_kind == "connection_reset" and len(r.chunks) == 2  # what arrived is kept
    r = feed([b"garbage that is not HTTP\r\n\r\n"])
    assert r.error_kind == "malformed_stream"


def test_error_event_mid_stream() -> None:
    r = feed([HEAD, GOOD[1], event('{"error": {"message": "Invalid prefix encountered"}}'), b"0\r\n\r\n"])
    assert r.error_kind == "stream_error" and "Invalid prefix" in r.error


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=12), st.booleans())
def test_arbitrary_bytes_end_as_a_record_never_a_crash(parts: list[bytes], after_head: bool) -> None:
    r = feed(([HEAD] if after_head else []) + parts, lose=True)
    assert (
        r.ok
        or r.error_kind in ("malformed_stream", "connection_reset", "stream_error")
        or r.error_kind.startswith("http_")
    )


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_split_of_a_good_stream_gives_the_same_record(data: st.DataObject) -> None:
    whole = b"".join(GOOD)
    cuts = sorted(data.draw(st.lists(st.integers(1, len(whole) - 1), max_size=10, unique=True)))
    parts = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True)]
    r = feed(parts)
    assert r.ok and sum(r.chunk_tokens) == 3 and r.completion_tokens == 3


def test_usage_only_in_the_last_token_event() -> None:
    # transformers serve: no continuous usage, the total rides on the last token's event, no [DONE]
    parts = [
        HEAD,
        event('{"choices":[{"text":" a"}]}'),
        event('{"choices":[{"text":" b"}]}'),
        event('{"choices":[{"text":" c","finish_reason":"length"}],"usage":{"prompt_tokens":4,"completion_tokens":3}}'),
        b"0\r\n\r\n",
    ]
    r = feed(parts)
    assert r.ok and list(r.chunk_tokens) == [1, 1, 1]
    assert r.completion_tokens == 3 and r.prompt_tokens == 4


def test_one_event_per_read_all_in_one_read_and_crlf_give_the_same_record() -> None:
    # the client has a fast path for a read that is one whole single-line event; every other shape goes
    # the general way: all must agree
    def records(parts: list[bytes]) -> tuple[list[int], int | None, int | None, bool]:
        r = feed(parts)
        return list(r.chunk_tokens), r.completion_tokens, r.prompt_tokens, r.ok

    crlf = [HEAD] + [chunk(p[p.index(b"\r\n") + 2 : -2].replace(b"\n", b"\r\n")) for p in GOOD[1:-1]] + [GOOD[-1]]
    one_read = [HEAD, b"".join(GOOD[1:])]
    assert records(GOOD) == records(crlf) == records(one_read) == ([1, 2], 3, 3, True)
    no_usage = [HEAD, event('{"choices":[{"text":" a"}]}'), event('{"choices":[{"text":" b"}]}'), b"0\r\n\r\n"]
    assert records(no_usage) == records([HEAD, b"".join(no_usage[1:])]) == ([1, 1], None, None, True)


CRLF = [HEAD] + [chunk(p[p.index(b"\r\n") + 2 : -2].replace(b"\n", b"\r\n")) for p in GOOD[1:-1]] + [GOOD[-1]]


def test_every_cut_of_a_crlf_stream_times_each_event_by_the_read_that_ended_it() -> None:
    # an event's end is looked for across the reads it arrives in: the CRLF blank line may be cut anywhere, even
    # into a read of one byte; each token event is timed by the read that brought the last byte of its blank line
    whole = b"".join(CRLF)
    token_ends = [whole.index(b"\r\n\r\n", whole.index(marker)) + 4 for marker in (b'" a"', b'" b c"')]
    for i in range(1, len(whole) - 2):
        for cuts in ([i, i + 1, len(whole)], [i, i + 1, i + 2, len(whole)]):  # one or two one-byte reads at i
            r = feed([whole[a:b] for a, b in zip([0, *cuts], cuts, strict=False)], numbered=True)
            assert r.ok and list(r.chunk_tokens) == [1, 2] and r.completion_tokens == 3
            assert list(r.chunks) == [float(next(k for k, c in enumerate(cuts) if c >= end)) for end in token_ends], i


def test_a_large_event_in_many_reads_is_one_token_event() -> None:
    payload = {"choices": [{"index": 0, "text": "x" * (2 * 1024 * 1024)}], "usage": {"completion_tokens": 1}}
    big = event(json.dumps(payload))
    whole = b"".join([HEAD, big, event("[DONE]"), b"0\r\n\r\n"])
    reads = [whole[i : i + 65536] for i in range(0, len(whole), 65536)]
    r = feed(reads, numbered=True)
    assert r.ok and list(r.chunk_tokens) == [1] and r.completion_tokens == 1
    assert list(r.chunks) == [float(next(i for i, p in enumerate(reads) if b"\n\n" in p))]
    odd = [whole[i : i + 4097] for i in range(0, len(whole), 4097)]  # cuts that fall inside the blank lines too
    assert list(feed(odd).chunk_tokens) == [1]
