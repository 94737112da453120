"""A paged file's pages at full size, from its write order (layoutkit/advise/pages.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layoutkit.advise.model import Observation, predict
from layoutkit.advise.pages import PagedFile, extra_requests, interleave, layout_pages, page_requests, read_sequence
from layoutkit.layouts.hdf5_paged.plan import write_order
from layoutkit.templates import match_template

TEMPLATE = "/shots/{shot}/signals/{signal}"
MiB = 1024**2


def test_small_pieces_share_a_page_and_never_straddle_one():
    pages = layout_pages(["a", "b", "c", "d"], {"a": 3, "b": 4, "c": 2, "d": 0}, page=8)
    assert pages == {"a": range(0, 1), "b": range(0, 1), "c": range(1, 2), "d": range(0)}  # c does not fit in page 0


def test_a_large_piece_starts_a_page_and_the_next_piece_fills_its_last_one():
    pages = layout_pages(["a", "big", "b", "exact", "c"], {"a": 1, "big": 20, "b": 3, "exact": 8, "c": 1}, page=8)
    assert pages["big"] == range(1, 4)  # not in page 0, which holds a; 20 bytes are 3 pages
    assert pages["b"] == range(3, 4)  # the 4 bytes left in page 3 take it
    assert pages["exact"] == range(4, 5) and pages["c"] == range(5, 6)


@given(st.lists(st.integers(0, 40), min_size=1, max_size=30), st.integers(1, 16))
def test_pages_hold_every_piece_in_order_without_overfilling(sizes, page):
    names = [f"p{i}" for i in range(len(sizes))]
    pages = layout_pages(names, dict(zip(names, sizes)), page)
    fill: dict[int, int] = {}
    last = 0
    for name, n in zip(names, sizes):
        r = pages[name]
        assert len(r) == (0 if n == 0 else max(1, -(-n // page)))
        if n:
            assert r.start >= last  # written in order
            last = r.start
            if n < page:
                fill[r.start] = fill.get(r.start, 0) + n
    assert all(v <= page for v in fill.values())


def test_a_reader_fetches_each_page_once_unless_its_buffer_drops_it():
    pages = {"a": range(0, 1), "b": range(1, 2), "c": range(0, 1)}
    assert page_requests(pages, [[["a", "b", "c"]]], buffer_pages=2) == 2
    assert page_requests(pages, [[["a", "b", "c"]]], buffer_pages=1) == 3  # b pushed page 0 out
    assert page_requests(pages, [[["a"]], [["c"]]], buffer_pages=8) == 2  # two readers, two buffers


def test_readers_sharing_a_file_take_turns_through_one_buffer():
    assert interleave([[["a", "b"], ["e"]], [["c", "d"]]]) == ["a", "c", "b", "d", "e"]
    pages = {"a": range(0, 1), "b": range(1, 2), "c": range(0, 1), "d": range(1, 2)}
    shares = [[["a", "b"]], [["c", "d"]]]  # two readers on the same two pages, a one-page buffer
    assert page_requests(pages, shares, buffer_pages=1) == 4  # a buffer each: both fetch both pages
    assert page_requests(pages, [[interleave(shares)]], buffer_pages=1) == 2  # together: c and d hit


def test_a_read_sequence_goes_shot_by_shot_with_the_scales_first():
    paths = ["/shots/10/signals/ip", "/shots/9/signals/ip", "/shots/9/signals/ne", "/shots/9/time"]
    scales = {"/shots/9/signals/ip": ["/shots/9/time"], "/shots/10/signals/ip": []}
    matches = match_template(paths, TEMPLATE)
    assert read_sequence(matches, scales, "signal", "ip") == [
        "/shots/9/time", "/shots/9/signals/ip", "/shots/10/signals/ip"]
    assert read_sequence(matches, scales, "shot", "9") == ["/shots/9/time", "/shots/9/signals/ip",
                                                           "/shots/9/signals/ne"]


def _archive(shots: int, signals: int, size: int, by: str, page: int) -> PagedFile:
    paths = [f"/shots/{s}/signals/sig{g}" for s in range(shots) for g in range(signals)]
    return PagedFile(tuple(write_order(paths, by, TEMPLATE)), dict.fromkeys(paths, size), {}, page)


@pytest.mark.parametrize("by, pattern, expected", [
    ("shot", "signal", 2 * (40 - 10)),  # one page per shot and signal read: 30 more shots, 2 signals
    ("signal", "signal", 2 * (5 - 2)),  # a signal's run of 40 shots takes 5 pages, of 10 shots 2 (one straddled)
    ("signal", "shot", 0),  # a shot's pieces, one per signal run, but never more signals
    ("shot", "shot", 0),
])
def test_extra_pages_follow_the_order_against_the_pattern(by, pattern, expected):
    # 8 signals of 1 MiB per shot: a shot fills one 8 MiB page
    large, full = (_archive(n, 8, MiB, by, 8 * MiB) for n in (10, 40))
    items = ["sig1", "sig5"] if pattern == "signal" else ["3", "7"]
    assert extra_requests(large, full, pattern, items, workers=1, buffer=64 * MiB, template=TEMPLATE) == expected


def test_predicted_time_grows_with_counts_from_the_geometry():
    """Samples that fetched the same pages give no slope: the pages counted elsewhere
    grow the local time at the larger sample's average per request."""
    small = Observation(7, 14, 14 * 8 * MiB, 0.10, 0.1)
    large = Observation(13, 14, 14 * 8 * MiB, 0.12, 0.1)
    flat = predict(small, large, 40, 0.01, 0, 2.0)
    assert flat.requests == 14 and flat.local_seconds == pytest.approx(0.12)
    grown = predict(small, large, 40, 0.01, 0, 2.0, counts=(28, 28 * 8 * MiB))
    assert grown.requests == 28 and grown.local_seconds == pytest.approx(0.24)
    assert grown.network_seconds == pytest.approx(28 * 0.01 / 2)


