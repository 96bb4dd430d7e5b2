"""The streaming client: keep-alive HTTP/1.1 connections as raw asyncio protocols, parsed by httptools.

Why this low: a benchmark client must measure the server, not itself. At hundreds of streams a
general-purpose client spends its time in its own machinery (vllm bench serve on aiohttp reports
TTFT +34 ms at C=256 on this kind of machine, reference/bench-anchors.md). Here each read carries one
timestamp, the kernel's receive time where it gives one (`stamped`), the HTTP framing is parsed in C
(httptools, uvicorn's parser), and SSE events are classified by byte patterns; only the final usage numbers
are extracted.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools

from firstlight.records import RequestRecord

_INT = re.compile(rb"\s*(\d+)")
_PROMPT = re.compile(rb'"prompt_tokens"\s*:\s*(\d+)')
_TEXT = re.compile(rb'"(?:text|content|reasoning_content|reasoning)"\s*:\s*"(?!")')
_EMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*\]')
MAX_ERROR_BODY = 4096
CANCELLED = "cancelled"  # a request the run stopped waiting for: interrupted, not failed
_clock = time.perf_counter  # one global lookup a read instead of two


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    path: str
    host_header: str
    api_key: str | None = None

    @classmethod
    def from_url(cls, url: str, path: str, api_key: str | None = None) -> Target:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"{url}: only http://host:port URLs are supported")
        port = parts.port or 80
        return cls(parts.hostname, port, parts.path.rstrip("/") + path, f"{parts.hostname}:{port}", api_key)

    def request_head(self, body_len: int) -> bytes:
        lines = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host_header}",
            "Content-Type: application/json",
            "Accept: text/event-stream",
            f"Content-Length: {body_len}",
            "Connection: keep-alive",
        ]
        if self.api_key:
            lines.append(f"Authorization: Bearer {self.api_key}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _ends_event(before: bytes, body: bytes) -> bool:
    """Whether `body`, read after bytes ending in `before`, holds the blank line that ends an SSE event (LF or CRLF
    line ends: after CRLF becomes LF, a blank line is two LFs)."""
    return b"\n\n" in body or b"\n\r\n" in body or b"\n\n" in before + body[:3] or b"\n\r\n" in before + body[:3]


class StreamConnection(asyncio.Protocol):
    """One keep-alive connection carrying one streamed request at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = time.monotonic()
        self._parser = httptools.HttpResponseParser(self)
        self._record: RequestRecord | None = None
        self._future: asyncio.Future[RequestRecord] | None = None
        self._buf = b""  # the start of an event whose end has not come yet
        self._more: list[bytes] = []  # later pieces of that event, joined only once its end comes
        self._err_body = b""
        self._now = 0.0
        self._got_bytes = False
        self._done_seen = False
        self._cum_tokens = 0
        self._timer: asyncio.TimerHandle | None = None

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received(data, _clock())

    def received(self, data: bytes, at: float) -> None:
        """One read and its time: when the kernel received it (`stamped`), else when the read returned."""
        self._now = at
        self._got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail("malformed_stream", "unexpected protocol upgrade")
        except httptools.HttpParserError as e:
            self._fail("malformed_stream", f"bad HTTP framing: {e}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._record is not None:
            if self._got_bytes:
                self._fail("connection_reset", f"the server closed the connection mid-stream ({exc or 'EOF'})")
            else:
                self._fail("connection_reset", f"the server closed the connection before answering ({exc or 'EOF'})")

    # httptools callbacks

    def on_headers_complete(self) -> None:
        assert self._record is not None
        self._record.status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        rec = self._record
        if rec is None:
            return
        if rec.status != 200:
            if len(self._err_body) < MAX_ERROR_BODY:
                self._err_body += body[: MAX_ERROR_BODY - len(self._err_body)]
            return
        if self._buf:
            if not _ends_event(self._buffered_end(), body):
                # Still inside one event (a large one arrives in many reads): keep the piece, and join them once,
                # when its end comes; joining at every read would copy the event over and over.
                self._more.append(body)
                return
            body = b"".join((self._buf, *self._more, body))
            self._more = []
        if body.find(b"\n") == len(body) - 2 and body[-1] == 10 and body[-3:-2] != b"\r":  # 10: LF
            # The read is one whole single-line event (the first newline is the blank line that ends it),
            # as nearly every read is at high concurrency: one scan of the bytes instead of three.
            self._buf = b""
            if not (body.startswith(b"data: {") and self._token_event(body, rec)):
                self._event(body[:-2], rec)
            return
        if b"\r" in body:
            body = body.replace(b"\r\n", b"\n")  # SSE allows CRLF; most servers send LF
        *events, self._buf = body.split(b"\n\n")
        for event in events:
            if not (event.startswith(b"data: {") and b"\n" not in event and self._token_event(event, rec)):
                self._event(event, rec)

    def _buffered_end(self) -> bytes:
        """The last three bytes buffered (pieces may be shorter than that)."""
        end = b""
        for piece in reversed(self._more):
            end = piece + end
            if len(end) >= 3:
                return end[-3:]
        return (self._buf + end)[-3:]

    def on_message_complete(self) -> None:
        rec = self._record
        if rec is None:
            return
        if self._more:
            self._buf = b"".join((self._buf, *self._more))
            self._more = []
        if self._buf.strip():
            self._event(self._buf.rstrip(b"\n"), rec)  # a last event without its blank line
            self._buf = b""
        rec.done = self._now
        if rec.status != 200:
            text = self._err_body.decode("utf-8", "replace").strip()
            self._finish(f"http_{rec.status}", f"HTTP {rec.status}: {text[:500]}")
        elif not rec.chunks and rec.error_kind is None:
            self._finish("malformed_stream", "the stream ended without a token-carrying event")
        else:
            self._finish(rec.error_kind, rec.error)

    # SSE

    def _token_event(self, event: bytes, rec: RequestRecord) -> bool:
        """The fast path for the event nearly every chunk is: a `data:` line (no other line) of JSON with a
        non-empty `choices` list, not an error, carrying either no usage or continuous usage's running count.
        At C=1024 x 10 ms this runs 100k times a second, and each scan of the ~250 bytes costs about as much
        as a call, so it decides in one call what _event and _payload decide in two, scanning less: the
        `object` and `completion_tokens` keys are looked up where servers put them (first and last), which
        for one JSON object with one of each is the same answer. Anything else returns False, having
        changed nothing, and the general path decides it (role-only deltas and the usage-only chunk too)."""
        if event.startswith(b'data: {"error"'):
            return False
        at = event.find(b'"object":"')
        if (at >= 0 and event.startswith(b'error"', at + 10)) or b'"choices":[{' not in event:
            return False
        at = event.rfind(b'"completion_tokens":')
        if at < 0:  # no usage: one token if the delta has text
            if not _TEXT.search(event, 6):
                return False
            rec.chunks.append(self._now)
            rec.chunk_tokens.append(1)
            return True
        total = _INT.match(event, at + 20)
        if total is None or not (self._cum_tokens or not rec.chunks):
            return False  # not a number, or usage only on the last event: the general path's cases
        tokens = self._running_count(int(total[1]), event, rec)
        if tokens > 0:
            rec.chunks.append(self._now)
            rec.chunk_tokens.append(tokens)
        return True

    def _event(self, event: bytes, rec: RequestRecord) -> None:
        if event.startswith(b"data: {") and b"\n" not in event:
            self._payload(event[6:], rec)  # the common case: one `data:` line carrying JSON
            return
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):  # comments, `event:` and `id:` lines carry no tokens
                self._payload(line[5:].strip(), rec)

    def _payload(self, payload: bytes, rec: RequestRecord) -> None:
        if not payload.startswith(b"{"):
            if payload == b"[DONE]":
                self._done_seen = True
            elif payload:
                rec.error_kind, rec.error = "malformed_stream", f"not a JSON event: {payload[:200]!r}"
            return
        if payload.startswith(b'{"error"') or b'"object":"error"' in payload:
            rec.error_kind, rec.error = "stream_error", payload[:500].decode("utf-8", "replace")
            return
        at = payload.find(b'"completion_tokens":')
        total = int(_INT.match(payload, at + 20).group(1)) if at >= 0 else None  # type: ignore[union-attr]
        if b'"choices":[]' in payload or (b'"choices": [' in payload and _EMPTY_CHOICES.search(payload)):
            if total is not None:  # the trailing usage-only chunk
                rec.completion_tokens = total
                self._prompt_tokens(payload, rec)
            return
        if total is not None and (self._cum_tokens or not rec.chunks):
            tokens = self._running_count(total, payload, rec)
            if tokens <= 0:
                return
        elif total is not None:
            # usage only on the last token's event (transformers serve): the total, not this event's share
            rec.completion_tokens = total
            self._prompt_tokens(payload, rec)
            if not _TEXT.search(payload):
                return
            tokens = 1
        elif _TEXT.search(payload):
            tokens = 1
        else:
            return  # a role-only or empty delta: no token yet
        rec.chunks.append(self._now)
        rec.chunk_tokens.append(tokens)

    def _running_count(self, total: int, payload: bytes, rec: RequestRecord) -> int:
        """Continuous usage (it came with the first token): the running count says how many tokens this
        event carried. Keeps the count and the request's totals; returns this event's share."""
        tokens, self._cum_tokens, rec.completion_tokens = total - self._cum_tokens, total, total
        if rec.prompt_tokens is None:
            self._prompt_tokens(payload, rec)
        return tokens

    @staticmethod
    def _prompt_tokens(payload: bytes, rec: RequestRecord) -> None:
        p = _PROMPT.search(payload)
        if p:
            rec.prompt_tokens = int(p.group(1))

    # request lifecycle

    def start(self, rec: RequestRecord, head: bytes, body: bytes, timeout: float) -> asyncio.Future[RequestRecord]:
        assert self.transport is not None and self._record is None
        self._record = rec
        self._future = self.loop.create_future()
        self._buf = self._err_body = b""
        self._more = []
        self._got_bytes = self._done_seen = False
        self._cum_tokens = 0
        self._parser = httptools.HttpResponseParser(self)
        self._timer = self.loop.call_later(timeout, self._timeout, timeout)
        rec.sent = time.perf_counter()
        self.transport.write(head + body)
        return self._future

    def _timeout(self, seconds: float) -> None:
        self._fail("timeout", f"no complete response within {seconds:g} s")
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, kind: str, message: str) -> None:
        rec = self._record
        if rec is None:
            return
        rec.done = rec.done or time.perf_counter()
        self._finish(kind, message)
        if self.transport is not None and not self.closed:
            self.transport.abort()  # the connection is in an unknown state: never reuse it

    def _finish(self, kind: str | None, message: str | None) -> None:
        rec, fut = self._record, self._future
        self._record = self._future = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.idle_since = time.monotonic()
        if rec is None or fut is None:
            return
        rec.error_kind, rec.error = kind, message
        if not fut.done():
            fut.set_result(rec)
