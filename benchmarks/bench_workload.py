"""`layoutkit advise --workload` against the program itself (issue 67): does the order
advise predicts from a traced script's reads hold when the script runs on each layout?

    .venv/bin/python benchmarks/bench_workload.py [--shots 60] [--signals 30] [--latency 0.01]
        [--budget 3min] [--repeat 3] [--era5]

1. a sample archive; `layoutkit trace` of `examples/three_signals.py` on it (three
   signals of every shot, read with h5py, shot after shot); with `--era5`, a month of
   hourly ERA5-like maps (672 x 181 x 360, a day a chunk, 175 MB) and
   `examples/era5_point_and_map.py` (xarray and dask: the time series at one point, then
   the map at one time);
2. `layoutkit advise SRC --workload w.json` at the latency, in a process of its own:
   the predicted seconds and GETs of the workload at full size on every candidate;
3. every candidate it measured written from the whole archive with its recipe, and the
   script itself run on each (`three_signals.py LAYOUT --latency L`: the same reads
   through `layoutkit.open`, with the latency a request simulated and a paged file's page
   buffer as advise reads it; timed from opening to the last read), in a fresh process
   each, the median of `--repeat` runs;
4. the table: predicted and measured seconds and GETs per candidate, both orders, and
   Kendall's tau between them (1: the same order).

Results: benchmarks/out/workload.{txt,json}.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_advise import full_size
from common import HERE, PY, parse_args, sample

SCRIPT = HERE.parent / "examples" / "three_signals.py"
ERA5 = HERE.parent / "examples" / "era5_point_and_map.py"
TEMPLATE = "/shots/{shot}/signals/{signal}"


def kendall_tau(a: list[int], b: list[int]) -> float:
    """Kendall's tau of two rankings of the same items (no ties): 1 the same order, -1 reversed."""
    pairs = [(i, j) for i in range(len(a)) for j in range(i + 1, len(a))]
    agree = sum(1 if (a[i] - a[j]) * (b[i] - b[j]) > 0 else -1 for i, j in pairs)
    return agree / len(pairs) if pairs else 1.0


def run_script(script: Path, layout: Path | str, latency: float, repeat: int) -> tuple[float, int]:
    """The script on ``layout`` (fresh process each run): median seconds of its reads, and GETs."""
    seconds, requests = [], 0
    for _ in range(repeat):
        done = subprocess.run([PY, str(script), str(layout), "--latency", str(latency)], capture_output=True,
                              text=True, check=True)
        m = re.search(r"(\d+) requests, ([\d.]+) s", done.stdout)
        assert m, done.stdout + done.stderr
        requests, seconds = int(m.group(1)), [*seconds, float(m.group(2))]
    return statistics.median(seconds), requests


def source(args, work: Path) -> tuple[Path, Path, str]:  # noqa: ANN001 - argparse.Namespace
    """The source, the script traced on it, and the benchmark's name."""
    if not args.era5:
        src, _ = sample(args.workdir, args.shots, args.signals, args.rate_factor)
        return src, SCRIPT, f"{args.shots}x{args.signals}"
    src = work / "era5" / "2010-01.nc"
    if not src.exists():  # the example's own file, on a 1-degree grid
        import importlib.util

        spec = importlib.util.spec_from_file_location("era5_example", ERA5)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.make(src.parent, 1, lat=181, lon=360)
    return src, ERA5, "era5"


