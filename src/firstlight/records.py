"""One benchmark request as measured. The client only records timestamps; the metric math is in
`benchmark.metrics`. It sits at the bottom, beside the store that keeps it (row mapping in `store.py`)."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field


@dataclass
class RequestRecord:
    """All times are seconds on the client's monotonic clock (time.perf_counter).

    `chunks` are the arrival times of the SSE events that carried tokens, one entry per event; events
    that arrived in the same read share its timestamp. `chunk_tokens` is the number of tokens each
    event carried where the server says so (cumulative usage per chunk), else 1 per event.
    """

    index: int
    scheduled: float  # when the schedule wanted it sent (closed loop: the send time)
    sent: float = 0.0
    chunks: array = field(default_factory=lambda: array("d"))  # type: ignore[type-arg]
    chunk_tokens: array = field(default_factory=lambda: array("i"))  # type: ignore[type-arg]
    done: float = 0.0  # the stream ended ([DONE], or the body closed)
    status: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # from the server's usage
    error_kind: str | None = None  # http_<code> | timeout | connection_reset | connection_refused | malformed_stream
    error: str | None = None
    warmup: bool = False

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def ttft(self) -> float | None:
        return self.chunks[0] - self.sent if self.chunks else None

    @property
    def e2e(self) -> float | None:
        return self.chunks[-1] - self.sent if self.chunks else None

    @property
    def output_tokens(self) -> int:
        """N: the server's usage.completion_tokens when it sent one, else the tokens the chunks carried."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(self.chunk_tokens) if self.chunk_tokens else len(self.chunks)

    @property
    def tpot(self) -> float | None:
        """(E2E − TTFT) / (N − 1): the mean time per output token after the first; None when N ≤ 1."""
        n = self.output_tokens
        if not self.chunks or n <= 1:
            return None
        return (self.chunks[-1] - self.chunks[0]) / (n - 1)

    def itls(self) -> list[float]:
        """Gaps between consecutive token-carrying chunks of this request."""
        c = self.chunks
        return [c[i] - c[i - 1] for i in range(1, len(c))]
