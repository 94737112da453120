"""The report of ``layoutkit verify``: the answer first (the fastest layout for each read,
its speed-up over the source and over the slowest, and the requests that explain it),
then the full table, ``results.csv`` / ``results.json`` / ``summary.md`` and the plots
that what varies calls for, each with a caption."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import JustifyMethod
from rich.table import Table

from layoutkit.options import format_size
from layoutkit.verify.run import Result

CSV_FIELDS = [
    "variant", "format", "layout", "pattern", "engine", "workers", "page_buffer", "cache", "latency",
    "bandwidth", "seconds", "seconds_min", "seconds_max", "repeats", "requests", "bytes_read",
    "logical_bytes", "mb_per_s", "meta_hit_rate", "raw_hit_rate", "peak_rss", "equal", "error",
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
    source = results[0].variant if results else ""
    columns: list[tuple[str, JustifyMethod, Callable[[Result], str]]] = [
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
    constant = {"engine", "w", "cache", "latency", "bandwidth"}
    shown: list[tuple[str, JustifyMethod, Callable[[Result], str]]] = []
    fixed: list[tuple[str, JustifyMethod, Callable[[Result], str]]] = []
    for col in columns:
        values = {col[2](r) for r in results}
        (fixed if col[0] in constant and len(values) == 1 else shown).append(col)
    if fixed and results:
        title += " (" + ", ".join(_fixed_text(name, fn(results[0])) for name, _, fn in fixed) + ")"
    legend = [f"{name}: {COLUMNS[name]}" for name, _, _ in shown if name in COLUMNS]
    t = Table(title=title, title_justify="left", caption="; ".join(legend) + ".", caption_justify="left")
    for name, justify, _ in shown:
        t.add_column(name, justify=justify, no_wrap=name != "variant")
    for r in results:
        t.add_row(*(fn(r) for _, _, fn in shown))
    return t


COLUMNS = {
    "w": "workers",
    "page buf": "HDF5's page buffer (0: none; -: not an HDF5 file)",
    "seconds": "the median of the repeats",
    "spread": "fastest to slowest of the repeats",
    "requests": "reads of the file, or GETs from the bucket",
    "read": "the bytes they read",
    "MB/s": "the pattern's data per second",
    "hits m/r": "share of HDF5's metadata / raw-data reads its page buffer held",
    "equal": "whether the variant holds exactly the source's data (the proof)",
}
"""What each column of :func:`table` means, printed under it."""


def _fixed_text(name: str, value: str) -> str:
    """A column every row shares, as the title says it: "1 worker", "cold cache"."""
    if name == "w":
        return f"{value} worker{'' if value == '1' else 's'}"
    return f"{value} cache" if name == "cache" else f"{name} {value}"


def _equal(r: Result, source: str) -> str:
    if r.variant == source:
        return "source"
    return "not checked" if r.equal is None else ("yes" if r.equal else "[red]NO[/]")


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


def write(results: Sequence[Result], out: Path, meta: dict[str, Any]) -> list[tuple[Path, str]]:
    """Write results.csv, results.json, summary.md and the plots under ``out``; returns
    each path with a caption."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in results:
            w.writerow(r.row())
    (out / "results.json").write_text(json.dumps({**meta, "results": [r.row() for r in results]}, indent=1))
    source = results[0].variant if results else ""
    note = too_small_to_matter(results)
    (out / "summary.md").write_text(answer_markdown(results, source) + (f"\n{note}\n" if note else ""))
    return [(out / "results.csv", "results.csv: one row per variant, pattern and condition"),
            (out / "results.json", "results.json: the same rows, with the options and the mismatches"),
            (out / "summary.md", "summary.md: the answer as a markdown table"), *plot(results, out)]


@dataclass(frozen=True)
class Answer:
    """One line of the answer: a pattern under one condition, its best and worst layouts."""

    pattern: str
    condition: str  # the conditions that vary between lines, e.g. "10 ms"; "" when none does
    best: str
    seconds: float
    requests: int
    source_seconds: float
    source_requests: int
    worst: str
    worst_seconds: float
    worst_requests: int

    @property
    def vs_source(self) -> float:
        return self.source_seconds / self.seconds if self.seconds else math.inf

    @property
    def vs_worst(self) -> float:
        return self.worst_seconds / self.seconds if self.seconds else math.inf