def main() -> None:
    def extra(parser) -> None:  # noqa: ANN001 - argparse.ArgumentParser
        parser.add_argument("--latency", type=float, default=0.010, help="Seconds a request.")
        parser.add_argument("--budget", default="3min")
        parser.add_argument("--repeat", type=int, default=3)
        parser.add_argument("--era5", action="store_true", help="A month of ERA5-like maps and a point-and-map analysis.")

    import sys as _sys

    if "--shots" not in _sys.argv:
        _sys.argv += ["--shots", "60", "--signals", "30"]
    args = parse_args(__doc__, extra)
    work = args.workdir / "workload"
    work.mkdir(parents=True, exist_ok=True)
    src, script, name = source(args, work)
    trace = work / f"w-{name}.json"
    subprocess.run([PY, "-m", "layoutkit", "-q", "trace", "--out", str(trace), "--overwrite", "--", PY, str(script),
                    str(src)], check=True, capture_output=True)
    out = work / f"advice-{name}"
    started = time.perf_counter()
    subprocess.run([PY, "-m", "layoutkit", "-q", "advise", str(src), "--workload", str(trace), "--latency",
                    f"{args.latency * 1e3:g}ms", "--workers", str(args.workers), "--budget", args.budget, "--out",
                    str(out), "--overwrite"], check=True)
    advise_seconds = time.perf_counter() - started
    doc = json.loads((out / "results.json").read_text())
    rows = []
    for c in doc["candidates"]:
        if c["status"] != "measured":
            continue
        predicted = c["patterns"]["workload"]["predicted"]
        (work / name).mkdir(exist_ok=True)
        layout = full_size(src, work / name, c["name"], c["name"], TEMPLATE)
        seconds, requests = run_script(script, layout, args.latency, args.repeat)
        rows.append({"candidate": c["name"], "predicted_seconds": predicted["seconds"],
                     "predicted_requests": predicted["requests"], "script_seconds": seconds,
                     "script_requests": requests})
        print(f"{c['name']}: predicted {predicted['seconds']:.3f} s, {predicted['requests']:.0f} GETs; "
              f"the script {seconds:.3f} s, {requests} GETs", flush=True)
    ranking = [n for n in doc["ranking"] if any(r["candidate"] == n for r in rows)]
    measured = [r["candidate"] for r in sorted(rows, key=lambda r: r["script_seconds"])]
    tau = kendall_tau([ranking.index(r["candidate"]) for r in rows], [measured.index(r["candidate"]) for r in rows])
    by_seconds = [r["candidate"] for r in sorted(rows, key=lambda r: r["predicted_seconds"])]
    tau_seconds = kendall_tau([by_seconds.index(r["candidate"]) for r in rows], [measured.index(r["candidate"]) for r in rows])
    lines = [f"python benchmarks/bench_workload.py --shots {args.shots} --signals {args.signals} --latency "
             f"{args.latency} --budget {args.budget} --repeat {args.repeat}{' --era5' if args.era5 else ''}",
             f"advise --workload: {advise_seconds:.0f} s; recommended {doc['recommended']}; the workload: "
             f"{doc['workload']}",
             "| candidate | predicted s | predicted GETs | script s | script GETs | script / predicted |",
             "|---|---:|---:|---:|---:|---:|"]
    for name in ranking:
        r = next(r for r in rows if r["candidate"] == name)
        lines.append(f"| {name} | {r['predicted_seconds']:.3f} | {r['predicted_requests']:.0f} | "
                     f"{r['script_seconds']:.3f} | {r['script_requests']} | "
                     f"{r['script_seconds'] / r['predicted_seconds']:.2f} |")
    lines += [f"advise's ranking:            {', '.join(ranking)}",
              f"by predicted seconds alone:  {', '.join(by_seconds)}",
              f"the script's order:          {', '.join(measured)}",
              f"Kendall's tau, advise's ranking against the script's order: {tau:.2f}; predicted seconds against it: "
              f"{tau_seconds:.2f}; the recommended layout is the script's #{measured.index(doc['recommended']) + 1} "
              f"of {len(measured)}"]
    text = "\n".join(lines)
    print(text)
    (HERE / "out").mkdir(exist_ok=True)
    suffix = "-era5" if args.era5 else ""
    (HERE / "out" / f"workload{suffix}.txt").write_text(text + "\n")
    (HERE / "out" / f"workload{suffix}.json").write_text(json.dumps({"rows": rows, "ranking": ranking, "measured": measured,
                                                           "tau": tau, "tau_seconds": tau_seconds, "advice": doc}, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
