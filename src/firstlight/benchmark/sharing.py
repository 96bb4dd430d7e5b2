"""How one level's load is shared between worker processes (`--workers`), and how many `auto` starts.

Pure functions over numbers; the processes are in `fleet` (the parent's side) and `worker` (each child).

- Closed loop: the concurrency is split as evenly as possible, and the request indexes are dealt
  round-robin over every worker's streams, so each worker's share is in proportion to its streams and all
  of them run out of work together.
- Open loop: one arrival schedule, computed once for the level (the same seed gives the same schedule
  as one process), dealt round-robin with each request keeping its own arrival time; the workers wait for
  the same absolute instants, so a Poisson schedule stays Poisson. A --max-concurrency cap is split like
  a closed loop's streams.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from firstlight.records import RequestRecord

if TYPE_CHECKING:
    from firstlight.benchmark.config import LevelSpec

# Chunks (token-carrying SSE events) per second one worker receives at 60% of one core. Measured with the
# reference server pinned to one core (`taskset -c 0`, TTFT 50 ms, ITL 10 ms, 128 tokens) and `bench
# --workers 2` pinned to the other, at C=96..192 (48..96 streams a worker) while the server kept its
# schedule (lateness p99 under 12 ms): each worker spent 35,000-47,000 chunks per CPU-second of its own
# (getrusage), 21-29 µs a chunk for its reads, HTTP parsing, SSE classification, recording and piping
# (a 2-core machine shared with other work: indicative). 60% of the lower end is the budget. At higher
# loads a late server's chunks share reads and cost less each, so the estimate errs towards one worker
# more, never towards a client-limited level.
WORKER_CHUNKS_PER_S = 21_000.0
# The inter-token latency assumed when no warm-up measured one: a fast decode, so `auto` errs towards
# more workers rather than a client-limited level.
DEFAULT_ITL_S = 0.01


@dataclass(frozen=True)
class Share:
    """One worker's part of a level."""

    indices: list[int]  # the request indexes it sends, in order
    streams: int | None  # closed loop: requests in flight; open loop: its part of the cap (None: no cap)
    offsets: list[float] | None = None  # open loop: each index's arrival, in seconds from the level's start


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` as `parts` whole numbers differing by at most one, the larger first: 10, 4 → [3, 3, 2, 2]."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def deal_by_streams(indices: Sequence[int], streams: Sequence[int]) -> list[list[int]]:
    """Indexes dealt round-robin over every worker's streams (first streams, then second streams, ...):
    streams [2, 1] deal 0, 1, 2, 3, 4, 5 as [0, 2, 3, 5] and [1, 4]."""
    seats = [w for depth in range(max(streams, default=0)) for w, s in enumerate(streams) if depth < s]
    dealt: list[list[int]] = [[] for _ in streams]
    for k, index in enumerate(indices):
        dealt[seats[k % len(seats)]].append(index)
    return dealt


def closed_shares(indices: Sequence[int], concurrency: int, workers: int) -> list[Share]:
    """A closed loop's shares; a worker left without streams or requests gets none (and is not started)."""
    streams = [s for s in split_evenly(concurrency, workers) if s > 0]
    dealt = deal_by_streams(indices, streams)
    return [Share(mine, s) for mine, s in zip(dealt, streams, strict=True) if mine]


def open_shares(indices: Sequence[int], offsets: Sequence[float], cap: int | None, workers: int) -> list[Share]:
    """An open loop's shares: request k (and its arrival offset) goes to worker k mod n; a cap smaller than
    the workers leaves fewer workers."""
    caps: list[int | None] = [c for c in split_evenly(cap, workers) if c > 0] if cap else [None] * workers
    n = len(caps)
    return [Share(list(indices[w::n]), caps[w], list(offsets[w::n])) for w in range(n) if len(indices) > w]


def expected_chunk_rate(level: LevelSpec, output_len: int, itl_s: float | None) -> float:
    """Chunks per second the client will receive at this level: concurrency / ITL for a closed loop; for an
    open loop the arrival rate x output tokens (one token a chunk, the most), no more than its cap / ITL."""
    itl = itl_s if itl_s and itl_s > 0 else DEFAULT_ITL_S
    if level.rate is None:
        return (level.concurrency or 1) / itl
    rate = level.rate * output_len
    return min(rate, level.concurrency / itl) if level.concurrency else rate


def free_cores() -> int:
    """Cores this process may run on, less one for the parent (which merges and stores), at least one."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity outside Linux
        usable = os.cpu_count() or 1
    return max(usable - 1, 1)


def auto_workers(chunk_rate: float, free: int) -> int:
    """`--workers auto`: enough workers that each receives at most `WORKER_CHUNKS_PER_S` (what one worker
    handles at 60% of a core, leaving headroom for bursts so its event loop still wakes on time), never
    more than `free` cores (`free_cores`), at least one. `chunk_rate` is the level's expected rate
    (`expected_chunk_rate`, from the warm-up's ITL). One worker means this process, as without --workers:
    C=64 at a 10 ms ITL (6,400 chunks/s) stays in one process, C=1024 (102,400/s) takes 5 workers."""
    return max(1, min(math.ceil(chunk_rate / WORKER_CHUNKS_PER_S), free))


def median_itl(records: Sequence[RequestRecord]) -> float | None:
    """The median gap between token-carrying chunks over these requests (the warm-up's), or None."""
    gaps = [gap for r in records if r.ok for gap in r.itls()]
    return float(np.median(gaps)) if gaps else None