def _varying(results: Sequence[Result]) -> dict[str, Any]:
    """The condition fields that take more than one value, and how to print each."""
    fields = {
        "engine": lambda r: r.engine,
        "workers": lambda r: f"{r.workers} worker{'s' if r.workers > 1 else ''}",
        "cache": lambda r: r.cache,
        "latency": lambda r: f"{r.latency * 1e3:g} ms",
        "bandwidth": lambda r: f"{format_size(r.bandwidth)}/s" if r.bandwidth else "unlimited",
    }
    return {k: fn for k, fn in fields.items() if len({fn(r) for r in results}) > 1}


def conditions_text(results: Sequence[Result]) -> str:
    """The conditions every row shares, for titles: "engine threads, 1 worker, cold cache"."""
    if not results:
        return ""
    r = results[0]
    varying = _varying(results)
    parts = []
    if "engine" not in varying:
        parts.append(f"engine {r.engine}")
    if "workers" not in varying:
        parts.append(f"{r.workers} worker{'s' if r.workers > 1 else ''}")
    if "cache" not in varying:
        parts.append(f"{r.cache} cache")
    if "latency" not in varying:
        real = all(x.remote for x in results)
        parts.append(f"{r.latency * 1e3:g} ms per request{' simulated, over real requests' if real else ''}"
                     if r.latency else "real requests to a bucket, no latency simulated" if real
                     else "no simulated latency")
    if "bandwidth" not in varying and r.bandwidth:
        parts.append(f"{format_size(r.bandwidth)}/s")
    return ", ".join(parts)


def answers(results: Sequence[Result], source: str) -> list[Answer]:
    """For each pattern and each condition that varies: the fastest layout (each at its
    best page buffer), its speed-up over the source and over the slowest layout, and the
    requests that explain them. Rows that failed take no part."""
    varying = _varying(results)
    best: dict[tuple[str, str, str], Result] = {}
    for r in results:
        if r.error:
            continue
        cond = ", ".join(fn(r) for fn in varying.values())
        key = (r.pattern, cond, r.variant)
        if key not in best or r.seconds < best[key].seconds:
            best[key] = r
    out = []
    for pattern, cond in dict.fromkeys((p, c) for p, c, _ in best):
        rows = {v: r for (p, c, v), r in best.items() if (p, c) == (pattern, cond)}
        if source not in rows or len(rows) < 2:
            continue
        # the source among them: a variant slower than the source is never called the fastest
        win = min(rows.values(), key=lambda r: (r.seconds, r.variant != source))
        lose = max(rows.values(), key=lambda r: r.seconds)
        src = rows[source]
        out.append(Answer(pattern, cond, win.variant, win.seconds, win.requests, src.seconds, src.requests,
                          lose.variant, lose.seconds, lose.requests))
    return out


NOISE_FLOOR = 0.005
"""Seconds under which two reads are not told apart, whatever their repeats said: the
timer, the scheduler and the page cache move single reads by a few milliseconds."""


def too_small_to_matter(results: Sequence[Result]) -> str | None:
    """When every layout reads every pattern within the measurement's noise of every
    other (the spread of each row's repeats, at least :data:`NOISE_FLOOR`): one sentence
    saying that the archive is too small for its layout to matter, and from about what
    size it would (the differences grow with the data a read takes). None otherwise."""
    rows = [r for r in results if not r.error]
    patterns = list(dict.fromkeys(r.pattern for r in rows if r.pattern not in ("open", "list")))
    if not patterns or len({r.variant for r in rows}) < 2:
        return None
    noise, widest, scale = NOISE_FLOOR, 0.0, math.inf
    for pattern in patterns:
        mine = [r for r in rows if r.pattern == pattern]
        spread = max(r.seconds for r in mine) - min(r.seconds for r in mine)
        here = max(NOISE_FLOOR, *(r.seconds_max - r.seconds_min for r in mine))
        if spread > here:
            return None
        noise, widest = max(noise, here), max(widest, spread)
        logical = max(r.logical_bytes for r in mine)
        if spread > 0 and logical:
            scale = min(scale, here / spread * logical)
    largest = max(r.logical_bytes for r in rows)
    when = (f"the differences grow with the data a read takes: at about {format_size(scale)} per read (this one "
            f"reads at most {format_size(largest)}) they would show" if math.isfinite(scale) and scale > largest
            else "no difference between the layouts was measured at all")
    return (f"Every layout reads every pattern within the measurement's noise ({noise * 1e3:.0f} ms) of the others: "
            f"this archive is too small for its layout to matter; {when}. Try a larger sample (layoutkit sample "
            "--shots, --rate-factor) or simulated latency (--latency 10ms).")


