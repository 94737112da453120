"""The way in at scale: xarray's ``engine="layoutkit"`` and ``layoutkit.open`` against the
readers users have, at 1,000, 8,000 and 50,000 shots (issue 62).

    .venv/bin/python benchmarks/bench_engine.py [--sizes 1000,8000,50000] [--layouts all]

An archive of N shots, each 5 small signals (1,000 float32 samples) sharing one time base
at the shot's level (``/shots/<SHOT>/t``, a dimension scale, so that netCDF readers find
it too), is written with h5py and converted by ``layoutkit convert`` (shot-major,
signal-major, shot-packed; virtual: an Icechunk repository of references) and ``layoutkit
reorder --by shot``. Local files, page cache warm, each measurement the median of 5 (a
different shot each time), in one process whose imports are warm:

- ``open_dataset(group="SHOT/SIGNAL").load()`` on every layout, beside
  ``engine="zarr"`` opening that signal's group of the shot-major store
  (``group="shots/SHOT/signals"``, the signal selected and loaded) and
  ``engine="h5netcdf"`` opening it in the source;
- ``open_datatree(group="SHOT")`` (one shot's subtree, values lazy);
- ``layoutkit.open(store).shot(SHOT)`` and ``.signal("sig0")`` (every shot's);
- the same shot from a bucket of 30 ms a request and 100 MB/s (``model=LatencyModel(...)``:
  the requests a bucket would get, each waited for, those sent together overlapping);
- ``open_datatree()`` of the whole archive, at the smallest size only, beside
  ``engine="zarr"``'s tree of the shot-major store.

Above ``--slow-references-above`` shots (10,000) the references are timed once: there
``engine="zarr"`` reads the whole consolidated root for one group (minutes at 50,000).

The target: a group at 8,000 shots within 2x of ``engine="zarr"``, and no slower at
50,000 shots than at 1,000. Results: ``benchmarks/out/engine.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
LAYOUTS = ("source", "shot-major", "signal-major", "shot-packed", "virtual", "hdf5-paged by shot")
SIGNALS = 5
SAMPLES = 1000


def write_archive(path: Path, shots: int) -> None:
    """N shots of 5 small signals sharing a time base at the shot's level."""
    import h5py

    rng = np.random.default_rng(0)
    time_base = np.arange(SAMPLES, dtype="f8") * 1e-3
    with h5py.File(path, "w", libver="latest") as f:
        f.attrs["title"] = f"small-signal archive: {shots} shots x {SIGNALS} signals"
        for k in range(shots):
            g = f.create_group(f"shots/{1_000_000 + k}")
            g.attrs["shot"] = 1_000_000 + k
            t = g.create_dataset("t", data=time_base)
            t.make_scale("t")
            t.attrs["units"] = "s"
            signals = g.create_group("signals")
            for j in range(SIGNALS):
                d = signals.create_dataset(f"sig{j}", data=rng.standard_normal(SAMPLES).astype("f4"))
                d.dims[0].attach_scale(t)
                d.attrs["units"] = "V"


def build(work: Path, shots: int, layouts: list[str], write: bool = True) -> dict[str, str]:
    """The source and its variants (written once per size, kept between runs; with
    ``write`` False, only those written already)."""
    src = work / f"engine-{shots}.h5"
    if not src.exists():
        print(f"writing {src} ...", flush=True)
        partial = src.with_suffix(".partial.h5")
        write_archive(partial, shots)
        partial.rename(src)
    found = {"source": str(src)}
    for layout in layouts:
        if layout == "source":
            continue
        if layout.startswith("hdf5-paged"):
            dest = work / f"engine-{shots}-by-shot.h5"
            cmd = ["reorder", str(src), str(dest), "--by", "shot"]
            found[layout] = str(dest)
        else:
            dest = work / f"engine-{shots}-{layout}.{'icechunk' if layout == 'virtual' else 'zarr'}"
            cmd = ["convert", str(src), str(dest), "--layout", layout]
            found[layout] = f"icechunk:{dest}" if layout == "virtual" else str(dest)
        if not dest.exists() and not write:
            del found[layout]
            continue
        if not dest.exists():
            print(f"  {' '.join(cmd[:1] + cmd[3:])} -> {dest.name} ...", flush=True)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "layoutkit", "-q", *cmd], check=True)
            print(f"    {time.perf_counter() - t0:.0f} s", flush=True)
    return found


BUCKET = {"latency": 0.03, "bandwidth": 100e6}
BUCKET_ROW = "layoutkit.open().shot() in a bucket (simulated)"


def in_a_bucket(where: str, shot: str) -> None:
    """One shot read as from a bucket of 30 ms a request and 100 MB/s: the requests a
    bucket would get, each waited for (those sent together overlap, as on S3)."""
    import layoutkit
    from layoutkit.storage.counting import LatencyModel

    with layoutkit.open(where, model=LatencyModel(**BUCKET)) as archive:
        archive.shot(shot)
        GETS[where] = archive.counter.requests


