"""verify's sixth kind of read: a program's own, recorded by ``layoutkit trace``.

:func:`workload_plan` makes the recorded reads of the source a read plan (the pattern
``workload``: each ``(array, selection)`` in order, as many times as the program made
it, through each variant's ``layoutkit.open`` like the subset pattern's reads, dealt to
as many threads as the program read from);
:func:`compare_selections` proves each selection's values on a variant equal to HDF5's
own read of the source (h5py, never the converters' raw path), beside the proof of the
whole variant.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.archive import open_archive
from layoutkit.hdf5.values import Mismatch, equal_values
from layoutkit.verify.patterns import ReadPlan

WORKLOAD = "workload"


def workload_plan(path: str | os.PathLike, source: Any, arrays: Iterable[str]) -> ReadPlan:
    """The reads of the workload file ``path`` that concern ``source``, as a read plan.

    Raises
    ------
    WorkloadError
        When the file is not a workload, or its reads are of other sources or arrays.
    """
    from layoutkit.trace.workload import load, replay_items

    workload = load(path)
    items = replay_items(workload, source if isinstance(source, (str, os.PathLike)) else str(source), arrays)
    return ReadPlan(WORKLOAD, items, threads=max(1, workload.threads))


def compare_selections(sources: Sequence[Any], variant: Path | str, items: Sequence[tuple[str, tuple[slice, ...]]],
                       template: str, storage_options: dict[str, str]) -> list[Mismatch]:
    """Each distinct selection of ``items`` read from ``variant`` (``layoutkit.open``)
    against h5py's read of the one local source file: what differs. A source in a bucket
    or a set of files is proved by the whole-variant comparison alone."""
    import h5py

    if len(sources) != 1 or not isinstance(sources[0], (str, os.PathLike)) or not Path(sources[0]).is_file():
        return []
    found = []
    with h5py.File(sources[0], "r") as f, open_archive(variant, template=template, storage_options=storage_options) as v:
        for path, selection in dict.fromkeys(items):
            theirs = np.asarray(f[path][selection])
            mine = np.asarray(v.get(v.stored_name(path), selection))
            if theirs.shape != mine.shape or not equal_values(theirs, mine).all():
                found.append(Mismatch(str(variant), f"{path}[{_text(selection)}]", "values",
                                      "the workload's selection differs from the source's (HDF5's own read)"))
    return found


def _text(selection: tuple[slice, ...]) -> str:
    return ", ".join(f"{s.start}:{s.stop}" + (f":{s.step}" if s.step not in (None, 1) else "") for s in selection)


__all__ = ["WORKLOAD", "compare_selections", "workload_plan"]