def answer_table(results: Sequence[Result], source: str) -> Table:
    """The short table that leads the report: the answer, before the details."""
    rows = answers(results, source)
    varying = bool(_varying(results))
    t = Table(title=f"The answer: the fastest layout for each read ({conditions_text(results)})", title_justify="left",
              caption="seconds: the median of the repeats; vs the source: how many times faster than the source "
                      "read the same way (and the source's requests); vs the slowest: than the slowest layout (and "
                      "its requests)." + latency_note(results), caption_justify="left")
    headers: list[tuple[str, JustifyMethod]] = [
        ("read", "left"), *((("conditions", "left"),) if varying else ()), ("fastest", "left"), ("seconds", "right"),
        ("requests", "right"), ("vs the source", "right"), ("vs the slowest", "right")]
    for name, justify in headers:
        t.add_column(name, justify=justify)
    for a in rows:
        t.add_row(
            a.pattern, *((a.condition,) if varying else ()), _named(a.best, source), f"{a.seconds:.3f}", f"{a.requests:,}",
            f"{a.vs_source:.1f}x (source: {_requests(a.source_requests)})",
            f"{a.vs_worst:.1f}x ({a.worst}: {_requests(a.worst_requests)})" if a.worst != a.best else "-",
        )
    return t


def latency_note(results: Sequence[Result]) -> str:
    """What decides the answer when no request cost anything but its bytes: said under it."""
    if not results or any(r.latency or r.remote for r in results):
        return ""
    return (" No latency was simulated: a request cost only its bytes, which favours many small reads; the "
            "layouts made for object storage (paged HDF5, sharded Zarr) are for where each request waits: "
            "--latency 20ms, or a bucket.")


def _named(variant: str, source: str) -> str:
    return f"{variant} (the source: no variant reads it faster)" if variant == source else variant


def _requests(n: int) -> str:
    return f"{n:,} request{'' if n == 1 else 's'}"