GETS: dict[str, int] = {}


def median_of(fn, shots: list[str], repeat: int) -> float:  # noqa: ANN001
    times = []
    for k in range(repeat):
        shot = shots[k % len(shots)]
        t0 = time.perf_counter()
        fn(shot)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(found: dict[str, str], shots: int, repeat: int, whole_tree: bool,
            reference_repeat: int) -> dict[str, dict[str, float]]:
    import xarray as xr

    import layoutkit

    rng = np.random.default_rng(1)
    picks = [str(1_000_000 + int(k)) for k in rng.choice(shots, size=repeat + 1, replace=False)]
    warm, picks = picks[0], picks[1:]
    out: dict[str, dict[str, float]] = {}

    def zarr_group(shot: str) -> None:
        ds = xr.open_dataset(found["shot-major"], engine="zarr", group=f"shots/{shot}/signals")
        ds[["sig0"]].load()

    def h5netcdf_group(shot: str) -> None:
        ds = xr.open_dataset(found["source"], engine="h5netcdf", group=f"shots/{shot}/signals")
        ds[["sig0"]].load()

    refs = {}
    if "shot-major" in found:
        zarr_group(warm)
        refs["engine=zarr, shot-major store"] = median_of(zarr_group, picks, reference_repeat)
    h5netcdf_group(warm)
    refs["engine=h5netcdf, source"] = median_of(h5netcdf_group, picks, reference_repeat)
    out["references"] = refs
    for name, where in found.items():
        def group(shot: str, where: str = where) -> None:
            xr.open_dataset(where, engine="layoutkit", group=f"{shot}/sig0").load()

        def subtree(shot: str, where: str = where) -> None:
            xr.open_datatree(where, engine="layoutkit", group=shot).close()

        def one_shot(shot: str, where: str = where) -> None:
            with layoutkit.open(where) as archive:
                archive.shot(shot)

        group(warm)
        row = {"open_dataset(group=SHOT/SIGNAL)": median_of(group, picks, repeat),
               "open_datatree(group=SHOT)": median_of(subtree, picks, repeat),
               "layoutkit.open().shot()": median_of(one_shot, picks, repeat)}
        row[BUCKET_ROW] = median_of(lambda shot, where=where: in_a_bucket(where, shot), picks, repeat)
        t0 = time.perf_counter()
        with layoutkit.open(where) as archive:
            archive.signal("sig0")
        row["layoutkit.open().signal() (every shot)"] = time.perf_counter() - t0
        if whole_tree:
            t0 = time.perf_counter()
            xr.open_datatree(where, engine="layoutkit").close()
            row["open_datatree() (whole archive)"] = time.perf_counter() - t0
        out[name] = row
        print(f"  {name}: " + ", ".join(f"{k} {v:.3f} s" for k, v in row.items())
              + f" (GETs of the last shot in the bucket: {GETS[where]})", flush=True)
    if whole_tree and "shot-major" in found:
        t0 = time.perf_counter()
        xr.open_datatree(found["shot-major"], engine="zarr").close()
        refs["engine=zarr open_datatree() (whole archive)"] = time.perf_counter() - t0
    print("  references: " + ", ".join(f"{k} {v:.3f} s" for k, v in refs.items()), flush=True)
    return out


