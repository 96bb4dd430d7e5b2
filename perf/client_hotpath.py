"""The bench client's cost per streamed chunk, in process: StreamConnection's callbacks on recorded bytes.

Usage: python perf/client_hotpath.py [--requests 200] [--repeat 5] [--profile]

No sockets and no server: realistic response bytes (HTTP/1.1 head, chunked body, one SSE event per HTTP chunk
as vLLM and perf/truthserver write them) are cut into reads of one to three events, with some reads ending
mid-event as a socket may deliver them, and fed to StreamConnection.data_received the way the event loop
would. Streams: chat and completions, shaped like vLLM (role-only first delta, `created`/`model` fields,
usage-only last chunk) and like the truth server, with and without continuous usage stats, and the truth
server with four tokens a chunk. Every record is checked (tokens, usage, no error), so a faster parser that
miscounts fails here rather than reporting a number.

The peer, in the same process on the same reads: one timestamp per read, join with the previous tail, split
on b"\\n\\n" and count the pieces (what a client that counts events without decoding anything must do). The
ratio firstlight/peer says what parsing costs on top of that floor. Best of --repeat; --profile adds a
cProfile of one firstlight pass (sorted by own time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import random
import time
from dataclasses import dataclass

from timing import best_of

from firstlight.benchmark.client import StreamConnection, Target
from firstlight.records import RequestRecord

TOKENS = 128
PROMPT = 37
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass(frozen=True)
class Shape:
    name: str
    chat: bool
    vllm: bool  # vLLM's fields and role-only first chat delta, else the truth server's bytes
    continuous: bool
    per_chunk: int = 1


SHAPES = [
    Shape("vllm chat, continuous usage", chat=True, vllm=True, continuous=True),
    Shape("vllm chat", chat=True, vllm=True, continuous=False),
    Shape("vllm completions, continuous usage", chat=False, vllm=True, continuous=True),
    Shape("truthserver completions", chat=False, vllm=False, continuous=False),
    Shape("truthserver chat, continuous usage", chat=True, vllm=False, continuous=True),
    Shape("truthserver completions, 4 tokens/chunk, continuous", chat=False, vllm=False, continuous=True, per_chunk=4),
]


def usage(completion: int) -> dict:
    # vLLM's UsageInfo field order
    return {"prompt_tokens": PROMPT, "total_tokens": PROMPT + completion, "completion_tokens": completion}


def vllm_event(shape: Shape, text: str | None, sent: int, finish: str | None) -> dict:
    if shape.chat:
        delta = {"role": "assistant", "content": ""} if text is None else {"content": text}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}
        obj = "text_completion"
    ev: dict = {"id": "chatcmpl-9f0c2b7d4e", "object": obj, "created": 1767225600, "model": MODEL}
    ev["choices"] = [choice]
    if shape.continuous:
        ev["usage"] = usage(sent)
    return ev


def truth_event(shape: Shape, text: str, sent: int, finish: str | None) -> dict:
    # byte for byte the key order of perf/truthserver's put_events
    obj = "chat.completion.chunk" if shape.chat else "text_completion"
    body: dict = {"content": text} if shape.chat else {}
    choice = {"index": 0, "delta": body} if shape.chat else {"index": 0, "text": text}
    choice["finish_reason"] = finish
    ev: dict = {"id": "cmpl", "object": obj, "choices": [choice]}
    if shape.continuous:
        ev["usage"] = {"prompt_tokens": PROMPT, "completion_tokens": sent, "total_tokens": PROMPT + sent}
    return ev


def sse(ev: dict | str) -> bytes:
    data = ev if isinstance(ev, str) else json.dumps(ev, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def http_chunks(shape: Shape) -> list[bytes]:
    """One HTTP chunk per server write: each token event, the usage-only event and [DONE] with the last."""
    out = []
    if shape.vllm and shape.chat:
        out.append(sse(vllm_event(shape, None, 0, None)))
    sent = 0
    while sent < TOKENS:
        k = min(shape.per_chunk, TOKENS - sent)
        sent += k
        finish = "length" if sent == TOKENS else None
        make = vllm_event if shape.vllm else truth_event
        out.append(sse(make(shape, " tok" * k, sent, finish)))
    last = sse({"id": "cmpl", "object": "x", "choices": [], "usage": usage(TOKENS)}) + sse("[DONE]")
    out[-1] += last
    return [b"%x\r\n%s\r\n" % (len(c), c) for c in out] + [b"0\r\n\r\n"]


def reads_of(chunks: list[bytes], rng: random.Random) -> list[bytes]:
    """Cut a response into socket reads: mostly one to three events, a tenth of reads ending mid-event."""
    whole = HEAD + b"".join(chunks)
    cuts = [len(HEAD)]
    ends = [sum(len(c) for c in chunks[: i + 1]) + len(HEAD) for i in range(len(chunks))]
    i = 0
    while i < len(ends) - 1:
        i += rng.choice((1, 1, 1, 1, 2, 3))
        end = ends[min(i, len(ends) - 1)]
        if rng.random() < 0.1:
            end -= rng.randint(1, 40)
        if end > cuts[-1]:
            cuts.append(end)
    if cuts[-1] != len(whole):
        cuts.append(len(whole))
    return [whole[a:b] for a, b in zip([0, *cuts], cuts, strict=False)]


def streams(shape: Shape, n: int, seed: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    chunks = http_chunks(shape)
    return [reads_of(chunks, rng) for _ in range(n)]


def token_chunks(shape: Shape) -> int:
    return -(-TOKENS // shape.per_chunk)


def run_firstlight(all_reads: list[list[bytes]]) -> list[RequestRecord]:
    """Feed every stream through its own StreamConnection; returns the records."""
    loop = asyncio.new_event_loop()
    target = Target.from_url("http://h:1", "/v1/completions")
    head = target.request_head(2)
    records = []
    try:
        for reads in all_reads:
            conn = StreamConnection(loop)
            conn.connection_made(_FakeTransport())
            rec = RequestRecord(0, 0.0)
            conn.start(rec, head, b"{}", 60)
            feed = conn.data_received
            for data in reads:
                feed(data)
            records.append(rec)
    finally:
        loop.close()
    return records


def run_peer(all_reads: list[list[bytes]]) -> int:
    """The floor: one timestamp per read, the tail joined, split on blank lines, events counted."""
    now = time.perf_counter
    events = 0
    for reads in all_reads:
        buf = b""
        stamps = []
        for data in reads:
            stamps.append(now())
            *done, buf = (buf + data).split(b"\n\n")
            events += len(done)
    return events


class _FakeTransport(asyncio.Transport):
    def write(self, data: bytes) -> None:  # type: ignore[override]
        pass

    def abort(self) -> None:
        pass


def check(shape: Shape, records: list[RequestRecord]) -> None:
    for rec in records:
        assert rec.ok, (shape.name, rec.error_kind, rec.error)
        assert len(rec.chunks) == token_chunks(shape), (shape.name, len(rec.chunks))
        assert sum(rec.chunk_tokens) == TOKENS and rec.completion_tokens == TOKENS, shape.name
        assert rec.prompt_tokens == PROMPT, (shape.name, rec.prompt_tokens)


def profile(all_reads: list[list[bytes]]) -> str:
    prof = cProfile.Profile()
    prof.runcall(run_firstlight, all_reads)
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200, help="streams per shape (128 tokens each)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile one pass over every shape")
    args = parser.parse_args()
    print(f"{'stream shape':<54} {'firstlight':>12} {'peer':>10} {'ratio':>7}")
    total_fl = total_peer = 0.0
    total_chunks = 0
    everything = []
    for i, shape in enumerate(SHAPES):
        all_reads = streams(shape, args.requests, seed=i)
        everything += all_reads
        check(shape, run_firstlight(all_reads))
        n = token_chunks(shape) * args.requests  # token-carrying chunks: what a client exists to time
        t_fl = best_of(lambda r=all_reads: run_firstlight(r), args.repeat)
        t_peer = best_of(lambda r=all_reads: run_peer(r), args.repeat)
        total_fl, total_peer, total_chunks = total_fl + t_fl, total_peer + t_peer, total_chunks + n
        print(f"{shape.name:<54} {t_fl / n * 1e6:>9.2f} µs {t_peer / n * 1e6:>7.2f} µs {t_fl / t_peer:>6.1f}x")
    print(
        f"{'all shapes':<54} {total_fl / total_chunks * 1e6:>9.2f} µs "
        f"{total_peer / total_chunks * 1e6:>7.2f} µs {total_fl / total_peer:>6.1f}x   (per token-carrying chunk)"
    )
    if args.profile:
        print(profile(everything))


if __name__ == "__main__":
    main()