def answer_markdown(results: Sequence[Result], source: str) -> str:
    """The answer as a markdown table (``summary.md``, and the README's demo table)."""
    rows = answers(results, source)
    varying = bool(_varying(results))
    head = ["read", *(["conditions"] if varying else []), "fastest", "seconds", "requests", "vs the source",
            "vs the slowest"]
    lines = [f"Conditions: {conditions_text(results)}.", "", "| " + " | ".join(head) + " |",
             "|" + "|".join("---" if i < 2 + varying else "---:" for i in range(len(head))) + "|"]
    for a in rows:
        cells = [a.pattern, *([a.condition] if varying else []), _named(a.best, source), f"{a.seconds:.3f} s",
                 f"{a.requests:,}",
                 f"**{a.vs_source:.1f}x** (source: {_requests(a.source_requests)})",
                 f"{a.vs_worst:.1f}x ({a.worst}, {_requests(a.worst_requests)})" if a.worst != a.best else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _best_per_variant(results: Sequence[Result], keep: Any) -> dict[tuple[str, str], Result]:
    out: dict[tuple[str, str], Result] = {}
    for r in results:
        if r.error or not keep(r):
            continue
        key = (r.pattern, r.variant)
        if key not in out or r.seconds < out[key].seconds:
            out[key] = r
    return out


# long: matplotlib's figure is built in one place, panel after panel, each a few lines that share the
# figure, its axes and the colours.
def plot(results: Sequence[Result], out: Path) -> list[tuple[Path, str]]:
    """The plots that what varies calls for, each with a caption.

    Always: time and requests per pattern and layout as grouped bars (one panel per
    latency when latency varies). Time against workers only when workers vary, against
    latency only when latency varies.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for r in results if not r.error]
    if not results:
        return []
    patterns = list(dict.fromkeys(r.pattern for r in results))
    variants = list(dict.fromkeys(r.variant for r in results))
    colors = {v: f"C{i}" for i, v in enumerate(variants)}
    latencies = sorted({r.latency for r in results})
    workers = sorted({r.workers for r in results})
    shared = conditions_text(results)
    made: list[tuple[Path, str]] = []

    def bars(metric: str, ylabel: str, name: str) -> None:
        # one panel per latency, stacked: the same patterns line up from panel to panel
        fig, axes = plt.subplots(len(latencies), 1, figsize=(min(14.0, max(7.0, 0.45 * len(patterns) * len(variants))),
                                 1.0 + 3.2 * len(latencies)), squeeze=False)
        width = 0.8 / max(1, len(variants))
        for ax, lat in zip(axes[:, 0], latencies):
            best = _best_per_variant(results, lambda r, lat=lat: r.latency == lat and r.workers == workers[-1])
            for i, v in enumerate(variants):
                xs = [k + i * width for k, p in enumerate(patterns) if (p, v) in best]
                ys = [getattr(best[(p, v)], metric) for p in patterns if (p, v) in best]
                ax.bar(xs, ys, width, label=v, color=colors[v])
            ax.set_xticks([k + 0.4 - width / 2 for k in range(len(patterns))], patterns)
            ax.set_yscale("log")
            ax.set_ylabel(ylabel)
            real = all(r.remote for r in results)
            ax.set_title(f"{lat * 1e3:g} ms per request" if lat else
                         "real requests to a bucket, no latency simulated" if real else "no simulated latency")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(5, len(variants)), fontsize="small", frameon=False)
        what = "time" if metric == "seconds" else "read requests"
        fig.suptitle(f"{what} per read pattern and layout ({shared if len(latencies) == 1 else _no_latency(shared)}"
                     f"{', ' + str(workers[-1]) + ' workers' if len(workers) > 1 else ''}; each at its best page buffer)",
                     fontsize="medium")
        fig.tight_layout(rect=(0, 0.07 / len(latencies) + 0.02 * (len(variants) > 5), 1, 1))
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made.append((out / name, f"{name}: {what} of each read pattern on each layout (log scale; lower is better)"))

    bars("seconds", "seconds (median)", "time_by_pattern.png")
    bars("requests", "read requests", "requests_by_pattern.png")
    for axis, values, name, label in (("workers", workers, "time_vs_workers.png", "workers"),
                                      ("latency", latencies, "time_vs_latency.png", "latency per request (ms)")):
        if len(values) < 2:
            continue
        ncols = min(3, len(patterns))
        nrows = -(-len(patterns) // ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 0.8 + 3.3 * nrows), squeeze=False)
        for ax in axes.flat[len(patterns):]:
            ax.set_visible(False)
        for ax, pattern in zip(axes.flat, patterns):
            for v in variants:
                pts = []
                for x in values:
                    rs = [r for r in results if r.pattern == pattern and r.variant == v and getattr(r, axis) == x
                          and (axis == "latency" or r.latency == latencies[-1])
                          and (axis == "workers" or r.workers == workers[-1])]
                    if rs:
                        pts.append((x * 1e3 if axis == "latency" else x, min(r.seconds for r in rs)))
                if pts:
                    ax.plot(*zip(*pts), marker="o", color=colors[v], label=v)
            ax.set_title(pattern)
            ax.set_xlabel(label)
            ax.set_ylabel("seconds (median)")
            ax.set_yscale("log")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(5, len(variants)), fontsize="small", frameon=False)
        fixed = (f"{latencies[-1] * 1e3:g} ms per request" if axis == "workers" else
                 f"{workers[-1]} worker{'s' if workers[-1] > 1 else ''}")
        fig.suptitle(f"time against {axis} ({fixed}; each layout at its best page buffer)", fontsize="medium")
        fig.tight_layout(rect=(0, 0.06 / nrows + 0.02 * (len(variants) > 5), 1, 1))
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made.append((out / name, f"{name}: time of each read pattern against {axis}, one line per layout"))
    return made


def _no_latency(text: str) -> str:
    return ", ".join(p for p in text.split(", ") if "latency" not in p and "per request" not in p)


def _pb_short(pb: int | None) -> str:
    return format_size(pb).replace(".0 ", "").replace(" ", "") if pb else "0"


__all__ = ["Answer", "NOISE_FLOOR", "answer_markdown", "answer_table", "answers", "conditions_text", "failures", "plot", "table", "too_small_to_matter",
           "write"]
