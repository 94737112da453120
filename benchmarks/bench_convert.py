"""Benchmark `layoutkit convert` against the references, in one run, on one sample.

    python benchmarks/bench_convert.py [--shots 250] [--workdir /tmp/layoutkit-bench]

Writes a synthetic shot archive (250 shots x 70 signals = 2.2 GB of data by default),
then times, each in a fresh process:
  - layoutkit convert (Zarr v3, zstd:3, 2 workers)
  - a plain h5py-to-zarr loop (zarr.create_array per dataset, a[...] = ds[...], zstd:3)
  - h5repack -S PAGE -G 8388608 (an HDF5 raw copy: the I/O reference)
and reports MB/s of logical data, the ratios and peak RSS, as a table, JSON and a plot
under benchmarks/out/. The source file is read once first so every method starts with
it in the page cache.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable


def measure(cmd: list[str]) -> dict:
    out = subprocess.run([PY, str(HERE / "measure.py"), "--", *cmd], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["returncode"] != 0:
        raise SystemExit(f"{cmd[0]} failed: {result['stderr']}")
    return result


def du(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shots", type=int, default=250)
    parser.add_argument("--signals", type=int, default=70)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/layoutkit-bench"))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from layoutkit.sample import estimate_logical_bytes

    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"sample-{args.shots}x{args.signals}.h5"
    if not src.exists():
        print(f"writing {src} ...", flush=True)
        subprocess.run([PY, "-m", "layoutkit", "sample", str(src), "--shots", str(args.shots),
                        "--signals", str(args.signals)], check=True)
    logical = estimate_logical_bytes(args.shots, args.signals)
    with open(src, "rb") as fh:  # warm the page cache the same way for everyone
        while fh.read(64 << 20):
            pass

    runs = {
        "layoutkit convert": [PY, "-m", "layoutkit", "-q", "convert", str(src), str(work / "layoutkit.zarr"),
                              "--workers", str(args.workers)],
        "plain h5py->zarr loop": [PY, str(HERE / "plain_loop.py"), str(src), str(work / "plain.zarr")],
        "h5repack -S PAGE -G 8388608": ["h5repack", "-S", "PAGE", "-G", "8388608", str(src), str(work / "repack.h5")],
    }
    results = {}
    for name, cmd in runs.items():
        target = Path(cmd[-1]) if "h5repack" in name else Path(cmd[6] if name.startswith("layoutkit") else cmd[-1])
        if target.exists():
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        if shutil.which(cmd[0]) is None and not Path(cmd[0]).exists():
            print(f"skipping {name}: {cmd[0]} not installed (apt-get install hdf5-tools)")
            continue
        print(f"running {name} ...", flush=True)
        r = measure(cmd)
        r["out_bytes"] = du(target)
        r["mb_per_s"] = logical / r["seconds"] / 1e6
        results[name] = r

    base = results.get("plain h5py->zarr loop")
    print(f"\nsample: {src.name}, {logical / 1e9:.2f} GB of data, {du(src) / 1e9:.2f} GB on disk, "
          f"{args.workers} workers\n")
    print(f"| method | seconds | MB/s | vs plain loop | peak RSS | output |")
    print(f"|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        ratio = base["seconds"] / r["seconds"] if base else float("nan")
        print(f"| {name} | {r['seconds']:.1f} | {r['mb_per_s']:.0f} | {ratio:.1f}x | "
              f"{r['peak_rss'] / 2**20:.0f} MiB | {r['out_bytes'] / 1e9:.2f} GB |")

    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "convert.json").write_text(json.dumps({"logical_bytes": logical, "source": src.name, "results": results}, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
    names = list(results)
    ax1.barh(names, [results[n]["mb_per_s"] for n in names], color="tab:blue")
    ax1.set_xlabel("MB/s of logical data (higher is better)")
    ax2.barh(names, [results[n]["peak_rss"] / 2**20 for n in names], color="tab:orange")
    ax2.set_xlabel("peak RSS, MiB")
    ax2.set_yticks([])
    fig.suptitle(f"convert benchmark: {logical / 1e9:.2f} GB shot archive, {args.workers} workers")
    fig.tight_layout()
    fig.savefig(out / "convert.png", dpi=120)
    print(f"\nwrote {out / 'convert.json'} and {out / 'convert.png'}")


if __name__ == "__main__":
    main()
