"""The report of ``layoutkit verify``: a table, one line per pattern naming the fastest
variant, ``results.csv`` / ``results.json`` and two plots."""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from layoutkit.options import format_size
from layoutkit.verify.run import Result

CSV_FIELDS = [
    "variant", "format", "layout", "pattern", "engine", "workers", "page_buffer", "cache", "latency",
    "bandwidth", "seconds", "seconds_min", "seconds_max", "repeats", "requests", "bytes_read",
    "logical_bytes", "mb_per_s", "meta_hit_rate", "raw_hit_rate", "equal", "error",
]  # fmt: skip


def _condition(r: Result) -> tuple[Any, ...]:
    return (r.engine, r.workers, r.cache, r.latency, r.bandwidth)


def _pb(r: Result) -> str:
    return "-" if r.page_buffer is None else ("0" if r.page_buffer == 0 else format_size(r.page_buffer))


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def table(results: Sequence[Result], title: str) -> Table:
    """The terminal table: one row per variant x pattern x condition. Condition columns
    that are the same in every row move to the title, so the table fits a terminal."""
    columns: list[tuple[str, str, Any]] = [
        ("variant", "left", lambda r: r.variant),
        ("pattern", "left", lambda r: r.pattern),
        ("engine", "left", lambda r: r.engine),
        ("w", "right", lambda r: str(r.workers)),
        ("page buf", "right", _pb),
        ("cache", "left", lambda r: r.cache),
        ("latency", "right", lambda r: f"{r.latency * 1e3:g} ms"),
        ("bandwidth", "right", lambda r: f"{format_size(r.bandwidth)}/s" if r.bandwidth else "unlimited"),
        ("seconds", "right", lambda r: f"{r.seconds:.3f}" if not r.error else "[red]failed[/]"),
        ("spread", "right", lambda r: f"{r.seconds_min:.3f}-{r.seconds_max:.3f}" if r.repeats > 1 else "-"),
        ("requests", "right", lambda r: f"{r.requests:,}"),
        ("read", "right", lambda r: format_size(r.bytes_read)),
        ("MB/s", "right", lambda r: f"{r.mb_per_s:.1f}"),
        ("hits m/r", "right", lambda r: "-" if r.meta_hit_rate is None else f"{_rate(r.meta_hit_rate)}/{_rate(r.raw_hit_rate)}"),
        ("equal", "left", lambda r: _equal(r, source)),
    ]  # fmt: skip
    source = results[0].variant if results else ""
    constant = {"engine", "w", "cache", "latency", "bandwidth"}
    shown, fixed = [], []
    for col in columns:
        values = {col[2](r) for r in results}
        (fixed if col[0] in constant and len(values) == 1 else shown).append(col)
    if fixed and results:
        title += " (" + ", ".join(f"{name} {fn(results[0])}" for name, _, fn in fixed) + ")"
    t = Table(title=title, title_justify="left")
    for name, justify, _ in shown:
        t.add_column(name, justify=justify, no_wrap=name != "variant")  # type: ignore[arg-type]
    for r in results:
        t.add_row(*(fn(r) for _, _, fn in shown))
    return t


def _equal(r: Result, source: str) -> str:
    if r.variant == source:
        return "source"
    return "not checked" if r.equal is None else ("yes" if r.equal else "[red]NO[/]")


def fastest(results: Sequence[Result], source: str) -> list[str]:
    """One line per pattern: the variant with the best speed-up over the source, as the
    geometric mean over the conditions both ran under (each at its best page buffer)."""
    best: dict[tuple[str, str, tuple[Any, ...]], float] = {}
    for r in results:
        if r.error:
            continue
        key = (r.pattern, r.variant, _condition(r))
        best[key] = min(best.get(key, math.inf), r.seconds)
    lines = []
    for pattern in dict.fromkeys(r.pattern for r in results):
        ratios: dict[str, list[float]] = defaultdict(list)
        for (p, variant, cond), secs in best.items():
            base = best.get((pattern, source, cond))
            if p == pattern and variant != source and base and secs > 0:
                ratios[variant].append(base / secs)
        if not ratios:
            continue
        gmean = {v: math.exp(sum(map(math.log, xs)) / len(xs)) for v, xs in ratios.items()}
        winner = max(gmean, key=gmean.__getitem__)
        xs = ratios[winner]
        spread = f" (from {min(xs):.1f}x to {max(xs):.1f}x)" if len(xs) > 1 else ""
        lines.append(
            f"{pattern}: fastest is {winner}, {gmean[winner]:.1f}x the source's speed"
            f" over {len(xs)} condition{'s' if len(xs) > 1 else ''}{spread}"
        )
    return lines


