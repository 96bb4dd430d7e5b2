"""A streaming server that misbehaves on purpose, one way per run, for fault-injection tests of `bench`.

`python -m firstlight.testing.faultserver --port 8200 --fault close_mid_chunk`

It answers `/v1/models` and `/health` like a server, then every completion request with its fault:

- `http500`: HTTP 500 with an error body;
- `garbage`: a 200 event stream whose events are not JSON;
- `close_mid_chunk`: a good event, then half of a chunk, then the connection closed;
- `huge_chunk`: a good stream whose one token event carries 10 MB of text;
- `slowloris`: the response head, then one byte a second, never a whole event;
- `reset`: the connection reset (RST) as soon as the request is read;
- `no_done`: every token, then neither `[DONE]` nor the stream's end: the connection left open.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct

FAULTS = ("http500", "garbage", "close_mid_chunk", "huge_chunk", "slowloris", "reset", "no_done")
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
HUGE = 10 * 1024 * 1024


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def token_event(text: str, n: int) -> bytes:
    event = {"choices": [{"index": 0, "text": text}], "usage": {"prompt_tokens": 4, "completion_tokens": n}}
    return chunk(f"data: {json.dumps(event)}\n\n".encode())


async def read_request(reader: asyncio.StreamReader) -> tuple[str, bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    body = await reader.readexactly(length) if length else b""
    return head.split(b"\r\n", 1)[0].decode("latin-1"), body


def respond(writer: asyncio.StreamWriter, status: str, body: bytes) -> None:
    writer.write(
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    )


async def stream_fault(fault: str, writer: asyncio.StreamWriter, n: int) -> bool:
    """Write the fault; returns whether the connection may serve another request."""
    if fault == "http500":
        respond(writer, "500 Internal Server Error", b'{"error":{"message":"injected: the engine failed"}}')
        return True
    if fault == "reset":
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
        return False
    writer.write(HEAD)
    if fault == "garbage":
        writer.write(chunk(b"data: \x00\xff{not json at all\n\n") + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        return True
    if fault == "close_mid_chunk":
        whole = token_event(" a", 1)
        writer.write(whole + token_event(" b", 2)[:10])
        await writer.drain()
        writer.close()
        return False
    if fault == "huge_chunk":
        writer.write(token_event(" x" * (HUGE // 2), 1))
        for k in range(2, n + 1):
            writer.write(token_event(" t", k))
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        return True
    if fault == "slowloris":
        for byte in token_event(" a", 1):
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(1.0)
        return False
    if fault == "no_done":
        for k in range(1, n + 1):
            writer.write(token_event(" t", k))
        await writer.drain()
        await asyncio.sleep(3600)
        return False
    raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")


async def handle(fault: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            request = await read_request(reader)
            if request is None:
                return
            line, body = request
            if line.startswith("GET /v1/models"):
                respond(writer, "200 OK", b'{"object":"list","data":[{"id":"faulty","object":"model"}]}')
            elif line.startswith("GET /health"):
                respond(writer, "200 OK", b"")
            elif line.startswith("POST /v1/"):
                try:
                    n = int(json.loads(body or b"{}").get("max_tokens") or 8)
                except ValueError:
                    n = 8
                if not await stream_fault(fault, writer, max(n, 1)):
                    return
            else:
                respond(writer, "404 Not Found", b'{"error":"not found"}')
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        return
    finally:
        if not writer.transport.is_closing():
            writer.close()


async def serve(host: str, port: int, fault: str) -> None:
    server = await asyncio.start_server(lambda r, w: handle(fault, r, w), host, port, limit=2**20)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8200)
    parser.add_argument("--fault", choices=FAULTS, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.host, args.port, args.fault))


if __name__ == "__main__":
    main()
