"""The standard read patterns: what each one reads, drawn once from the source so every
variant is asked for the same data, and the code that performs the reads.

=========  ============================================================================
open       open the variant, as ``layoutkit.open`` does before a first read (its
           root document, a paged file's first page), and read nothing more
list       open it and list every array with shape and dtype
shot       every signal of K random shots, with their dimension scales (through
           ``iter_shots``, so a layout may fetch the next shot while one is built)
signal     K random signals for every shot, with their dimension scales
scan       every stored array once, in the units the variant stores (chunk, shard or
           16 MiB block), summed as it goes: one unit per worker in memory
subset     4K random hyperslabs (random start and extent on every axis, so they cut
           chunks and cover several chunks of a shard)
axis       for K random arrays of 2 or more dimensions, a line along each axis at a
           random point (the time series at one place) and, from 3 dimensions, the
           plane across each axis at a random index (the map at one time)
=========  ============================================================================

Shot archives default to open, shot, signal, scan and subset; other files to open,
scan, subset and axis (``all``: those that apply); ``list`` runs when asked by name. The plans are plain tuples, so they travel to worker processes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from layoutkit.archive import Archive, Selection
from layoutkit.errors import InvalidOptionError

PATTERNS = ("open", "list", "shot", "signal", "scan", "subset", "axis")
OPEN_ONLY = "opening"
"""Not a user's pattern: each worker opens the variant and reads nothing (``advise``
measures what opening costs each pattern, one open per worker as the pattern makes)."""
ASKED_BY_NAME = ("list",)  # not run unless asked by name: every source has them
SHOT_ARCHIVE_PATTERNS = ("open", "shot", "signal", "scan", "subset")
ARRAY_PATTERNS = ("open", "scan", "subset", "axis")
SUBSETS_PER_SAMPLE = 4
SUBSET_MAX_BYTES = 4 * 1024**2  # one hyperslab of the subset pattern reads at most this


@dataclass(frozen=True)
class ReadPlan:
    """What one pattern reads. ``items`` are shots, signals or ``(path, selection)``
    pairs; the scan is planned per variant (``per_variant``), from its own storage;
    ``by_variant`` gives some variants (by name) items of their own (advise's samples
    each make the reads of a workload that stand for it there); ``threads``: the readers
    its items are dealt to, 0 for the condition's workers (a workload replays on as many
    threads as the program read from)."""

    pattern: str
    items: tuple[Any, ...]
    per_variant: bool = False
    by_variant: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    threads: int = 0


def parse_patterns(text: str, available: Sequence[str]) -> tuple[str, ...]:
    """Parse ``--patterns`` (comma-separated, or ``all``) against what applies to the
    source."""
    if text.strip() in ("", "all"):
        return tuple(available)
    names = tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    for name in names:
        if name not in PATTERNS:
            raise InvalidOptionError(f"Expected patterns from {', '.join(PATTERNS)} (or all). Got {name!r}.")
        if name not in available and name not in ASKED_BY_NAME:
            raise InvalidOptionError(
                f"The pattern {name!r} does not apply to this source; it has {', '.join(available)}."
            )
    return names


def available_patterns(source: Archive) -> tuple[str, ...]:
    """The patterns that apply: shot and signal need the template to match."""
    return SHOT_ARCHIVE_PATTERNS if source.shots else ARRAY_PATTERNS


def _readable(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    return len(shape) >= 1 and int(np.prod(shape)) > 1 and dtype.kind in "biufcSV?"


def plan_reads(pattern: str, source: Archive, sample: int, seed: int, exclude: frozenset[str] = frozenset()) -> ReadPlan:
    """Draw the reads of one pattern from the source (the same for every variant).

    Parameters
    ----------
    pattern
        One of :data:`PATTERNS`.
    source
        The source, opened as an archive.
    sample
        K: shots, signals or arrays drawn (4K hyperslabs for ``subset``).
    seed
        The random seed; the same seed draws the same reads.
    exclude
        Arrays not to draw: those a variant left out on purpose (``--skip-unsupported``).
    """
    rng = random.Random(f"{seed}:{pattern}")
    if pattern in ("open", "list"):
        return ReadPlan(pattern, (None,))
    if pattern == "scan":
        return ReadPlan(pattern, (), per_variant=True)
    if pattern in ("shot", "signal"):
        names = source.shots if pattern == "shot" else source.signals
        return ReadPlan(pattern, tuple(rng.sample(names, min(sample, len(names)))))
    arrays = {
        p: v for p, v in sorted(source.arrays().items())
        if _readable(*v) and p not in exclude and not (len(v[0]) == 1 and source.dimension_only(p))
    }
    items: list[tuple[str, tuple[slice | int, ...]]]
    if pattern == "subset":
        items = []
        paths = sorted(arrays)
        count = SUBSETS_PER_SAMPLE * sample if paths else 0
        # together the hyperslabs read at most what a scan reads, each at most SUBSET_MAX_BYTES
        total = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in arrays.values())
        budget = min(SUBSET_MAX_BYTES, total // max(1, count))
        for _ in range(count):
            path = rng.choice(paths)
            shape, dtype = arrays[path]
            extents = [rng.randint(max(1, n // 8), max(1, (3 * n) // 4)) for n in shape]
            extents = bounded_extents(extents, dtype.itemsize, budget)
            sel = []
            for n, extent in zip(shape, extents):
                start = rng.randint(0, n - extent)
                sel.append(slice(start, start + extent))
            items.append((path, tuple(sel)))
        return ReadPlan(pattern, tuple(items))
    if pattern == "axis":
        multi = sorted(p for p, (shape, _) in arrays.items() if len(shape) >= 2)
        items = []
        for path in rng.sample(multi, min(sample, len(multi))):
            shape = arrays[path][0]
            point = [rng.randrange(n) for n in shape]
            for axis in range(len(shape)):
                line = tuple(slice(None) if i == axis else point[i] for i in range(len(shape)))
                items.append((path, line))
                if len(shape) >= 3:
                    plane = tuple(point[i] if i == axis else slice(None) for i in range(len(shape)))
                    items.append((path, plane))
        return ReadPlan(pattern, tuple(items))
    raise InvalidOptionError(f"Expected patterns from {', '.join(PATTERNS)}. Got {pattern!r}.")


def bounded_extents(extents: list[int], itemsize: int, budget: int) -> list[int]:
    """Shrink a hyperslab's extents, the longest first, until it holds at most ``budget``
    bytes (or one element)."""
    extents = list(extents)
    while int(np.prod(extents)) * itemsize > budget and max(extents) > 1:
        axis = extents.index(max(extents))
        extents[axis] = max(1, extents[axis] // 2)
    return extents


def split(items: Sequence[Any], workers: int) -> list[list[Any]]:
    """Deal the items round-robin into at most ``workers`` non-empty shares."""
    shares = [list(items[i::workers]) for i in range(workers)]
    return [s for s in shares if s] or [[]]


def _nbytes(obj: Any) -> int:
    if isinstance(obj, xr.DataTree):  # each node's variables (a node's .dataset is a new view: 2x slower)
        return sum(int(v.nbytes) for node in obj.subtree for v in node.variables.values())
    if isinstance(obj, xr.Dataset):
        return sum(int(v.nbytes) for v in obj.variables.values())
    if isinstance(obj, xr.DataArray):
        return int(obj.nbytes) + sum(int(c.nbytes) for c in obj.coords.values())
    return int(np.asarray(obj).nbytes)


def _reduce(block: np.ndarray) -> None:
    # consume the data as an analysis would, so a lazy read cannot skip it
    if block.dtype.kind in "biufc" and block.size:
        block.sum()


def run_reads(archive: Archive, pattern: str, items: Sequence[Any]) -> int:
    """Perform one share of a pattern on an open archive; returns the logical bytes
    delivered (data and coordinates, uncompressed)."""
    total = 0
    if pattern in (OPEN_ONLY, "open"):  # opened already (every share opens its archive)
        return 0
    if pattern == "list":
        return sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in archive.arrays().values())
    if pattern == "shot":  # as a user reads several shots: the layout may fetch the next one ahead
        return sum(_nbytes(tree) for _, tree in archive.iter_shots(items))
    if pattern == "scan":  # unit after unit, a layout of small units reading several together
        for block in archive.read_blocks(items):
            _reduce(block)
            total += block.nbytes
        return total
    for item in items:
        if pattern == "signal":
            total += sum(_nbytes(v) for v in archive.signal(item).values())
        elif pattern == "scan":
            block = archive.read_block(*item)
            _reduce(block)
            total += block.nbytes
        else:
            path, selection = item
            block = archive.get(archive.stored_name(path), selection)  # a source path, as this archive names it
            _reduce(block)
            total += block.nbytes
    return total


__all__ = [
    "ARRAY_PATTERNS",
    "OPEN_ONLY",
    "PATTERNS",
    "ReadPlan",
    "SHOT_ARCHIVE_PATTERNS",
    "SUBSET_MAX_BYTES",
    "Selection",
    "available_patterns",
    "bounded_extents",
    "parse_patterns",
    "plan_reads",
    "run_reads",
    "split",
]