def failures(results: Sequence[Result]) -> list[str]:
    """One line per variant, pattern and reason a pattern could not run."""
    seen: dict[tuple[str, str, str], list[Result]] = {}
    for r in results:
        if r.error:
            seen.setdefault((r.variant, r.pattern, r.error), []).append(r)
    return [
        f"{variant}: pattern {pattern!r} could not run ({len(rows)} of its rows): {error}"
        for (variant, pattern, error), rows in seen.items()
    ]


def write(results: Sequence[Result], out: Path, meta: dict[str, Any]) -> list[Path]:
    """Write results.csv, results.json and the plots under ``out``; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in results:
            w.writerow(r.row())
    (out / "results.json").write_text(json.dumps({**meta, "results": [r.row() for r in results]}, indent=1))
    return [out / "results.csv", out / "results.json", *plot(results, out)]


def plot(results: Sequence[Result], out: Path) -> list[Path]:
    """time vs workers per pattern (one line per variant, page buffer and latency) and
    requests per pattern per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    patterns = list(dict.fromkeys(r.pattern for r in results))
    variants = list(dict.fromkeys(r.variant for r in results))
    paths = []
    # 1. time vs workers
    fig, axes = plt.subplots(1, len(patterns), figsize=(4.2 * len(patterns), 4), squeeze=False)
    colors = {v: f"C{i}" for i, v in enumerate(variants)}
    latencies = sorted({r.latency for r in results})
    styles = dict(zip(latencies, ["-", "--", ":", "-."] * 4))
    for ax, pattern in zip(axes[0], patterns):
        lines: dict[tuple[Any, ...], list[tuple[int, float]]] = defaultdict(list)
        for r in results:
            if r.pattern == pattern and r.cache == results[0].cache:
                lines[(r.variant, r.engine, r.page_buffer, r.latency, r.bandwidth)].append((r.workers, r.seconds))
        for (variant, engine, pb, lat, _bw), pts in lines.items():
            pts.sort()
            label = f"{variant} {engine}" + (f" pb={_pb_short(pb)}" if pb else "") + f" {lat * 1e3:g}ms"
            ax.plot(*zip(*pts), styles[lat], marker="o", color=colors[variant], label=label,
                    alpha=1.0 if not pb else 0.6)  # fmt: skip
        ax.set_title(pattern)
        ax.set_xlabel("workers")
        ax.set_ylabel("seconds (median)")
        ax.set_yscale("log")
        ax.set_xticks(sorted({r.workers for r in results}))
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(4, max(1, len(labels))), fontsize="small")
    fig.tight_layout(rect=(0, 0.08 + 0.03 * math.ceil(len(labels) / 4), 1, 1))
    fig.savefig(out / "time_vs_workers.png", dpi=110)
    plt.close(fig)
    paths.append(out / "time_vs_workers.png")
    # 2. requests per pattern per variant (fewest over the conditions: each variant at
    #    its best page buffer, and also without one for paged HDF5)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(patterns) * max(1, len(variants)) / 2), 4))
    bars: list[tuple[str, dict[str, int]]] = []
    for v in variants:
        for label, keep in (("", lambda r: not r.page_buffer), (" +page buffer", lambda r: bool(r.page_buffer))):
            counts = {}
            for p in patterns:
                rs = [r.requests for r in results if r.variant == v and r.pattern == p and keep(r)]
                if rs:
                    counts[p] = min(rs)
            if counts:
                bars.append((v + label, counts))
    width = 0.8 / max(1, len(bars))
    for i, (label, counts) in enumerate(bars):
        xs = [patterns.index(p) + i * width for p in counts]
        ax.bar(xs, list(counts.values()), width, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(patterns))], patterns)
    ax.set_yscale("log")
    ax.set_ylabel("read requests")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out / "requests.png", dpi=110)
    plt.close(fig)
    paths.append(out / "requests.png")
    return paths


def _pb_short(pb: int | None) -> str:
    return format_size(pb).replace(".0 ", "").replace(" ", "") if pb else "0"


__all__ = ["fastest", "plot", "table", "write"]
