"""Benchmark `convert --compressor source` (stored chunks copied, never decoded) against
h5repack, which copies HDF5 chunks raw too, in one run, on one sample.

    python benchmarks/bench_copy.py [--shots 250] [--workdir /tmp/layoutkit-bench] [--cache warm|cold]
        [--copies-only] [--repeat 1] [--settle 330]

On a synthetic shot archive (250 shots x 70 signals = 2.1 GB of data, deflate with and
without shuffle), each in a fresh process, after the last run's writes are flushed to
disk (``sync``, and 2 s for its writeback to settle) and the page cache emptied (when
run as root), the source read into the page cache (``--cache warm``, the default) or
evicted from it (``--cache cold``):
layoutkit convert --chunks source --compressor source, unsharded and with --shards auto;
layoutkit convert with its default zstd:3 (decode and re-encode, for comparison; not
with ``--copies-only``); and
h5repack -S PAGE -G 8388608 (the reference). With ``--repeat N`` the methods run N
rounds, in turn (the order reversed every other round), and each reports its median.

No output is deleted between runs: each run writes its own, and all are removed at the
end. The outputs an earlier benchmark left are removed first, and then the benchmark
waits ``--settle`` seconds: ext4 without a journal (this machine's) skips, when it makes
a file, every inode freed in the last 5 s, or in the last 5 min while that inode's table
block is dirty (``recently_deleted``). A run of ~7,700 files just after a store of that
size was deleted spent 10-15% of all CPU time there (perf), against 2% five minutes
later; h5repack makes one file and does not see it.

Reports seconds, MB/s of logical and of stored bytes, speed against h5repack and peak
RSS (table, JSON and PNG under benchmarks/out/copy.*). Run it on a quiet machine: it
measures wall time.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time

from common import LAYOUTKIT, parse_args, report, run_all, sample, suffix

from layoutkit.memory import write_proc

REFERENCE = "h5repack -S PAGE -G 8388608"


def drop_caches() -> bool:
    """Empty the page cache (as root): each run then starts with the memory free. With the
    earlier runs' outputs in it, writing a file made the kernel reclaim pages first: the
    same 1.8 GB of files took 0.6 s of system time with the memory free and 3.7 s with it
    full. False when it cannot be done (not root): the runs then follow one another as they
    come."""
    return write_proc("/proc/sys/vm/drop_caches", "1\n")


def main() -> None:
    def extra(parser) -> None:  # noqa: ANN001 - argparse.ArgumentParser
        parser.add_argument("--cache", choices=("warm", "cold"), default="warm")
        parser.add_argument("--copies-only", action="store_true", help="leave out the re-encoding run")
        parser.add_argument("--repeat", type=int, default=1, help="rounds of every method; each reports its median")
        parser.add_argument("--settle", type=float, default=330.0,
                            help="seconds to wait after removing an earlier benchmark's outputs")

    args = parse_args(__doc__, extra)
    src, logical = sample(args.workdir, args.shots, args.signals, args.rate_factor)
    if not shutil.which("h5repack"):
        raise SystemExit("h5repack is the reference: apt-get install -y hdf5-tools")
    work = args.workdir

    def runs(round_: int) -> dict[str, tuple[list[str], object]]:
        def convert(name: str, *extra: str) -> tuple[list[str], object]:
            out = work / f"{name}-{round_}.zarr"
            return [*LAYOUTKIT, "convert", str(src), str(out), "--workers", str(args.workers), *extra], out

        repack = work / f"repack-{round_}.h5"
        methods = {
            "layoutkit convert --compressor source": convert("copy", "--chunks", "source", "--compressor", "source"),
            "layoutkit convert --compressor source --shards auto": convert(
                "copy-sharded", "--chunks", "source", "--compressor", "source", "--shards", "auto"),
            "layoutkit convert (zstd:3, re-encoded)": convert("zstd"),
            REFERENCE: (["h5repack", "-S", "PAGE", "-G", "8388608", str(src), str(repack)], repack),
        }
        if args.copies_only:
            del methods["layoutkit convert (zstd:3, re-encoded)"]
        return methods if round_ % 2 == 0 else dict(reversed(methods.items()))

    def before() -> None:
        # the last run's output on disk, its writeback settled: it does not fall on this run
        os.sync()
        time.sleep(2)
        if drop_caches():  # every run with the memory free, not after the last one's output filled it
            time.sleep(1)
        if args.cache == "warm":
            with open(src, "rb") as fh:
                while fh.read(1 << 24):
                    pass
        else:
            fd = os.open(src, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)

    def remove_outputs() -> bool:
        # this version's outputs (NAME-ROUND) and the earlier versions' (NAME)
        found = [p for pattern in ("copy*.zarr", "zstd*.zarr", "repack*.h5") for p in work.glob(pattern)]
        for target in found:
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
        return bool(found)

    if remove_outputs() and args.settle > 0:
        print(f"removed an earlier benchmark's outputs: waiting {args.settle:.0f} s for the file system to settle",
              flush=True)
        os.sync()
        time.sleep(args.settle)
    rounds = [run_all(runs(i), logical, before=before) for i in range(args.repeat)]
    remove_outputs()
    results = {}
    for method in runs(0):
        measured = sorted((r[method] for r in rounds), key=lambda r: r["seconds"])
        results[method] = {**measured[(len(measured) - 1) // 2], "rounds": [r["seconds"] for r in measured]}
        results[method]["seconds"] = statistics.median(results[method]["rounds"])
        results[method]["mb_per_s"] = logical / results[method]["seconds"] / 1e6
    name = "copy" + suffix(args.rate_factor) + ("-cold" if args.cache == "cold" else "")
    report(f"copy: {src.name}, {logical / 1e9:.2f} GB of data, {args.workers} workers, source {args.cache}"
           + (f", median of {args.repeat} rounds" if args.repeat > 1 else ""), results, REFERENCE, logical, name)


if __name__ == "__main__":
    main()
