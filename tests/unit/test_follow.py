from __future__ import annotations

import io
from pathlib import Path

from firstlight.logs import LogFollower, iter_lines


def test_splits_on_carriage_return_and_counts_newlines_only() -> None:
    data = b"a\nLoading: 0/4\rLoading: 2/4\rLoading: 4/4\nb\r\nc"
    assert list(iter_lines(io.BytesIO(data))) == [
        (1, "a"),
        (2, "Loading: 0/4"),
        (2, "Loading: 2/4"),
        (2, "Loading: 4/4"),
        (3, "b"),
        (4, "c"),
    ]


def test_follower_reads_appends_and_holds_partial_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    follower = LogFollower(log)
    assert list(follower.read_available()) == []  # the file does not exist yet
    log.write_bytes(b"first\nsec")
    assert list(follower.read_available()) == [(1, "first")]
    with open(log, "ab") as f:
        f.write(b"ond\nthird")
    assert list(follower.read_available()) == [(2, "second")]
    assert list(follower.flush()) == [(3, "third")]
    follower.close()


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert list(iter_lines(io.BytesIO(b"ok \xff\xfe bytes\n"))) == [(1, "ok \ufffd\ufffd bytes")]


def test_text_glued_to_a_progress_bars_end_is_a_segment_of_its_own() -> None:
    bar = "Capturing batches:  13%|██▏        | 3/23 [00:11<00:55,  2.79s/it]"
    data = f"{bar}Failed: Cuda error x.cuh:368 'an illegal memory access'\n100%|██| 2/2 [00:01<00:00, 1.07it/s]\n"
    assert list(iter_lines(io.BytesIO(data.encode()))) == [
        (1, bar),
        (1, "Failed: Cuda error x.cuh:368 'an illegal memory access'"),
        (2, "100%|██| 2/2 [00:01<00:00, 1.07it/s]"),  # a bar that ends its line stays whole
    ]
    # a bracket of times that is no bar's end is not a split
    assert list(iter_lines(io.BytesIO(b"took [00:11<00:55] ok\n"))) == [(1, "took [00:11<00:55] ok")]


def test_thousands_of_redraws_on_one_line_split_in_order() -> None:
    # a log whose carriage returns were lost keeps every redraw of a bar on one line
    bars = "".join(f"{i}%|█| {i}/5000 [00:0{i % 10}<00:01, 1.0it/s]" for i in range(5000))
    segments = list(iter_lines(io.BytesIO(f"{bars}Failed: boom\n".encode())))
    assert len(segments) == 5001
    assert segments[-1] == (1, "Failed: boom")
