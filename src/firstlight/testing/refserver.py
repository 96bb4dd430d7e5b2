"""A reference streaming server whose timing is known, for testing benchmark clients.

`python -m firstlight.testing.refserver --port 8100 --ttft-ms 50 --itl-ms 10`

It speaks the OpenAI completions and chat streaming API: one token per SSE event (or
--tokens-per-chunk), exactly `max_tokens` tokens, an optional usage chunk, `data: [DONE]`. Token k
of a request is due at arrival + TTFT + k x ITL on an absolute schedule (no drift), and the server
records when it really wrote each event. `GET /truth` returns what it measured since the last call
(TTFT, ITL, TPOT percentiles and its own lateness), so a client's numbers can be compared with the
truth. One timer serves every stream (a heap of due times), so it handles ~100k events/s on a core.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

DEFAULT_TTFT_MS = 50.0
DEFAULT_ITL_MS = 10.0


@dataclass
class Truth:
    arrivals: list[float] = field(default_factory=list)
    first_writes: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    tpots: list[float] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    tokens: int = 0
    requests: int = 0

    def report(self) -> dict[str, Any]:
        def pct(values: list[float]) -> dict[str, float] | None:
            if not values:
                return None
            arr = np.asarray(values) * 1000
            p50, p90, p99 = np.percentile(arr, [50, 90, 99])
            return {
                "p50": float(p50),
                "p90": float(p90),
                "p99": float(p99),
                "mean": float(arr.mean()),
                "n": int(arr.size),
            }

        ttft = [f - a for a, f in zip(self.arrivals, self.first_writes, strict=False)]
        return {
            "requests": self.requests,
            "tokens": self.tokens,
            "ttft_ms": pct(ttft),
            "itl_ms": pct(self.gaps),
            "tpot_ms": pct(self.tpots),
            "lateness_ms": pct(self.lateness),
        }


@dataclass
class Stream:
    conn: ServerConnection
    arrival: float
    n_tokens: int
    chat: bool
    usage: bool
    continuous: bool
    prompt_tokens: int
    sent: int = 0
    last_write: float = 0.0
    first_write: float = 0.0
    head: dict[int, bytes] = field(default_factory=dict)
    response_head: bytes = b""


class Server:
    def __init__(self, ttft: float, itl: float, tokens_per_chunk: int = 1) -> None:
        self.ttft, self.itl, self.per_chunk = ttft, itl, tokens_per_chunk
        self.truth = Truth()
        self._heap: list[tuple[float, int, Stream]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self.loop = asyncio.get_event_loop()

    def schedule(self, stream: Stream) -> None:
        self._push(stream.arrival + self.ttft, stream)

    def _push(self, due: float, stream: Stream) -> None:
        heapq.heappush(self._heap, (due, next(self._seq), stream))
        if self._timer is None or due < self._timer_due:
            self._arm(due)

    def _arm(self, due: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = due
        # loop.time() and perf_counter() share CLOCK_MONOTONIC on Linux; convert anyway.
        self._timer = self.loop.call_at(self.loop.time() + (due - time.perf_counter()), self._tick)

    def _tick(self) -> None:
        self._timer = None
        now = time.perf_counter()
        heap = self._heap
        while heap and heap[0][0] <= now + 0.0002:
            due, _, stream = heapq.heappop(heap)
            if stream.conn.closed:
                continue
            try:
                self._write_token(stream, due)
            except Exception as e:  # one broken stream must not stop the clock for the others
                print(f"stream failed: {e!r}", flush=True)
                stream.conn.transport.abort()
                continue
            if stream.sent < stream.n_tokens:
                self._push_nowake(due + self.itl, stream)
            now = time.perf_counter()
        if heap:
            self._arm(heap[0][0])

    def _push_nowake(self, due: float, stream: Stream) -> None:
        heapq.heappush(self._heap, (due, next(self._seq), stream))

    def _write_token(self, s: Stream, due: float) -> None:
        k = min(self.per_chunk, s.n_tokens - s.sent)
        s.sent += k
        last = s.sent >= s.n_tokens
        if not last:
            # The hot path: one pre-built event with its running count; ~100k of these a second.
            if s.continuous:
                data = s.head[k] + b'%d,"total_tokens":%d}}\n\n' % (s.sent, s.prompt_tokens + s.sent)
            else:
                data = s.head[k]
        else:
            data = self._last_events(s, k)
        frame = b"%x\r\n%s\r\n" % (len(data), data)
        if s.response_head:
            frame = s.response_head + frame
            s.response_head = b""
        if last:
            frame += b"0\r\n\r\n"
        now = time.perf_counter()
        s.conn.transport.write(frame)
        t = self.truth
        t.lateness.append(now - due)
        t.tokens += k
        if s.first_write == 0.0:
            s.first_write = now
            t.arrivals.append(s.arrival)
            t.first_writes.append(now)
        else:
            t.gaps.append(now - s.last_write)
        s.last_write = now
        if last:
            t.requests += 1
            if s.n_tokens > 1:
                t.tpots.append((now - s.first_write) / (s.n_tokens - 1))

    @staticmethod
    def _last_events(s: Stream, k: int) -> bytes:
        obj, text = ("chat.completion.chunk", " tok" * k) if s.chat else ("text_completion", " tok" * k)
        choice = (
            f'{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":"length"}}'
            if s.chat
            else f'{{"index":0,"text":"{text}","finish_reason":"length"}}'
        )
        usage = (
            (
                f',"usage":{{"prompt_tokens":{s.prompt_tokens},"completion_tokens":{s.sent},'
                f'"total_tokens":{s.prompt_tokens + s.sent}}}'
            )
            if s.continuous
            else ""
        )
        payload = f'data: {{"id":"cmpl","object":"{obj}","choices":[{choice}]{usage}}}\n\n'
        if s.usage:
            payload += (
                f'data: {{"id":"cmpl","object":"{obj}","choices":[],"usage":{{"prompt_tokens":'
                f'{s.prompt_tokens},"completion_tokens":{s.n_tokens},'
                f'"total_tokens":{s.prompt_tokens + s.n_tokens}}}}}\n\n'
            )
        return (payload + "data: [DONE]\n\n").encode()


def event_heads(chat: bool, continuous: bool, prompt_tokens: int, per_chunk: int) -> dict[int, bytes]:
    """Every non-final event up to its usage count, built once per stream (k = tokens in the event)."""
    out = {}
    for k in range(1, per_chunk + 1):
        text = " tok" * k
        if chat:
            obj, choice = "chat.completion.chunk", f'{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}'
        else:
            obj, choice = "text_completion", f'{{"index":0,"text":"{text}","finish_reason":null}}'
        head = f'data: {{"id":"cmpl","object":"{obj}","choices":[{choice}]'
        if continuous:
            out[k] = (head + f',"usage":{{"prompt_tokens":{prompt_tokens},"completion_tokens":').encode()
        else:
            out[k] = (head + "}\n\n").encode()
    return out


class ServerConnection(asyncio.Protocol):
    def __init__(self, server: Server) -> None:
        self.server = server
        self.buf = b""
        self.closed = False
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        arrival = time.perf_counter()
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buf) < head_end + 4 + length:
                return
            body = self.buf[head_end + 4 : head_end + 4 + length]
            self.buf = self.buf[head_end + 4 + length :]
            self.handle(head.split("\r\n", 1)[0], body, arrival)

    def respond(self, status: str, body: bytes, content_type: str = "application/json") -> None:
        self.transport.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: keep-alive\r\n\r\n".encode()
            + body
        )

    def handle(self, request_line: str, body: bytes, arrival: float) -> None:
        method, path, _ = ([*request_line.split(" "), "", ""])[:3]
        if method == "GET" and path == "/health":
            self.respond("200 OK", b"")
        elif method == "GET" and path.startswith("/truth"):
            report = self.server.truth.report()
            self.server.truth = Truth()
            self.respond("200 OK", json.dumps(report).encode())
        elif method == "GET" and path == "/v1/models":
            self.respond("200 OK", b'{"object":"list","data":[{"id":"ref","object":"model"}]}')
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            self.start_stream(path.endswith("chat/completions"), body, arrival)
        else:
            self.respond("404 Not Found", b'{"error":"not found"}')

    def start_stream(self, chat: bool, body: bytes, arrival: float) -> None:
        try:
            req = json.loads(body)
            n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        except (ValueError, TypeError):
            self.respond("400 Bad Request", b'{"error":"bad json"}')
            return
        if not req.get("stream"):
            self.respond("400 Bad Request", b'{"error":"only streaming is served"}')
            return
        opts = req.get("stream_options") or {}
        prompt = req.get("prompt") or json.dumps(req.get("messages") or "")
        # X-Arrival: when the server read the request, on CLOCK_MONOTONIC (time.perf_counter), which a client
        # on the same machine shares: it splits a client's TTFT into the time to reach the server and the rest.
        # The head goes out with the first token (one send, not two): a burst of requests is read sooner.
        head = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: keep-alive\r\nX-Arrival: %.6f\r\n\r\n" % arrival
        )
        continuous = bool(opts.get("continuous_usage_stats"))
        prompt_tokens = max(len(str(prompt)) // 4, 1)
        stream = Stream(
            self,
            arrival,
            max(n, 1),
            chat,
            bool(opts.get("include_usage")),
            continuous,
            prompt_tokens,
            head=event_heads(chat, continuous, prompt_tokens, self.server.per_chunk),
            response_head=head,
        )
        self.server.schedule(stream)


async def serve(
    host: str, port: int, ttft_ms: float, itl_ms: float, tokens_per_chunk: int = 1, ready: asyncio.Event | None = None
) -> None:
    server = Server(ttft_ms / 1000, itl_ms / 1000, tokens_per_chunk)
    srv = await asyncio.get_running_loop().create_server(lambda: ServerConnection(server), host, port, backlog=4096)
    if ready is not None:
        ready.set()
    print(f"reference server on http://{host}:{port} (TTFT {ttft_ms} ms, ITL {itl_ms} ms)", flush=True)
    async with srv:
        await srv.serve_forever()


def timing_args(port: int, ttft_ms: float, itl_ms: float, tokens_per_chunk: int) -> list[str]:
    """The command-line options a reference server (this one, or perf's C truth server) is started with."""
    return [
        "--port",
        str(port),
        "--ttft-ms",
        str(ttft_ms),
        "--itl-ms",
        str(itl_ms),
        "--tokens-per-chunk",
        str(tokens_per_chunk),
    ]


def wait_healthy(port: int, deadline: float) -> bool:
    """Whether a server on 127.0.0.1:port answers /health with 200 before `deadline` (time.monotonic)."""
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1, trust_env=False).status_code == 200:
                return True
        except httpx.HTTPError:
            time.sleep(0.05)
    return False


def start_process(
    port: int,
    ttft_ms: float = DEFAULT_TTFT_MS,
    itl_ms: float = DEFAULT_ITL_MS,
    tokens_per_chunk: int = 1,
    prefix: Sequence[str] = (),
    timeout: float = 20.0,
) -> subprocess.Popen:
    """The server in a process of its own (after `prefix`, e.g. `taskset -c 0`), returned once it answers."""
    proc = subprocess.Popen(
        [
            *prefix,
            sys.executable,
            "-m",
            "firstlight.testing.refserver",
            *timing_args(port, ttft_ms, itl_ms, tokens_per_chunk),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if wait_healthy(port, time.monotonic() + timeout):
        return proc
    proc.kill()
    raise RuntimeError(f"the reference server did not answer on port {port} within {timeout:g} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--ttft-ms", type=float, default=DEFAULT_TTFT_MS)
    parser.add_argument("--itl-ms", type=float, default=DEFAULT_ITL_MS)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    args = parser.parse_args()
    import uvloop

    uvloop.run(serve(args.host, args.port, args.ttft_ms, args.itl_ms, args.tokens_per_chunk))


if __name__ == "__main__":
    main()
