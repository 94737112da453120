"""Appending 10% more shots writes about 10% of the objects, in about 10% of the time (issue #38).

    python benchmarks/bench_append.py [--shots 100] [--signals 70] [--files 10] [--repeat 3]

A sample archive of ``--shots`` shots is written as ``--files`` files (``layoutkit sample
--shots-per-file``). For signal-major (``--shards auto``) and shot-packed Zarr, on the
local disk:

- **full**: all the files converted into a new store in one run (the reference);
- **append**: the first ``files - 1`` files converted, then the last file appended with
  ``convert --append`` (the run measured: the last file is 1/``files`` of the shots);
- **alone**: the last file converted into a new store by itself: what the new shots
  cost with no store to join (the floor an append cannot beat).

Each run in this process, median of ``--repeat`` (page cache warm: the files were just
written). Objects: the store's files after the full run; for the append, the files it
created or changed (size, inode or mtime differ). The append's figures are shown as a
fraction of the full run's, beside the shots' fraction.

Then the memory of a run's driver against the number of files (``--memory-files``): tiny
files of one shot (50 signals of 64 values and a time base: 51 datasets), ``convert`` of
100, 300 and 1,000 of them, in one run and in batches of 100 files (``--memory-batch``;
``--batch-files``: the first batch converted, each next appended), walked by the driver
and by a local cluster's workers (``--scheduler processes``); 3,000 in batches; and
``--append`` of 10 more to the store of 1,000; each a process of its own (the driver's
own peak RSS, ``getrusage``). Prints markdown tables; writes
``benchmarks/out/append.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import HERE

import layoutkit
from layoutkit.appending.append import append
from layoutkit.sample import write_sample
from layoutkit.zarr_options import ConvertOptions

LAYOUTS = {"signal-major": {"layout": "signal-major", "shards": "auto"}, "shot-packed": {"layout": "shot-packed"}}


def options(layout: str) -> ConvertOptions:
    from layoutkit.recipes import build_options

    return build_options("convert", None, LAYOUTS[layout])


def snapshot(store: Path) -> dict[str, tuple[int, int, int]]:
    return {p.relative_to(store).as_posix(): (st.st_size, st.st_ino, st.st_mtime_ns)
            for p in store.rglob("*") if p.is_file() and (st := p.stat())}


def store_bytes(store: Path) -> int:
    return sum(p.stat().st_size for p in store.rglob("*") if p.is_file())


def timed(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure_layout(layout: str, files: list[Path], work: Path, repeat: int) -> dict[str, object]:
    full, grown, alone = work / f"{layout}-full.zarr", work / f"{layout}-grown.zarr", work / f"{layout}-alone.zarr"
    opts = options(layout)
    runs: dict[str, list[float]] = {"full": [], "append": [], "alone": []}
    written: dict[str, int] = {}
    for _ in range(repeat):
        for store in (full, grown, alone):
            shutil.rmtree(store, ignore_errors=True)
        runs["full"].append(timed(lambda: layoutkit.convert(files, full, opts)))
        runs["alone"].append(timed(lambda: layoutkit.convert(files[-1:], alone, opts)))
        layoutkit.convert(files[:-1], grown, opts)
        before = snapshot(grown)
        runs["append"].append(timed(lambda: append(files[-1:], grown)))
        after = snapshot(grown)
        changed = [k for k, v in after.items() if before.get(k) != v]
        written = {"objects": len(changed), "bytes": sum(after[k][0] for k in changed),
                   "removed": len(set(before) - set(after)), "root_before": before["zarr.json"][0],
                   "root_after": after["zarr.json"][0]}
    objects, nbytes = len(snapshot(full)), store_bytes(full)
    seconds = {k: statistics.median(v) for k, v in runs.items()}
    return {
        "objects_full": objects, "bytes_full": nbytes, "objects_alone": len(snapshot(alone)),
        "objects_append": written["objects"], "bytes_append": written["bytes"], "removed_append": written["removed"],
        "root_bytes": {"full": (full / "zarr.json").stat().st_size, "before_append": written["root_before"],
                       "after_append": written["root_after"]},
        "seconds": seconds, "runs": runs,
        "objects_ratio": written["objects"] / objects, "bytes_ratio": written["bytes"] / nbytes,
        "seconds_ratio": seconds["append"] / seconds["full"],
        "append_vs_alone": seconds["append"] / seconds["alone"],
    }


PEAK_OF_SELF = """
import resource, runpy, sys
try:
    runpy.run_module("layoutkit", run_name="__main__", alter_sys=True)
