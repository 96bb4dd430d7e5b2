"""Metric math on hand-built records."""

from __future__ import annotations

from array import array

import pytest

from firstlight.benchmark.config import parse_slo
from firstlight.benchmark.metrics import distribution, summarise
from firstlight.records import RequestRecord


def rec(
    i: int,
    sent: float,
    chunks: list[float],
    tokens: list[int] | None = None,
    n: int | None = None,
    error: str | None = None,
    scheduled: float | None = None,
) -> RequestRecord:
    r = RequestRecord(i, scheduled if scheduled is not None else sent, sent=sent)
    r.chunks = array("d", chunks)
    r.chunk_tokens = array("i", tokens if tokens is not None else [1] * len(chunks))
    r.completion_tokens = n
    r.done = (chunks[-1] if chunks else sent) + 0.001
    r.status = 200 if error is None else 500
    if error:
        r.error_kind, r.error = error, f"{error} happened"
    return r


def test_ttft_tpot_itl_with_multi_token_chunks() -> None:
    # 3 chunks carrying 1 + 2 + 2 tokens (speculative decoding): N = 5 from the server's usage
    r = rec(0, 10.0, [10.1, 10.2, 10.3], tokens=[1, 2, 2], n=5)
    assert r.ttft == pytest.approx(0.1)
    assert r.e2e == pytest.approx(0.3)
    assert r.tpot == pytest.approx(0.2 / 4)  # (E2E − TTFT)/(N − 1), not per chunk
    assert r.itls() == pytest.approx([0.1, 0.1])
    s = summarise([r])
    assert s["tokens_per_chunk"] == {"1": 1, "2": 2}
    assert s["mean_tokens_per_chunk"] == pytest.approx(5 / 3)
    assert s["output_tokens"] == 5


def test_n_from_usage_beats_chunk_count_and_n1_has_no_tpot() -> None:
    one = rec(0, 0.0, [0.05], n=1)
    assert one.tpot is None and one.output_tokens == 1
    no_usage = rec(1, 0.0, [0.1, 0.2, 0.3])
    assert no_usage.output_tokens == 3  # without usage, the chunks' token counts
    s = summarise([one, no_usage], slo=parse_slo("ttft=60,tpot=50"))
    assert s["tpot_ms"]["n"] == 1  # the N = 1 request has no TPOT
    # goodput: the N = 1 request meets the TPOT SLO (counted as 0); the other misses TTFT (100 ms > 60)
    assert s["good_fraction"] == pytest.approx(0.5)


def test_errors_counted_by_kind_with_first_messages() -> None:
    rs = [
        rec(0, 0.0, [0.1, 0.2], n=2),
        rec(1, 0.0, [], error="http_500"),
        rec(2, 0.0, [], error="http_500"),
        rec(3, 0.0, [0.1], error="connection_reset"),
    ]
    s = summarise(rs)
    assert s["completed"] == 1 and s["failed"] == 3
    assert s["errors"]["http_500"]["count"] == 2 and s["errors"]["http_500"]["first"][0] == "http_500 happened"
    assert s["errors"]["connection_reset"]["count"] == 1
    assert s["ttft_ms"]["n"] == 1  # failed requests do not enter latency figures


def test_throughput_over_wall_time_and_warmup_excluded() -> None:
    a = rec(0, 100.0, [100.5, 101.0], n=10)
    b = rec(1, 100.5, [101.5, 102.0], n=10)
    w = rec(2, 95.0, [96.0], n=100)
    w.warmup = True
    s = summarise([a, b, w])
    assert s["completed"] == 2
    assert s["duration_s"] == pytest.approx(2.001)
    assert s["output_throughput_tok_s"] == pytest.approx(20 / 2.001)


def test_rate_mode_measures_from_the_schedule() -> None:
    late = rec(0, 1.0, [1.1, 1.2], n=2, scheduled=0.4)  # waited 0.6 s for a client slot
    s = summarise([late], rate_mode=True)
    assert s["ttft_ms"]["p50"] == pytest.approx(100)
    assert s["ttft_from_schedule_ms"]["p50"] == pytest.approx(700)
    assert s["send_lag_ms"]["p50"] == pytest.approx(600)


def test_distribution_and_slo_parsing() -> None:
    d = distribution([0.001 * i for i in range(1, 101)])
    assert d["p50"] == pytest.approx(50.5) and d["p99"] == pytest.approx(99.01) and d["n"] == 100
    assert distribution([]) is None
    assert parse_slo("ttft=500, tpot=50") == {"ttft": 0.5, "tpot": 0.05}
    with pytest.raises(ValueError, match="ttft=500"):
        parse_slo("latency=5")
