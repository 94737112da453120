"""Where convert's and reorder's time goes, stage by stage (issue 13).

    .venv/bin/python benchmarks/profile_stages.py [--shots 40] [--signals 70] [--rate-factor 10]

Each command runs once under cProfile on the sample archive with one worker (serial,
so all work is on the profiled thread; the stages' shares are what a worker spends), and
the profile's own time per function is summed into stages by where the function lives:

============  =============================================================
inventory     layoutkit's walk of the source (its own code)
h5py objects  h5py's Python layer: opening groups and datasets, attributes, dims
              (source and destination alike), and its weakref registry
read          stored bytes from the source: pread, read_direct_chunk
decode        decompressing (zlib, numcodecs decode)
encode        compressing (zstd, zlib, numcodecs encode, shard assembly)
write         the destination: creating files and folders, writing and closing them,
              zarr store sets, direct chunk writes
metadata      JSON, zarr metadata, HDF5 scale attachment and attribute copies
python        everything else (layoutkit's own loops, numpy, dict and list work)
============  =============================================================

Results: benchmarks/out/stages[-rF].{txt,json}.
"""

from __future__ import annotations

import cProfile
import json
import pstats
import shutil
import time
from pathlib import Path

from common import HERE, parse_args, sample, suffix

STAGES = ("inventory", "h5py objects", "read", "decode", "encode", "write", "metadata", "python")


def stage_of(filename: str, name: str) -> str:
    """The stage a function's own time belongs to (see the module docstring)."""
    where = filename.replace("\\", "/")
    if "layoutkit/inventory" in where:
        return "inventory"
    if name.endswith(("pread>", "preadv>")) or name in ("read_direct_chunk", "readinto", "read_ranges"):
        return "read"
    # imagecodecs' Cython functions are not seen by cProfile: their time is their caller's
    if "decompress" in name or "_decode" in name or name in ("decode", "decode_chunk") or (
        "layoutkit/source" in where and name == "inflate"
    ):
        return "decode"
    if "compress" in name or "_encode" in name or name in ("encode", "encode_chunk", "encode_shard") or (
        "writers/hdf5_paged" in where and name == "<lambda>"
    ):
        return "encode"
    if name.endswith(("_io.open>", "posix.open>", "posix.write>", "posix.close>", "posix.makedirs>", "posix.mkdir>",
                      "posix.replace>", "posix.rename>", "posix.fsync>")) or (
        name.startswith(("<method 'write' of '_io", "<method '__exit__' of '_io", "<method 'close' of '_io"))
        or name == "write_direct_chunk" or "zarr/storage" in where or "layoutkit/storage/kv" in where
    ):
        return "write"  # creating a store's files and folders is most of it
    if "h5py/" in where or where.endswith("weakref.py") or "h5py" in name:
        return "h5py objects"
    if "json" in where or "zarr/core/metadata" in where or "zarr/core/group" in where or "packaging" in where or (
        "writers/hdf5_paged" in where and name in ("attach", "_attach_scales", "_copy_attrs")
    ):
        return "metadata"
    return "python"


def profile(fn, label: str) -> dict[str, float]:  # noqa: ANN001
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    fn()
    prof.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof)
    totals = dict.fromkeys(STAGES, 0.0)
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        totals[stage_of(filename, name)] += tottime
    totals["wall"] = wall
    print(f"{label}: {wall:.1f} s", flush=True)
    return totals


def main() -> None:
    from layoutkit.convert import ConvertOptions, convert
    from layoutkit.reorder import ReorderOptions, reorder

    args = parse_args(__doc__)
    args.shots = 40 if args.shots == 250 else args.shots
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    out = args.workdir / "stages"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    runs = {
        "convert (zstd:3)": lambda: convert(src, out / "c.zarr", ConvertOptions(workers=1, scheduler="serial")),
        "convert --compressor source": lambda: convert(
            src, out / "s.zarr", ConvertOptions(workers=1, scheduler="serial", chunks=_source_chunks(),
                                                compressor=_source())),
        "reorder --by shot (gzip:4)": lambda: reorder(src, out / "r.h5", ReorderOptions(workers=1)),
    }
    results = {label: profile(fn, label) for label, fn in runs.items()}
    lines = [f"# where the time goes: {src.name} ({logical / 1e9:.2f} GB of data), one worker, cProfile own time",
             f"# command: benchmarks/profile_stages.py --shots {args.shots} --signals {args.signals}"
             + (f" --rate-factor {args.rate_factor}" if args.rate_factor != 1 else ""), "",
             "| command | wall s | " + " | ".join(STAGES) + " |", "|---|---:|" + "---:|" * len(STAGES)]
    for label, t in results.items():
        profiled = sum(t[s] for s in STAGES) or 1.0
        cells = " | ".join(f"{100 * t[s] / profiled:.0f}%" for s in STAGES)
        lines.append(f"| {label} | {t['wall']:.1f} | {cells} |")
    text = "\n".join(lines)
    print(text)
    (HERE / "out" / f"stages{suffix(args.rate_factor)}.txt").write_text(text + "\n")
    (HERE / "out" / f"stages{suffix(args.rate_factor)}.json").write_text(json.dumps(results, indent=1))
    shutil.rmtree(out, ignore_errors=True)


def _source_chunks():  # noqa: ANN202
    from layoutkit.options import parse_chunks

    return parse_chunks("source")


def _source():  # noqa: ANN202
    from layoutkit.options import parse_compressor

    return parse_compressor("source")


if __name__ == "__main__":
    Path(HERE / "out").mkdir(exist_ok=True)
    main()
