"""A store of 20,000 shots opens and reads like one of 1,000 (issue #39; 50,000 in
benchmarks/bench_index.py: at that size this test took 3 minutes of the suite).

The bounded layouts (signal-major version 2, shot-packed version 3) keep out of the root
document everything that grows with the shots, so opening, reading one shot, one signal
of every shot (signal-major) and the shot list cost the same number of GETs, in the same
number of dependent rounds, whatever the number of shots. Each store is written by
``convert`` from a real HDF5 shot archive built here (one small signal per shot: the
writing of 20,000 shots is what the test's time goes to).

Rounds are counted structurally: a request that starts when no other is in flight opens
a new round (each request is held 20 ms by the latency model, so requests sent together
overlap).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import Rounds

from layoutkit.archive import open_archive
from layoutkit.convert import ConvertOptions, convert
from layoutkit.storage.counting import LatencyModel

SMALL, LARGE = 1_000, 20_000
SIGNAL = "ip"


def build_archive(path: Path, shots: int) -> Path:
    """``/shots/<n>/signals/ip``, four float32 values, for shots 1..``shots``."""
    with h5py.File(path, "w", libver="latest") as f:
        for shot in range(1, shots + 1):
            f.create_dataset(f"shots/{shot}/signals/{SIGNAL}", data=np.full(4, shot, dtype="f4"))
    return path


def costs(store: Path, shot: str, signal: bool) -> dict[str, tuple[int, int]]:
    """(GETs, rounds) of opening and of each read, each read on a store opened afresh."""
    out: dict[str, tuple[int, int]] = {}

    def opened() -> tuple[object, Rounds]:
        rounds = Rounds()
        return open_archive(store, model=LatencyModel(latency=0.02), sleep=rounds.sleep), rounds

    archive, rounds = opened()
    out["open"] = (archive.counter.requests, rounds.rounds)
    archive.close()
    reads = {"shot list": lambda a: a.shots, "one shot": lambda a: a.shot(shot)}
    if signal:
        reads["one signal"] = lambda a: a.signal(SIGNAL)
    for what, read in reads.items():
        archive, rounds = opened()
        archive.counter.reset()
        rounds.rounds = 0
        got = read(archive)
        assert len(got) > 0, what
        out[what] = (archive.counter.requests, rounds.rounds)
        archive.close()
    return out


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("scale")
    return {n: build_archive(root / f"shots{n}.h5", n) for n in (SMALL, LARGE)}


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("layout", ["signal-major", "shot-packed"])
def test_twenty_times_the_shots_open_and_read_at_the_same_cost(layout: str, archives: dict[int, Path],
                                                              tmp_path: Path) -> None:
    found, roots = {}, {}
    for n, src in archives.items():
        store = tmp_path / f"{layout}-{n}.zarr"
        convert(src, store, ConvertOptions(layout=layout))
        root = (store / "zarr.json").read_text()
        roots[n] = root
        found[n] = costs(store, str(n // 2), signal=layout == "signal-major")
        with open_archive(store) as archive:  # the shots are all there, and read right
            assert len(archive.shots) == n
            np.testing.assert_array_equal(archive.get(f"/shots/{n // 2}/signals/{SIGNAL}"), np.full(4, n // 2, "f4"))

    small, large = found[SMALL], found[LARGE]
    assert large["open"] == small["open"] == (1, 1), found  # one GET: the root document
    assert large["one shot"] == small["one shot"], found
    assert large["one shot"][1] <= 2, found  # its index, then its data
    assert large["shot list"] == small["shot list"], found
    assert large["shot list"][1] == 1, found
    if layout == "signal-major":  # the layout of that pattern (shot-packed reads each shot's index)
        assert large["one signal"] == small["one signal"], found
        assert large["one signal"][1] <= 2, found  # the signal's index arrays, then its data
    # the root document differs only in the numbers that count the shots (an index
    # array's shape, the number of rows): the same text once the digits are masked,
    # and at most a few bytes longer
    # (the record of the one source file, its name and digest, aside: it counts files, not shots)
    digits = re.compile(r"\d+")
    large, small = but_sources(roots[LARGE]), but_sources(roots[SMALL])
    assert digits.sub("#", large) == digits.sub("#", small)
    assert 0 <= len(large) - len(small) <= 16, (len(small), len(large))
    assert len(roots[LARGE]) < 1024**2


def but_sources(root: str) -> str:
    """A root document without its provenance's part of the log of sources (the digest
    of the one source's record)."""
    doc = json.loads(root)
    provenance = json.loads(doc["attributes"]["layoutkit"])
    assert provenance.pop("log")["entries"] == 1
    doc["attributes"]["layoutkit"] = json.dumps(provenance)
    return json.dumps(doc)
