"""The sweep's verdicts on constructed numbers (not measurements: each case is built to have one answer):
medians and MAD of repeats, instability, speedup with its noise band, the crossover, the SLO knee and the
Pareto front."""

from __future__ import annotations

import pytest

from firstlight.sweep.analysis import _speedups, crossover, pareto, slo_knee, spread


def stat(*values: float) -> dict[str, float]:
    return spread(list(values))


def row(level: int, concurrency: int, throughput: dict[str, float], tpot: float = 10.0, good: float = 1.0) -> dict:
    return {
        "level": level,
        "concurrency": concurrency,
        "request_rate": None,
        "throughput": throughput,
        "tpot_p50": stat(tpot),
        "good_fraction": stat(good),
    }


def test_spread_is_median_and_mad() -> None:
    s = stat(100.0, 104.0, 130.0)
    assert s["median"] == 104.0 and s["mad"] == 4.0 and s["n"] == 3
    assert s["max_dev"] == pytest.approx(26 / 104)


def test_speedup_crossover_between_two_levels_interpolated_on_log_scale() -> None:
    base = [row(0, 1, stat(100, 100)), row(1, 4, stat(300, 300)), row(2, 16, stat(800, 800))]
    spec = [row(0, 1, stat(180, 180)), row(1, 4, stat(330, 330)), row(2, 16, stat(720, 720))]
    rows = _speedups(base, spec)
    assert [round(r["speedup"], 2) for r in rows] == [1.8, 1.1, 0.9]
    assert not any(r["within_noise"] for r in rows)  # identical repeats: no noise
    c = crossover(rows)
    assert c["between"] == [4.0, 16.0] and c["within_noise"] is False
    assert c["at"] == pytest.approx(8.0)  # 1.1 → 0.9 crosses 1.0 half-way between log2(4) and log2(16)


def test_a_crossover_inside_the_noise_says_so() -> None:
    base = [row(0, 1, stat(100, 100)), row(1, 8, stat(500, 560))]
    spec = [row(0, 1, stat(150, 150)), row(1, 8, stat(520, 500))]
    rows = _speedups(base, spec)
    assert rows[1]["speedup"] < 1.0 and rows[1]["within_noise"]
    assert "inside the repeats' noise" in crossover(rows)["verdict"]


def test_no_crossover_either_way() -> None:
    base = [row(0, 1, stat(100)), row(1, 2, stat(200))]
    assert crossover(_speedups(base, [row(0, 1, stat(150)), row(1, 2, stat(250))]))["at"] is None
    slower = crossover(_speedups(base, [row(0, 1, stat(90)), row(1, 2, stat(150))]))
    assert slower["verdict"].startswith("slower than the baseline at every load")


def test_slo_knee_is_the_last_level_before_the_first_miss_and_the_best_variant_there() -> None:
    levels = [{"level": i, "concurrency": c, "request_rate": None} for i, c in enumerate((1, 4, 16))]
    table = {
        "baseline": [row(0, 1, stat(100)), row(1, 4, stat(300)), row(2, 16, stat(800), good=0.5)],
        "eagle": [row(0, 1, stat(150)), row(1, 4, stat(350), good=0.95), row(2, 16, stat(700), good=0.2)],
        "slow": [row(0, 1, stat(50), good=0.1), row(1, 4, stat(400)), row(2, 16, stat(900))],
    }
    knee = slo_knee(table, levels, 0.9)
    assert knee["per_variant"]["baseline"]["load"] == 4.0
    assert knee["per_variant"]["eagle"]["load"] == 4.0
    assert knee["per_variant"]["slow"] is None  # missed at the lightest load: later passes do not count
    assert knee["best"] == "eagle" and knee["load"] == 4.0


def test_pareto_front_marks_points_nothing_beats_on_both_axes() -> None:
    table = {
        "a": [row(0, 1, stat(100), tpot=5.0), row(1, 8, stat(400), tpot=20.0)],
        "b": [row(0, 1, stat(90), tpot=6.0), row(1, 8, stat(500), tpot=25.0)],
    }
    points = {(p["variant"], p["level"]): p for p in pareto(table, {"a": 1, "b": 2})}
    assert points[("a", 0)]["per_user"] == 200.0 and points[("b", 1)]["per_gpu"] == 250.0
    assert points[("a", 0)]["front"] and points[("a", 1)]["front"]
    assert not points[("b", 0)]["front"]  # a at C=1 is faster per user and per GPU
    assert not points[("b", 1)]["front"]  # 250/GPU at 40 tok/s/user loses to a's 400 at 50


def test_a_variant_slower_at_light_load_and_faster_later_crosses_above() -> None:
    base = [row(0, 1, stat(100)), row(1, 4, stat(300)), row(2, 16, stat(800))]
    c = crossover(_speedups(base, [row(0, 1, stat(90)), row(1, 4, stat(330)), row(2, 16, stat(900))]))
    assert c["verdict"] == "crosses above 1.0" and c["between"] == [1.0, 4.0]
    assert 1.0 < c["at"] < 4.0
