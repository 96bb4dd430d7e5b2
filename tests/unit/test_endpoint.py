"""The OpenAI-compatible requests firstlight sends: one module builds them for the benchmark, its
workload and the launch probe."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from firstlight.benchmark import endpoint
from firstlight.benchmark.workload import Prompt, Workload
from firstlight.errors import BenchAborted


def test_paths_per_kind() -> None:
    assert endpoint.path("completions") == "/v1/completions"
    assert endpoint.path("chat") == "/v1/chat/completions"
    with pytest.raises(ValueError, match="completions, chat"):
        endpoint.path("embeddings")


def test_streamed_completion_asks_for_usage_on_every_chunk() -> None:
    body = endpoint.request_body("completions", "m", "hello", 16, temperature=0.0, ignore_eos=True)
    assert body == {
        "model": "m",
        "max_tokens": 16,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": 0.0,
        "ignore_eos": True,
        "prompt": "hello",
    }


def test_chat_carries_one_user_message() -> None:
    body = endpoint.request_body("chat", "m", "hello", 4)
    assert body["messages"] == [{"role": "user", "content": "hello"}] and "prompt" not in body


def test_unstreamed_request_has_no_stream_options() -> None:
    body = endpoint.request_body("chat", "m", "hi", 1, stream=False)
    assert body == {"model": "m", "max_tokens": 1, "stream": False, "messages": [{"role": "user", "content": "hi"}]}


def test_probe_body_is_one_token_with_final_usage() -> None:
    # what launch.probe sends: the request it has always sent, now built here
    body = endpoint.request_body("completions", "m", "Hello", 1, usage_per_chunk=False, temperature=0)
    assert body == {
        "model": "m",
        "prompt": "Hello",
        "max_tokens": 1,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_workload_bodies_are_encoded_once_and_compact() -> None:
    workload = Workload([Prompt("a b", 2, 8), Prompt("c", 1, 3)], "approximate (words)", "synthetic")
    bodies = workload.bodies("m", "chat", {"ignore_eos": True})
    assert b", " not in bodies[0] and b": " not in bodies[0]
    first, second = (json.loads(b) for b in bodies)
    assert first == endpoint.request_body("chat", "m", "a b", 8, ignore_eos=True)
    assert second["max_tokens"] == 3 and second["messages"][0]["content"] == "c"


class Server:
    """A constructed server: /v1/models lists one model; completions reject `ignore_eos` when told to."""

    def __init__(self, reject_ignore_eos: bool) -> None:
        seen: list[dict[str, object]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "tiny-llama", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                seen.append({"path": self.path, **body})
                if reject_ignore_eos and "ignore_eos" in body:
                    self._send(422, {"detail": "Extra inputs are not permitted: ignore_eos"})
                else:
                    self._send(200, {"choices": [{"text": "x"}]})

            def _send(self, status: int, data: object) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: object) -> None:
                pass

        self.seen = seen
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def serve() -> Iterator[Callable[[bool], Server]]:
    servers: list[Server] = []

    def start(reject_ignore_eos: bool) -> Server:
        servers.append(Server(reject_ignore_eos))
        return servers[-1]

    yield start
    for server in servers:
        server.httpd.shutdown()


def test_a_rejected_ignore_eos_is_dropped(serve: Callable[[bool], Server]) -> None:
    strict = serve(True)
    wanted = {"temperature": 0.0, "ignore_eos": True}
    assert endpoint.accepted_extras(strict.url, "chat", "m", wanted, timeout=5) == {"temperature": 0.0}
    (asked,) = strict.seen
    assert asked["path"] == "/v1/chat/completions" and asked["max_tokens"] == 1 and asked["stream"] is False


def test_an_accepted_ignore_eos_is_kept(serve: Callable[[bool], Server]) -> None:
    lenient = serve(False)
    wanted = {"temperature": 0.0, "ignore_eos": True}
    assert endpoint.accepted_extras(lenient.url, "completions", "m", wanted, timeout=5) == wanted
    assert lenient.seen[0]["path"] == "/v1/completions"
    assert endpoint.served_model(lenient.url) == "tiny-llama"


def test_an_unreachable_server_names_the_fix() -> None:
    with pytest.raises(BenchAborted, match="pass --model"):
        endpoint.served_model("http://127.0.0.1:1", timeout=2)
