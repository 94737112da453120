"""`layoutkit advise` against the truth (issue 12): predicted time of every candidate and
pattern, then every candidate written at full size and measured under the same
conditions.

    .venv/bin/python benchmarks/bench_advise.py [--shots 40] [--signals 70] [--budget 2min]

For each weighting (`signal=1`, `shot=1`, and `shot=1,signal=1`) advise runs on the
sample archive with its default budget at 10 ms latency and 2 workers (threads); then
each candidate it measured is written from the whole archive with its recipe and timed
with verify's measurement (same patterns, same K, warm cache, 3 repeats). The table
gives predicted and measured seconds and GETs per candidate and pattern, the error,
and whether the recommended layout is the measured best or within 10% of it.
Results: benchmarks/out/advise.{txt,json} and advise-*.png (advise's own plots).
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import time
from pathlib import Path

from common import HERE, sample

from layoutkit.advise.candidates import Candidate
from layoutkit.advise.run import AdviseOptions, advise, parse_budget, plot, write_outputs
from layoutkit.archive import open_archive
from layoutkit.convert import convert
from layoutkit.reorder import reorder
from layoutkit.verify.patterns import plan_reads
from layoutkit.verify.run import Condition, describe, measure

WEIGHTINGS = ("signal=1", "shot=1", "shot=1,signal=1")


def full_size(src: Path, work: Path, name: str, recipe: str, template: str) -> Path:
    candidate = Candidate(name, recipe)
    dst = work / (name + (".zarr" if candidate.command == "convert" else ".h5"))
    if not dst.exists():
        (convert if candidate.command == "convert" else reorder)(src, dst, candidate.options(template))
    return dst


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shots", type=int, default=40)
    parser.add_argument("--signals", type=int, default=70)
    parser.add_argument("--budget", default="2min")
    parser.add_argument("--latency", type=float, default=0.010)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/layoutkit-bench"))
    args = parser.parse_args()
    src, logical = sample(args.workdir, args.shots, args.signals)
    work = args.workdir / f"advise-{args.shots}x{args.signals}"
    work.mkdir(parents=True, exist_ok=True)
    out = HERE / "out"
    lines: list[str] = []
    doc: dict = {"source": str(src), "logical_bytes": logical, "runs": []}

    def say(text: str = "") -> None:
        print(text, flush=True)
        lines.append(text)

    say(f"# advise on {src.name} ({args.shots} shots x {args.signals} signals, {logical / 1e9:.2f} GB of data); "
        f"{args.latency * 1e3:g} ms latency, {args.workers} workers (threads), budget {args.budget}")
    say(f"# command: {' '.join(sys.argv)}")
    measured_cache: dict[tuple[str, str], dict] = {}
    for weighting in WEIGHTINGS:
        options = AdviseOptions(patterns=weighting, latency=args.latency, workers=args.workers,
                                budget=parse_budget(args.budget))
        t0 = time.perf_counter()
        result = advise(src, options)
        elapsed = time.perf_counter() - t0
        tag = weighting.replace("=1", "").replace(",", "+")
        write_outputs(result, work / f"out-{tag}")
        shutil.copy(plot(result, work / f"out-{tag}"), out / f"advise-{tag}.png")
        template = options.template
        say()
        say(f"## --patterns {weighting}: advise took {elapsed:.1f} s of a {options.budget:.0f} s budget "
            f"({elapsed / options.budget:.0%}); samples of {result.scales[0]:.0f} and {result.scales[1]:.0f} shots "
            f"of {result.scales[2]:.0f}; K={result.reads}; recommended {result.recommended.name}")
        say(f"{'candidate':<20} {'pattern':<7} {'pred s':>8} {'meas s':>8} {'error':>7} {'pred GET':>9} "
            f"{'meas GET':>9}")
        run = {"weighting": weighting, "elapsed": elapsed, "budget": options.budget,
               "recommended": result.recommended.name, "rows": []}
        measured_weighted = {}
        for trial in result.ranked:
            variant = full_size(src, work, trial.name, trial.name, template)
            meas_pattern = {}
            for pattern, fit in trial.patterns.items():
                key = (trial.name, pattern)
                if key not in measured_cache:
                    with open_archive(src, template=template) as archive:
                        plan = plan_reads(pattern, archive, result.reads, options.seed)
                    paged = trial.command == "reorder"
                    cond = Condition("threads", args.workers, options.page_buffer if paged else None, "warm",
                                     args.latency, 0.0)
                    (r,) = measure([describe(variant, variant.name, True, template)], [plan], lambda _, cond=cond: [cond], 3,
                                   template)
                    measured_cache[key] = {"seconds": r.seconds, "requests": r.requests, "bytes": r.bytes_read}
                m = measured_cache[key]
                p = fit.prediction
                error = p.seconds / m["seconds"] - 1
                meas_pattern[pattern] = m["seconds"]
                say(f"{trial.name:<20} {pattern:<7} {p.seconds:>8.3f} {m['seconds']:>8.3f} {error:>+7.0%} "
                    f"{p.requests:>9.0f} {m['requests']:>9}")
                run["rows"].append({"candidate": trial.name, "pattern": pattern, "predicted_seconds": p.seconds,
                                    "measured_seconds": m["seconds"], "predicted_requests": p.requests,
                                    "measured_requests": m["requests"], "predicted_bytes": p.bytes,
                                    "measured_bytes": m["bytes"], "error": error})
            measured_weighted[trial.name] = sum(meas_pattern[p] * w for p, w in result.weights.items()) / sum(
                result.weights.values())
        best = min(measured_weighted, key=measured_weighted.get)
        rec = result.recommended.name
        gap = measured_weighted[rec] / measured_weighted[best] - 1
        within = sum(abs(r["error"]) <= 0.30 for r in run["rows"])
        say(f"measured best: {best} ({measured_weighted[best]:.3f} s weighted); recommended {rec} "
            f"({measured_weighted[rec]:.3f} s, {gap:+.0%} from the best); "
            f"{within} of {len(run['rows'])} predictions within +-30%; recommended order: {result.recommended.order}")
        run.update(measured_best=best, gap=gap, within_30=within)
        doc["runs"].append(run)
    say()
    say(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    (out / "advise.txt").write_text("\n".join(lines) + "\n")
    (out / "advise.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
