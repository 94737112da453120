"""Check that every variant holds the source's data, and count the read requests the
two standard patterns cost on each (a small preview of `layoutkit verify`).

    python examples/compare_variants.py SRC.h5 VARIANT [VARIANT ...]

Zarr variants are compared with layoutkit.verify.compare_zarr, HDF5 variants with
compare_hdf5. For HDF5, requests are counted with a CountingFile under h5py (with a
64 MiB page buffer for paged files); for Zarr, as the chunk objects a read fetches.
"""

from __future__ import annotations

import sys
from pathlib import Path

import h5py
import zarr
from rich.console import Console
from rich.table import Table

from layoutkit.reorder import ReorderOptions, plan_reorder
from layoutkit.verify import compare_hdf5, compare_zarr
from layoutkit.verify.storage import CountingFile


def is_paged(path: Path) -> bool:
    with h5py.File(path, "r") as f:
        return f.id.get_create_plist().get_file_space_strategy()[0] == h5py.h5f.FSPACE_STRATEGY_PAGE


def hdf5_requests(path: Path, signal: str, shot: str) -> tuple[int, int]:
    """Requests after opening, for each pattern on a freshly opened file (a page buffer
    warmed by one pattern would hide the cost of the other)."""

    def count(read) -> int:  # noqa: ANN001
        cf = CountingFile(path)
        with h5py.File(cf, "r", **({"page_buf_size": 64 << 20} if is_paged(path) else {})) as f:
            cf.reset()
            read(f)
            return cf.requests

    def one_signal(f: h5py.File) -> None:
        for s in f["shots"]:
            if signal in f[f"shots/{s}/signals"]:
                f[f"shots/{s}/signals/{signal}"][...]

    def one_shot(f: h5py.File) -> None:
        for name in f[f"shots/{shot}/signals"]:
            f[f"shots/{shot}/signals/{name}"][...]

    return count(one_signal), count(one_shot)


def zarr_objects(path: Path, signal: str, shot: str) -> tuple[int, int]:
    shots = zarr.open_group(path, mode="r")["shots"]

    def objects(arr: zarr.Array) -> int:  # stored objects a full read fetches
        return max(1, arr.nshards_initialized if arr.shards else arr.nchunks_initialized)

    by_signal = sum(
        objects(shots[s]["signals"][signal]) for s in shots.group_keys() if signal in shots[s]["signals"]
    )
    by_shot = sum(objects(a) for _, a in shots[shot]["signals"].arrays())
    return by_signal, by_shot


def main() -> None:
    src, *variants = map(Path, sys.argv[1:])
    with h5py.File(src, "r") as f:
        shots = sorted(f["shots"])
        shot = shots[len(shots) // 2]
    signal = "ip"
    _, plan = plan_reorder(src, "unused.h5", ReorderOptions(by="group"))
    table = Table(title=f"{src.name}: signal {signal!r} of every shot / every signal of shot {shot}")
    for col in ("variant", "equal to source", "requests: one signal", "requests: one shot"):
        table.add_column(col)
    table.add_row(src.name, "(source)", *map(str, hdf5_requests(src, signal, shot)))
    ok = True
    for v in variants:
        if v.is_dir():
            mismatches = compare_zarr(src, v)
            counts = zarr_objects(v, signal, shot)
        else:
            mismatches = compare_hdf5(src, v, plan.dedupe)
            counts = hdf5_requests(v, signal, shot)
        ok &= not mismatches
        table.add_row(v.name, "yes" if not mismatches else f"NO: {mismatches[0]}", *map(str, counts))
    Console().print(table)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
