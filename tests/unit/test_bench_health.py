"""The client's watch over its own process during a level: the garbage collector kept off the load."""

from __future__ import annotations

import gc

from firstlight.benchmark.health import CollectorPauses


def test_the_collector_is_off_and_frozen_during_a_level_and_restored_after() -> None:
    assert gc.isenabled()
    before = gc.get_freeze_count()
    pauses = CollectorPauses()
    pauses.hold()
    try:
        assert not gc.isenabled() and gc.get_freeze_count() > before
        gc.collect()  # a library that collects anyway: timed, and shown in the level's health
        assert pauses.pause_max_s > 0 and pauses.pause_s >= pauses.pause_max_s
    finally:
        pauses.release()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    seen = pauses.pause_s
    gc.collect()  # after the level: no longer counted
    assert pauses.pause_s == seen
    pauses.release()  # twice is harmless
    assert gc.isenabled()


def test_a_collector_the_caller_had_off_stays_off() -> None:
    gc.disable()
    try:
        pauses = CollectorPauses()
        pauses.hold()
        pauses.release()
        assert not gc.isenabled()
    finally:
        gc.enable()
