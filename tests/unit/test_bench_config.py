"""A run's configuration: option checking with messages that say how to fix them, the stored shape that
`--resume` reads back, and the arrival schedules."""

from __future__ import annotations

from itertools import islice
from pathlib import Path

import numpy as np
import pytest

from firstlight.benchmark import schedule
from firstlight.benchmark.config import BenchConfig, LevelSpec
from firstlight.errors import BenchError
from firstlight.store import Store

# The configuration a run stored before the benchmark package was split (`bench_runs.config`).
STORED = {
    "url": "http://127.0.0.1:8000",
    "model": "tiny-llama",
    "endpoint": "completions",
    "concurrency": [1, 4],
    "request_rates": [],
    "arrival": "poisson",
    "max_concurrency": None,
    "num_requests": 12,
    "duration": None,
    "warmup": 2,
    "input_len": 64,
    "output_len": 16,
    "dataset": None,
    "slo": {"ttft": 0.5},
    "label": "baseline",
    "timeout": 600.0,
    "temperature": 0.0,
    "seed": 0,
    "tokenizer_dir": None,
}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"concurrency": "1"}, "give exactly one of --url"),
        ({"url": "http://x:1", "launch": "spec.yaml"}, "give exactly one of --url"),
        ({"url": "http://x:1", "concurrency": "1", "request_rate": "2"}, "not both"),
        ({"url": "http://x:1", "concurrency": "a,b"}, "e.g. 1,8,64"),
        ({"url": "http://x:1", "concurrency": "0"}, "positive numbers"),
        ({"url": "http://x:1", "slo": "fast"}, "ttft=500"),
        ({"url": "http://x:1", "endpoint": "embeddings"}, "--endpoint must be completions or chat"),
        ({"url": "http://x:1", "arrival": "bursty"}, "--arrival must be poisson or constant"),
        ({"url": "http://x:1", "num_requests": 5, "duration": 2.0}, "--num-requests or --duration"),
        ({"url": "http://x:1", "dataset": "/no/such.jsonl"}, "no such file"),
        ({"url": "http://x:1", "output_len": 0}, "--output-len must be at least 1"),
        ({"url": "http://x:1", "workers": "0"}, "--workers '0': expected a number of processes"),
        ({"url": "http://x:1", "workers": "many"}, "1 or more"),
    ],
)
def test_bad_options_say_what_to_change(options: dict[str, object], message: str) -> None:
    with pytest.raises(BenchError, match=message):
        BenchConfig.from_options(**options)  # type: ignore[arg-type]


def test_options_become_levels() -> None:
    cfg = BenchConfig.from_options(url="http://x:1/", warmup=-3)
    assert cfg.url == "http://x:1" and cfg.concurrency == [1] and cfg.warmup == 0
    assert cfg.levels() == [LevelSpec(0, 1, None)]
    rate = BenchConfig.from_options(url="http://x:1", request_rate="2,4", max_concurrency=8)
    assert rate.concurrency == [] and rate.levels() == [LevelSpec(0, 8, 2.0), LevelSpec(1, 8, 4.0)]
    assert rate.requests_for(rate.levels()[1]) == 120


def test_the_stored_shape_is_unchanged_and_resumable(tmp_path: Path) -> None:
    cfg = BenchConfig.from_options(
        url="http://127.0.0.1:8000",
        concurrency="1,4",
        slo="ttft=500",
        model="tiny-llama",
        num_requests=12,
        input_len=64,
        output_len=16,
        label="baseline",
        api_key="secret",
    )
    assert cfg.public() == {**STORED, "workers": 1}  # no api_key, nothing renamed, fields only added
    store = Store(tmp_path / "s.db")
    run_id = store.add_run("baseline", STORED["url"], "tiny-llama", STORED, None)
    again = BenchConfig.of_run(store, run_id, api_key="secret")  # a run stored before --workers: one process
    assert again.public() == {**STORED, "workers": 1} and again.api_key == "secret"
    with pytest.raises(BenchError, match="no benchmark run 99"):
        BenchConfig.of_run(store, 99)


def test_workers_are_a_number_or_auto_and_stored_for_resume(tmp_path: Path) -> None:
    assert BenchConfig.from_options(url="http://x:1").workers == 1
    assert BenchConfig.from_options(url="http://x:1", workers="3").workers == 3
    cfg = BenchConfig.from_options(url="http://x:1", workers="Auto")
    assert cfg.workers == "auto"
    store = Store(tmp_path / "s.db")
    run_id = store.add_run("auto", cfg.url, "m", cfg.public(), None)
    assert BenchConfig.of_run(store, run_id).workers == "auto"
    with pytest.raises(BenchError, match="--workers"):
        BenchConfig(url="http://x:1", workers=0).validate()


def test_poisson_offsets_are_the_seeded_exponential_gaps() -> None:
    gaps = np.random.default_rng(7).exponential(1 / 4.0, 50)
    expected = np.concatenate(([0.0], np.cumsum(gaps)[:-1]))
    assert list(islice(schedule.poisson(4.0, 7), 50)) == list(expected)


def test_constant_offsets_are_evenly_spaced() -> None:
    assert list(islice(schedule.constant(4.0), 4)) == pytest.approx([0.0, 0.25, 0.5, 0.75])
