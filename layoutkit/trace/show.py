"""A workload in words (``layoutkit trace --show``) and as a picture."""

from __future__ import annotations

import math
import os
from pathlib import Path

from layoutkit.options import plural
from layoutkit.templates import DEFAULT_TEMPLATE
from layoutkit.trace.workload import Axis, Read, Workload, access_order


def summary(workload: Workload, template: str = DEFAULT_TEMPLATE, top: int = 10) -> list[str]:
    """Lines a person reads: the command, the processes and threads that read, per file
    or store the arrays read and how much of each, and the order the reads walked them."""
    calls = sum(r.count for r in workload.reads)
    lines = [f"{' '.join(workload.command)}: exit {workload.exit_code}, {workload.seconds:.2f} s; "
             f"{plural(calls, 'read')} ({len(workload.reads):,} distinct) from {plural(workload.processes, 'process', 'processes')}, "
             f"{plural(workload.threads, 'thread')}"]
    for path, u in workload.unmapped.items():
        what = ("a Zarr store's metadata: its documents, shard indexes" if Path(path).is_dir()
                else "HDF5's metadata: object headers, B-trees, heaps")
        lines.append(f"{path}: {plural(u['reads'], 'read')} ({u['bytes']:,} bytes) in no array's data ({what})")
    if not workload.reads:
        lines.append("no reads of arrays were recorded")
        return lines
    by_source: dict[str, list[Read]] = {}
    for r in workload.reads:
        by_source.setdefault(r.source, []).append(r)
    for source, reads in by_source.items():
        arrays: dict[str, list[Read]] = {}
        for r in reads:
            arrays.setdefault(r.array, []).append(r)
        read_elements = sum(r.elements * r.count for r in reads)
        lines.append(f"{source} ({reads[0].api}): {plural(len(arrays), 'array')}, "
                     f"{plural(sum(r.count for r in reads), 'read')}, {read_elements:,} elements, "
                     f"in order: {access_order(reads, template)}")
        ranked = sorted(arrays.items(), key=lambda kv: -sum(r.elements * r.count for r in kv[1]))
        for path, rs in ranked[:top]:
            size = math.prod(rs[0].shape) if rs[0].shape else 1
            elements = sum(r.elements * r.count for r in rs)
            distinct = _covered(rs)
            share = distinct / size if size else 1.0
            lines.append(f"  {path}: {plural(sum(r.count for r in rs), 'read')}, {elements:,} elements "
                         f"({'under 1%' if 0 < share < 0.01 else f'{share:.0%}'} of its {size:,} read at least once)")
        if len(ranked) > top:
            lines.append(f"  ... and {plural(len(ranked) - top, 'more array')}")
    return lines


def _covered(reads: list[Read]) -> int:
    """Elements of an array that at least one of its reads selects (boxes merged on the
    first axis; points and strided axes counted as selected)."""
    if not reads[0].shape:
        return 1
    first = sorted((a[0], a[1]) if not isinstance(a, dict) else (a["min"], a["max"] + 1)
                   for a in (r.selection[0] for r in reads))
    rest = max(math.prod(min(_length(a), n) for a, n in zip(r.selection[1:], r.shape[1:])) for r in reads)
    covered, end = 0, -1
    for start, stop in first:
        start = max(start, end)
        if stop > start:
            covered, end = covered + stop - start, stop
    return min(covered * rest, math.prod(reads[0].shape))


def _length(axis: Axis) -> int:
    if isinstance(axis, dict):
        return int(axis["points"])
    return max(0, axis[1] - axis[0])


def plot(workload: Workload, path: str | os.PathLike) -> Path:
    """The reads over time: one row per array (in order of first read), a mark per
    distinct read at its first occurrence, its size the elements it selects, its colour
    the thread or process that made it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {key: i for i, key in enumerate(dict.fromkeys((r.source, r.array) for r in workload.reads))}
    threads = {key: i for i, key in enumerate(dict.fromkeys((r.process, r.thread) for r in workload.reads))}
    fig, ax = plt.subplots(figsize=(9, max(3.0, min(12.0, 0.25 * len(rows) + 2))))
    if workload.reads:
        biggest = max(r.elements for r in workload.reads) or 1
        ax.scatter([r.first for r in workload.reads], [rows[(r.source, r.array)] for r in workload.reads],
                   s=[8 + 120 * r.elements / biggest for r in workload.reads],
                   c=[threads[(r.process, r.thread)] for r in workload.reads], cmap="tab10", alpha=0.7)
    ax.set_xlabel("seconds since the command started")
    ax.set_ylabel("array, in order of first read")
    if len(rows) <= 30:
        several = len({s for s, _ in rows}) > 1
        ax.set_yticks(range(len(rows)), [f"{Path(s).name}:{a}" if several else a for s, a in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_title(f"{' '.join(workload.command)[:80]}: {len(workload.reads):,} distinct reads, "
                 f"{plural(len(threads), 'thread')}", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


__all__ = ["plot", "summary"]