finally:  # this process's own peak: a cluster's worker processes are not the driver
    print("PEAK_KIB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def peak_rss(args: list[str]) -> tuple[float, int]:
    """Seconds and peak RSS (MiB) of the driver of ``layoutkit ARGS``, run in a process of
    its own (its own peak, not its children's: a LocalCluster's workers are children)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PEAK_OF_SELF, "--quiet", *args], stderr=subprocess.PIPE, text=True)
    peaks = [int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("PEAK_KIB ")]
    if proc.returncode != 0 or not peaks:
        shown = " ".join([*args[:3], "...", *args[-6:]]) if len(args) > 12 else " ".join(args)
        raise SystemExit(f"layoutkit {shown} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0, peaks[-1] // 1024


def tiny_files(folder: Path, count: int, signals: int = 50) -> list[Path]:
    """``count`` files of one shot each: ``signals`` signals of 64 float32 values and their
    time base (small: the inventory, not the data, is what a driver's memory holds)."""
    import h5py
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    t = np.arange(64, dtype="f4") * 1e-3
    for shot in range(1, count + 1):
        path = folder / f"shots-{shot}.h5"
        out.append(path)
        if path.exists():
            continue
        with h5py.File(path, "w") as f:
            tb = f.create_dataset(f"shots/{shot}/timebases/t", data=t)
            tb.make_scale("t")
            for k in range(signals):
                ds = f.create_dataset(f"shots/{shot}/signals/s{k}", data=np.full(64, shot + k, dtype="f4"))
                ds.dims[0].attach_scale(tb)
    return out


def driver_memory(work: Path, counts: list[int], batch: int) -> list[dict[str, object]]:
    """Peak RSS of a run's driver against the files (and datasets) of the run: convert
    of ``counts`` tiny files (signal-major) in one run each and in batches of ``batch``
    files (``--batch-files``: the first converted, each next appended; and 3x the largest
    count in batches, walked here), the files walked here (``--scheduler threads``) and by
    the workers of a local cluster (``processes``: the driver only combines what they
    found), then an append of 10 files to the store of the largest count."""
    files = tiny_files(work / "tiny", 3 * max(counts) + 10)
    rows = []
    runs = [(scheduler, n, b) for b in (0, batch) for scheduler in ("threads", "processes") for n in counts]
    for scheduler, n, b in [*runs, ("threads", 3 * max(counts), batch)]:
        store = work / f"memory-{n}.zarr"
        shutil.rmtree(store, ignore_errors=True)
        seconds, rss = peak_rss(["convert", *map(str, files[:n]), str(store), "--layout", "signal-major",
                                 "--scheduler", scheduler, "--batch-files", str(b)])
        how = f"in batches of {b:,} files" if b else "in one run"
        rows.append({"run": f"convert {n:,} files ({n * 51:,} datasets) {how}, --scheduler {scheduler}",
                     "files": n, "batch_files": b, "scheduler": scheduler, "seconds": seconds,
                     "peak_rss_mib": rss})
    store = work / f"memory-{max(counts)}.zarr"
    shutil.rmtree(store, ignore_errors=True)
    peak_rss(["convert", *map(str, files[:max(counts)]), str(store), "--layout", "signal-major"])
    seconds, rss = peak_rss(["convert", *map(str, files[max(counts):max(counts) + 10]), str(store), "--append"])
    rows.append({"run": f"append 10 files to the store of {max(counts):,}", "files": 10, "seconds": seconds,
                 "peak_rss_mib": rss})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, default=100)
    parser.add_argument("--signals", type=int, default=70)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/layoutkit-bench-append"))
    parser.add_argument("--memory-files", default="100,300,1000", help="file counts of the driver memory sweep")
    parser.add_argument("--memory-only", action="store_true", help="only the driver memory sweep")
    parser.add_argument("--memory-batch", type=int, default=100, help="--batch-files of the sweep's runs in batches")
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    folder = work / f"archive-{args.shots}x{args.signals}-{args.files}"
    if not folder.exists():
        print(f"writing {args.shots} shots as {args.files} files ...", flush=True)
        write_sample(folder, shots=args.shots, signals=args.signals, seed=0, shots_per_file=args.shots // args.files)
    files = sorted(folder.glob("*.h5"), key=lambda p: int(p.stem.split("-")[1]))
    share = 1 / len(files)
    source_bytes = sum(f.stat().st_size for f in files)
    results = {"shots": args.shots, "signals": args.signals, "files": len(files), "source_bytes": source_bytes,
               "date": time.strftime("%Y-%m-%d"), "layouts": {}}
    print(f"\n{args.shots} shots x {args.signals} signals in {len(files)} files ({source_bytes / 1e6:.0f} MB); "
          f"the appended file holds {share:.0%} of the shots\n")
    print("| layout | full: objects, s | append 1 file: objects written (of the full), bytes, s | "
          "append / full: objects, bytes, time | append / the file alone | root document: full run / appended |")
    print("|---|---|---|---|---|---|")
    for layout in () if args.memory_only else LAYOUTS:
        r = measure_layout(layout, files, work, args.repeat)
        results["layouts"][layout] = r
        s = r["seconds"]
        print(f"| {layout} | {r['objects_full']:,}, {s['full']:.2f} s | {r['objects_append']:,}, "
              f"{r['bytes_append'] / 1e6:.1f} MB, {s['append']:.2f} s | {r['objects_ratio']:.1%}, "
              f"{r['bytes_ratio']:.1%}, {r['seconds_ratio']:.1%} | {r['append_vs_alone']:.2f}x | "
              f"{r['root_bytes']['full']:,} B / {r['root_bytes']['after_append']:,} B |", flush=True)
    memory = driver_memory(work, [int(n) for n in args.memory_files.split(",")], args.memory_batch)
    results["driver_memory"] = memory
    print("\n| run (signal-major; files of one shot, 50 signals of 64 values) | seconds | peak RSS |")
    print("|---|---:|---:|")
    for row in memory:
        print(f"| {row['run']} | {row['seconds']:.1f} | {row['peak_rss_mib']} MiB |")
    out = HERE / "out" / "append.json"
    if args.memory_only and out.exists():  # the layouts' figures of the last full run kept
        results = {**json.loads(out.read_text()), "driver_memory": memory}
    out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
