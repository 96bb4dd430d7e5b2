"""Speculative-decoding acceptance read with the metric names the engine adapters declare.

The /metrics pages here are constructed, not recorded: they are written by prometheus_client (the
library vLLM and SGLang expose their metrics with) under the series names of engine-anchors.md, so
their format (`_total` counters beside `_created` timestamps, labels per engine and position) is the
real one.
"""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from firstlight.benchmark import specdecode
from firstlight.engines import ENGINES
from firstlight.engines.base import EngineAdapter, SpecDecodeMetrics

LABELS = ["engine", "model_name"]


class VllmCounters:
    """A constructed vLLM /metrics page with spec-decoding counters on two engine cores."""

    def __init__(self, prefix: str = "vllm:") -> None:
        self.registry = CollectorRegistry()
        name = prefix + "spec_decode_num_"
        self.accepted = Counter(name + "accepted_tokens", "accepted", LABELS, registry=self.registry)
        self.draft_tokens = Counter(name + "draft_tokens", "draft tokens", LABELS, registry=self.registry)
        self.drafts = Counter(name + "drafts", "drafts", LABELS, registry=self.registry)
        self.per_pos = Counter(
            name + "accepted_tokens_per_pos", "per pos", [*LABELS, "position"], registry=self.registry
        )
        Counter(prefix + "prompt_tokens", "not spec decoding", LABELS, registry=self.registry).labels("0", "m").inc(99)

    def step(self, k: int) -> str:
        """k more rounds on each core: 3 drafts of 3 tokens, 7 accepted (3, 2, 2 by position); the page after."""
        for core in ("0", "1"):
            self.accepted.labels(core, "m").inc(7 * k)
            self.draft_tokens.labels(core, "m").inc(9 * k)
            self.drafts.labels(core, "m").inc(3 * k)
            for pos, n in enumerate((3, 2, 2)):
                self.per_pos.labels(core, "m", str(pos)).inc(n * k)
        return generate_latest(self.registry).decode()


def test_vllm_counters_give_the_level_deltas() -> None:
    page = VllmCounters()
    before = specdecode.parse_metrics(page.step(1))
    after = specdecode.parse_metrics(page.step(2))
    got = specdecode.acceptance(before, after)
    assert got is not None
    assert got["scope"] == "this level (counter deltas)" and got["source"] == "/metrics counters"
    assert (got["accepted_tokens"], got["draft_tokens"], got["drafts"]) == (28, 36, 12)
    assert got["acceptance_rate"] == pytest.approx(28 / 36)
    assert got["mean_acceptance_length"] == pytest.approx(1 + 28 / 12)
    assert got["per_position_acceptance"] == pytest.approx({"0": 1.0, "1": 2 / 3, "2": 2 / 3})


def test_no_drafts_during_the_level_is_no_spec_decoding() -> None:
    page = VllmCounters()
    text = page.step(1)
    assert specdecode.acceptance(specdecode.parse_metrics(text), specdecode.parse_metrics(text)) is None


def test_sglang_gauges_are_a_running_average() -> None:
    registry = CollectorRegistry()
    Gauge("sglang:spec_accept_length", "length", ["model_name"], registry=registry).labels("m").set(2.5)
    Gauge("sglang:spec_accept_rate", "rate", ["model_name"], registry=registry).labels("m").set(0.6)
    Gauge("sglang:num_running_reqs", "other", ["model_name"], registry=registry).labels("m").set(3)
    after = specdecode.parse_metrics(generate_latest(registry).decode())
    assert specdecode.acceptance(None, after) == {
        "scope": "running average since server start (not scoped to this level)",
        "mean_acceptance_length": 2.5,
        "acceptance_rate": 0.6,
        "source": "/metrics gauges",
    }


def test_sglang_server_info_averages_the_ranks() -> None:
    info = {"internal_states": [{"avg_spec_accept_length": 2.0}, {"avg_spec_accept_length": 3.0}, {"memory": 1}]}
    got = specdecode.acceptance(None, specdecode.parse_server_info(info))
    assert got == {
        "scope": "running average since server start (not scoped to this level)",
        "mean_acceptance_length": 2.5,
        "source": "/server_info",
    }
    assert specdecode.parse_server_info({"internal_states": [{"memory": 1}]}) is None


def test_the_names_come_from_the_adapters() -> None:
    names = specdecode.known()
    for adapter in ENGINES.values():
        if adapter.metrics_prefix:
            assert adapter.metrics_prefix in names.prefixes
        sd = adapter.spec_decode
        if sd is None:
            continue
        for role in ("accepted", "draft_tokens", "drafts"):
            if getattr(sd, role):
                assert names.counters[getattr(sd, role)] == role
        if sd.accept_length_gauge:
            assert names.gauges[sd.accept_length_gauge] == "accept_length"
        if sd.server_info_key:
            assert sd.server_info_key in names.server_info_keys


def test_a_new_engine_is_read_by_its_declared_names_alone() -> None:
    toy = EngineAdapter(
        name="toy",
        phases=(),
        metrics_prefix="toy:",
        spec_decode=SpecDecodeMetrics(
            accepted="toy:spec_decode_num_accepted_tokens",
            draft_tokens="toy:spec_decode_num_draft_tokens",
            drafts="toy:spec_decode_num_drafts",
            per_position="toy:spec_decode_num_accepted_tokens_per_pos",
        ),
    )
    names = specdecode.MetricNames.of([toy])
    assert names.prefixes == ("toy:",)
    toy_page, vllm_page = VllmCounters("toy:"), VllmCounters()
    before, after = toy_page.step(1), toy_page.step(2)
    got = specdecode.acceptance(specdecode.parse_metrics(before, names), specdecode.parse_metrics(after, names))
    assert got is not None and got["mean_acceptance_length"] == pytest.approx(1 + 28 / 12)
    # vLLM's series mean nothing to a registry that only knows the toy engine
    assert specdecode.parse_metrics(vllm_page.step(1), names)["counters"] == {}
