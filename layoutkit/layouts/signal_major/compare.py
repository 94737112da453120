"""Proving a signal-major store equal to its source.

Every packed dataset is read back through the layout's reader and compared with the
source (:func:`layoutkit.equality.compare_packed`); the index is checked too: the index
arrays equal the index in the series' attributes, the shots fill their packed array end
to end, and the store has no shot the source lacks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from layoutkit.equality import Mismatch, compare_packed
from layoutkit.hdf5.inventory import Inventory
from layoutkit.layouts.signal_major.read import SignalMajorArchive
from layoutkit.layouts.signal_major.spec import DATA, SHOT_ATTR, index_arrays


def compare(source: str | Path, variant: Any, *, inventory: Inventory | None = None,
            skipped: frozenset[str] = frozenset(), workers: int = 2, name: str | None = None) -> list[Mismatch]:
    """Every difference between a signal-major Zarr store and its source (empty: equal).

    Arrays and groups the layout mirrors are compared as
    :func:`~layoutkit.equality.compare_zarr` does; every packed dataset is read back at
    its source path through :class:`~layoutkit.layouts.signal_major.read.SignalMajorArchive`
    and compared, one source chunk at a time; and the index is checked (:func:`check_index`).
    """
    return compare_packed(source, variant, SignalMajorArchive, check_index, inventory, skipped, workers, name,
                          frozenset({SHOT_ATTR}))


def check_index(archive: Any, source_paths: set[str], miss: Any) -> None:
    """The index arrays against the index in the metadata (version 2: against each
    shot's own index), and every stored shot against the source."""
    if archive._v2:
        _check_shot_documents(archive, miss)
    for rel, series in archive._series.items():
        for shot in {*series.rows, *series.same_as}:
            path = f"{archive.shot_path(shot)}/{rel}"
            if path not in source_paths:
                miss(path, "extra", f"the store has shot {shot} of {series.group}, which the source does not")
        parts: dict[str, list[tuple[str, Any]]] = {}
        for shot, row in series.rows.items():
            parts.setdefault(row.data, []).append((shot, row))
        for data, rows in parts.items():
            suffix = data.rsplit("/", 1)[-1][len(DATA):]
            shots_array, starts_array, lengths_array = index_arrays(series.group, suffix)
            rows.sort(key=lambda r: r[1].start)
            try:
                ids = [str(v) for v in archive.get(shots_array)]
                starts = archive.get(starts_array).tolist()
                lengths = archive.get(lengths_array).tolist()
            except KeyError as exc:
                miss(series.group, "index", f"an index array is missing ({exc})")
                continue
            if ids != [s for s, _ in rows] or starts != [r.start for _, r in rows] or lengths != [r.length for _, r in rows]:
                miss(data, "index", "the index arrays differ from the index in the series' attributes")
            if not _end_to_end([(r.start, r.length) for _, r in rows], archive.zarr_array(data)):
                miss(data, "index", "the shots do not fill the packed array end to end")


def _end_to_end(rows: list[tuple[int, int]], array: Any) -> bool:
    """Whether rows (start, length), by start, fill the array end to end; an append may
    have started its rows at the next chunk (or shard) boundary, leaving the rows before
    it unwritten (the spec's appended stores): such a gap only."""
    grid = int(array.chunks[0]) if getattr(array, "shards", None) is None else int(array.shards[0])
    end = 0
    for start, length in rows:
        if start != end and not (start > end and start % grid == 0 and start - end < grid):
            return False
        end = start + length
    return end == array.shape[0]


def _check_shot_documents(archive: Any, miss: Any) -> None:
    """Version 2: each shot's own rows (its group's document) are the rows its series'
    index arrays give it, no more and no fewer."""
    archive._load_shot_docs(archive.shots)
    for shot in archive.shots:
        own = archive._shot_rows.get(shot, {})
        for source, series in archive._series.items():
            row, mine = series.rows.get(shot), own.get(source)
            want = None if row is None else [row.data.rsplit("/", 1)[-1][len(DATA):], row.start, row.length]
            if mine != want:
                miss(f"{archive.shot_path(shot)}/{source}", "index",
                     f"the shot's own index gives {mine}, the index arrays of {series.group} {want}")


__all__ = ["check_index", "compare"]