def test_pages_the_full_file_adds_cost_a_page_read_each():
    """Measured on the 40-shot benchmark (cmod-signal's shot read of 2 shots, samples of
    5 and 9 shots): 8 and 10 requests in 0.264 and 0.330 s, 25 pages at full size. The
    samples' slope charged 33 ms or more to each added page (0.83 s of local time); a page read
    costs ~2 ms, and the shots delivered, hence decoded, stay the same."""
    small = Observation(5, 8, 40e6, 0.264, 0.3, 0.25, 0.27, logical=31.6e6)
    large = Observation(9, 10, 50e6, 0.330, 0.3, 0.32, 0.34, logical=31.6e6)
    counts = (25, 50e6 + 15 * 8 * MiB)
    by_slope = predict(small, large, 40, 0.0, 0.0, 1.0, pattern="shot", counts=counts)
    by_page = predict(small, large, 40, 0.0, 0.0, 1.0, pattern="shot", counts=counts, page_seconds=0.002)
    assert by_slope.local_seconds >= 0.330 + 15 * 0.033  # the samples' cost per request, or per byte fetched
    assert by_page.local_seconds == pytest.approx(0.330 + 15 * 0.002)
    # a signal read delivers more at full size: that decoding still grows, where the runs separate
    grows = predict(replace(small, logical=10e6), replace(large, logical=20e6), 40, 0.0, 0.0, 1.0, pattern="signal",
                    counts=counts, page_seconds=0.002)
    assert grows.local_seconds > by_page.local_seconds


def test_a_page_read_is_timed_on_the_written_file(tmp_path, monkeypatch):
    """Whole pages of the file are read, in whole passes, until the timing window has
    passed; a page costs the time over the pages read. The clock is the test's: each
    page read moves it by 1 ms."""
    import os
    from types import SimpleNamespace

    from layoutkit.advise import run
    from layoutkit.advise.run import PAGE_TIMING_SECONDS, _page_seconds

    path = tmp_path / "paged.h5"
    path.write_bytes(b"x" * (3 * 65536))
    clock, reads = [0.0], []
    pread = os.pread

    def timed_pread(fd: int, size: int, offset: int) -> bytes:
        clock[0] += 0.001
        reads.append((size, offset))
        return pread(fd, size, offset)

    monkeypatch.setattr(run, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    monkeypatch.setattr(os, "pread", timed_pread)
    seconds = _page_seconds(path, 65536)
    assert seconds == pytest.approx(0.001)
    assert len(reads) % 3 == 0 and set(reads) == {(65536, 0), (65536, 65536), (65536, 131072)}
    assert PAGE_TIMING_SECONDS <= len(reads) * 0.001 < PAGE_TIMING_SECONDS + 0.003 + 1e-9
    monkeypatch.undo()
    assert _page_seconds("s3://bucket/paged.h5", 65536) is None  # in a bucket a page is a request, counted


def test_local_time_grows_with_the_bytes_delivered():
    """Measured on the 40-shot benchmark (cmod-signal, a signal read of K=3, no latency):
    the samples fetched the same 14 pages, so neither requests nor bytes fetched grow,
    but the bytes delivered do, and the local time with them."""
    small = Observation(7, 14, 50e6, 0.068, 0.1, 0.063, 0.075, logical=2.8e6)
    large = Observation(13, 14, 50e6, 0.107, 0.1, 0.105, 0.108, logical=5.1e6)
    measured = 0.321  # at 40 shots: 19 pages, 16 MB delivered
    grown = predict(small, large, 40, 0.0, 0.0, 1.0)
    assert abs(grown.local_seconds - measured) < 0.15 * measured
    blind = predict(replace(small, logical=0.0), replace(large, logical=0.0), 40, 0.0, 0.0, 1.0)
    assert blind.local_seconds == pytest.approx(0.107)  # what the model predicted without them
    overlapping = predict(replace(small, slowest=0.11), large, 40, 0.0, 0.0, 1.0)
    assert overlapping.local_seconds == pytest.approx(0.107)  # runs that overlap are noise, not growth