def report(results: dict[int, dict[str, dict[str, float]]], command: str) -> str:
    sizes = sorted(results)
    lines = [f"# xarray's engine at scale ({time.strftime('%Y-%m-%d')})", "",
             f"command: `{command}`; local files, page cache warm, median of 5 (a different shot each)", ""]
    header = "| read | layout | " + " | ".join(f"{n:,} shots" for n in sizes) + " |"
    lines += [header, "|---|---|" + "---:|" * len(sizes)]
    first = results[sizes[0]]
    for name in [k for k in first if k != "references"]:
        for read in first[name]:
            cells = [f"{results[n][name][read]:.3f} s" if read in results[n].get(name, {}) else "-" for n in sizes]
            lines.append(f"| {read} | {name} | " + " | ".join(cells) + " |")
    for ref in first["references"]:
        cells = [f"{results[n]['references'][ref]:.3f} s" if ref in results[n]["references"] else "-" for n in sizes]
        lines.append(f"| {ref} | (reference) | " + " | ".join(cells) + " |")
    zarr = "engine=zarr, shot-major store"
    lines += ["", "open_dataset(group=SHOT/SIGNAL): how many times faster than engine=zarr opening the same "
              "signal of the shot-major store:", "", "| layout | " + " | ".join(f"{n:,}" for n in sizes) + " |",
              "|---|" + "---:|" * len(sizes)]
    for name in [k for k in first if k != "references"]:
        cells = [f"{results[n]['references'][zarr] / results[n][name]['open_dataset(group=SHOT/SIGNAL)']:,.0f}x"
                 if zarr in results[n]["references"] and name in results[n] else "-" for n in sizes]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(results: dict[int, dict[str, dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results)
    fig, (ax, bucket) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name in [k for k in results[sizes[0]] if k != "references"]:
        have = [n for n in sizes if name in results[n]]
        ax.plot(have, [results[n][name]["open_dataset(group=SHOT/SIGNAL)"] for n in have], marker="o", label=name)
        have = [n for n in have if BUCKET_ROW in results[n][name]]
        bucket.plot(have, [results[n][name][BUCKET_ROW] for n in have], marker="o", label=name)
    for ref, style in (("engine=zarr, shot-major store", "k--"), ("engine=h5netcdf, source", "k:")):
        if all(ref in results[n]["references"] for n in sizes):
            ax.plot(sizes, [results[n]["references"][ref] for n in sizes], style, label=ref)
    for axis in (ax, bucket):
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("shots in the archive")
        axis.set_ylabel("seconds (median of 5)")
        axis.legend(fontsize=7)
    ax.set_title('local: xr.open_dataset(..., group="SHOT/SIGNAL").load()', fontsize=10)
    bucket.set_title("a bucket (30 ms a GET, 100 MB/s): layoutkit.open(...).shot(SHOT)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,8000,50000")
    parser.add_argument("--layouts", default="all", help="comma-separated, from: " + ", ".join(LAYOUTS))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/layoutkit-bench"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-build", action="store_true", help="measure only the variants written already")
    parser.add_argument("--bucket-only", action="store_true",
                        help="measure only one shot from the simulated bucket (time and GETs), on the variants "
                             "written already: benchmarks/out/engine-bucket.{json,md}")
    parser.add_argument("--slow-references-above", type=int, default=10_000,
                        help="above this many shots the references (minutes a read there) are timed once, not --repeat times")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    layouts = list(LAYOUTS) if args.layouts == "all" else ["source", *args.layouts.split(",")]
    args.workdir.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[int, dict[str, dict[str, float]]] = {}
    if args.bucket_only:
        bucket_only(args.workdir, sizes, layouts, args.repeat)
        return
    for n in sizes:
        print(f"{n:,} shots", flush=True)
        found = build(args.workdir, n, [x for x in layouts if x != "source"], write=not args.no_build)
        results[n] = measure(found, n, args.repeat, whole_tree=n == min(sizes),
                             reference_repeat=1 if n > args.slow_references_above else args.repeat)
        write(results, "benchmarks/bench_engine.py " + " ".join(sys.argv[1:]))  # each size as it is done


def bucket_only(work: Path, sizes: list[int], layouts: list[str], repeat: int) -> None:
    """One shot from the simulated bucket on each variant written already: the median
    time of ``repeat`` shots and the median of their GETs, by size."""
    rng = np.random.default_rng(1)
    rows: dict[str, dict[int, tuple[float, float]]] = {}
    for n in sizes:
        found = build(work, n, [x for x in layouts if x != "source"], write=False)
        picks = [str(1_000_000 + int(k)) for k in rng.choice(n, size=repeat, replace=False)]
        for name, where in found.items():
            times, gets = [], []
            for shot in picks:
                t0 = time.perf_counter()
                in_a_bucket(where, shot)
                times.append(time.perf_counter() - t0)
                gets.append(GETS[where])
            rows.setdefault(name, {})[n] = (statistics.median(times), statistics.median(gets))
            print(f"  {n:,} shots, {name}: {rows[name][n][0]:.3f} s, {rows[name][n][1]:g} GETs", flush=True)
    command = "benchmarks/bench_engine.py " + " ".join(sys.argv[1:])
    lines = [f"# One shot from a bucket, by archive size ({time.strftime('%Y-%m-%d')})", "",
             f"`{command}`: `layoutkit.open(store, model=LatencyModel(latency=0.03, bandwidth=100e6)).shot(SHOT)`, "
             f"median of {repeat} shots (seconds, and GETs).", "",
             "| layout | " + " | ".join(f"{n:,} shots" for n in sizes) + " |",
             "|---|" + "---:|" * len(sizes)]
    for name, by_size in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{by_size[n][0]:.3f} s ({by_size[n][1]:g})" if n in by_size else "-"
                                                 for n in sizes) + " |")
    OUT.mkdir(exist_ok=True)
    (OUT / "engine-bucket.json").write_text(json.dumps({"command": command, "date": time.strftime("%Y-%m-%d"),
                                                        "rows": {k: {str(n): v for n, v in r.items()}
                                                                 for k, r in rows.items()}}, indent=2))
    (OUT / "engine-bucket.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def write(results: dict[int, dict[str, dict[str, float]]], command: str) -> None:
    OUT.mkdir(exist_ok=True)
    (OUT / "engine.json").write_text(json.dumps({"command": command, "date": time.strftime("%Y-%m-%d"),
                                                 "results": {str(k): v for k, v in results.items()}}, indent=2))
    text = report(results, command)
    (OUT / "engine.md").write_text(text)
    plot(results, OUT / "engine.png")
    print(text, flush=True)


if __name__ == "__main__":
    main()
