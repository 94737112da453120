"""Many sources written a batch at a time: the driver's memory bounded by a batch, not by the archive.

A run plans from the inventory of everything it writes (:mod:`layoutkit.pipeline`): every
dataset's metadata, ~2 kB each in the driver (docs/benchmarks.md#append). For one file, or a few
hundred, that is the right design: the plan sees the whole output. For an archive of
thousands of files it would make the driver's memory grow with the archive. So a set of
shot archives larger than a batch (``--batch-files``; by default as many files as hold
:data:`BATCH_DATASETS` datasets, judged by the first file) is written as

1. the first batch, converted by the pipeline as any run (checked, planned, staged, written);
2. each next batch appended to it (:mod:`layoutkit.appending.append`: walked, its shots checked
   against those already written, written with the store's recipe, joined to the store);
3. published once at the end.

The driver holds one batch's inventory at a time (on a cluster its workers walk the
batch's files, :func:`layoutkit.schedulers.file_mapper`), so its memory does not grow with
the number of files. That takes handing what each batch freed back to the system
(:func:`~layoutkit.memory.release_freed_memory`): glibc's heaps otherwise kept it, and
the driver's resident memory grew by 20-50 MiB a batch while the memory Python held
stayed at 7 MiB (``tracemalloc``; 600 tiny files in batches of 100: 258 -> 388 MiB
resident after five batches, 172 -> 197 MiB with the release). The store is the one an append of those batches would give: equal
to the sources, its log (:mod:`layoutkit.storage.log`) listing every file (a later
``--append`` of the same files writes nothing), an entry per batch.

Where the run leaves nothing behind when it fails, as a single run does:

- a local store is written in a staging folder beside the destination and renamed into
  place at the end (an existing store, with ``--overwrite``, replaced only then);
- in a bucket the store appears after the first batch and grows by the appends, each of
  which a reader sees whole or not at all; a failure deletes it (a bucket store being
  replaced is gone before the new one is written, as for any run);
- in Icechunk each batch is a commit; a failure resets the branch to the snapshot it had
  before the run (or removes the repository the run created).

Not batched unless ``--batch-files`` says so: netCDF files joined along a record
dimension (each batch is then appended along it, so the files must come in the
dimension's order; in one run they are sorted by their coordinate). Never batched: Zarr
format 2 stores and paged HDF5 files (neither is appended to). Runs in one batch hold
the inventory of all their files.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

from layoutkit import pipeline
from layoutkit.errors import InvalidOptionError
from layoutkit.hdf5.combined import shot_of, walk_sources
from layoutkit.hdf5.files import check_source
from layoutkit.hdf5.inventory import Inventory, read_inventory
from layoutkit.layout import Layout
from layoutkit.memory import release_freed_memory
from layoutkit.schedulers import file_mapper
from layoutkit.storage import DESTINATIONS, LocalDestination, SourceSet, digests_ahead
from layoutkit.storage.kv import settle_writes
from layoutkit.timings import Stages

BATCH_DATASETS = 100_000
"""A batch holds about this many datasets unless ``--batch-files`` says otherwise: ~200 MiB
of inventory in the driver."""


def decide(layout: Layout, source: Any, options: Any) -> tuple[Any, list[Inventory]]:
    """``source`` with its batch decided (:attr:`SourceSet.batch`): a set of shot archives a
    layout that can be appended to writes, of more files than a batch holds, is written in
    batches; anything else in one run (its batch: all its files). With the inventories of
    the set's first members when that took walking them (by default the first file is
    walked to count its datasets): the first batch's walk starts after them.

    Raises
    ------
    InvalidOptionError
        ``--batch-files`` given for sources that are not written in batches.
    """
    source = pipeline.sources_of(source, options)
    if not isinstance(source, SourceSet) or source.batch is not None:
        return source, []
    given = getattr(options, "batch_files", 0)
    whole = replace(source, batch=len(source.members))
    if not layout.can_append(options):
        if given:
            raise InvalidOptionError(f"--batch-files: {layout.command} --layout {layout.name} writes its sources in "
                                     "one run (batches are appended to one another, and only Zarr format 3 stores "
                                     "are appended to).")
        return whole, []
    if len(source.members) <= max(1, given):
        return whole, []
    if given:  # netCDF files too: each batch appended along the record dimension, after the one before
        return replace(source, batch=given), []
    if source.concat_dim:
        return whole, []
    member = check_source(source.members[0])
    on_cluster = file_mapper(getattr(options, "scheduler", "threads"), getattr(options, "workers", 1))
    # on a cluster the first file too is walked by a worker, as every file is
    first = on_cluster(read_inventory, [member])[0] if on_cluster else read_inventory(member, workers=options.workers)
    if not _has_shots(first, source.template):
        return whole, [first]  # netCDF files along their record dimension: combined in one run
    batch = max(1, BATCH_DATASETS // max(1, len(first.arrays)))
    return replace(source, batch=min(batch, len(source.members))), [first]


def _has_shots(inventory: Inventory, template: str) -> bool:
    shot = shot_of(template)
    return any(shot(a.path) is not None for a in inventory.arrays)


def parts(source: SourceSet) -> list[SourceSet]:
    """The batches of a decided set, in its order, each a set written in one run."""
    n = source.batch or len(source.members)
    return [replace(source, members=source.members[i:i + n], batch=len(source.members[i:i + n]))
            for i in range(0, len(source.members), n)]


def in_batches(source: Any) -> bool:
    return isinstance(source, SourceSet) and source.batch is not None and source.batch < len(source.members)


def plan(layout: Layout, src: Any, dst: str | os.PathLike, options: Any, stages: Stages | None = None
         ) -> tuple[Any, Inventory, Any]:
    """The decided source, and the inventory and plan of its first batch (of the whole
    source when it is written in one run): what ``--dry-run`` prints and :func:`run` takes."""
    stages = stages or Stages()
    with stages.active(), stages.step("inventory"):
        source, walked = decide(layout, src, options)
    return (source, *_plan_first(layout, source, walked, dst, options, stages))


def _plan_first(layout: Layout, source: Any, walked: list[Inventory], dst: Any, options: Any,
                stages: Stages | None) -> tuple[Inventory, Any]:
    """Walk the first batch (after the members ``walked`` already) and plan it."""
    first = parts(source)[0] if in_batches(source) else source
    stages = stages or Stages()
    inventory = None
    if walked:
        options = pipeline.io_options(options, first)
        with stages.active(), stages.step("inventory"):
            inventory = walk_sources(first, options.workers, file_mapper(options.scheduler, options.workers), walked)
    return pipeline.plan(layout, first, str(dst), options, inventory, stages)


def run(layout: Layout, src: Any, dst: Any, options: Any, progress: Any = None,
        planned: tuple[Inventory, Any] | None = None, stages: Stages | None = None,
        storage_options: dict[str, str] | None = None, tmpdir: str | os.PathLike | None = None) -> Any:
    """Write ``src`` at ``dst``: in one run of the pipeline, or in batches (module
    docstring). ``planned``: the first batch's, from :func:`plan`. Returns the layout's
    summary (of a run in batches: the whole run's, its ``batches`` set)."""
    stages = stages or Stages()
    source = pipeline.sources_of(src, options)
    with digests_ahead(source, layout.format == "zarr" and layout.rewrites):  # the digests the store records, meanwhile
        return _run(layout, source, dst, options, progress, planned, stages, storage_options, tmpdir)


def _run(layout: Layout, src: Any, dst: Any, options: Any, progress: Any, planned: tuple[Inventory, Any] | None,
         stages: Stages, storage_options: dict[str, str] | None, tmpdir: str | os.PathLike | None) -> Any:
    with stages.active(), stages.step("inventory"):
        source, walked = decide(layout, src, options)
    if not in_batches(source) and not walked:
        return pipeline.run(layout, source, dst, options, progress, planned, stages)
    dest = dst if isinstance(dst, DESTINATIONS) else pipeline.destination_for(layout, dst, storage_options, tmpdir)
    pipeline.check_destination(dest, options, layout)
    if planned is None:
        planned = _plan_first(layout, source, walked, dest, options, stages)
    if not in_batches(source):
        return pipeline.run(layout, source, dest, options, progress, planned, stages)
    return _run_batches(layout, source, dest, options, progress, planned, stages,
                        getattr(dest, "storage_options", storage_options), tmpdir)


def _run_batches(layout: Layout, source: SourceSet, dest: Any, options: Any, progress: Any,
                 planned: tuple[Inventory, Any] | None, stages: Stages, storage_options: dict[str, str] | None,
                 tmpdir: str | os.PathLike | None) -> Any:
    from layoutkit.appending.append import append

    batches = parts(source)
    t0 = time.perf_counter()
    kind = getattr(dest, "kind", "local")
    before = dest.head() if kind == "icechunk" else None
    staged = dest.stage(layout.output) if kind == "local" else None
    first_dest = LocalDestination(staged) if staged is not None else dest
    target = str(staged) if staged is not None else dest.branch_text if kind == "icechunk" else str(dest)
    typed = {k: getattr(options, k) for k in ("workers", "scheduler", "memory_limit", "skip_unsupported")}
    data = written = 0
    skipped: tuple[tuple[str, str], ...] = ()
    try:
        summary = pipeline.run(layout, batches[0], first_dest, options, progress, planned, stages)
        for i, batch in enumerate(batches[1:], start=1):
            release_freed_memory()  # else glibc's heaps keep what every batch freed (below)
            earlier = f"{batches[0].members[0]} ... {batches[i - 1].members[-1]} (this run's earlier batches)"
            added = append(list(batch.members), target, typed, storage_options, progress, stages, tmpdir,
                           batch.concat_dim, shown=earlier)
            data, written = data + added.data_bytes, written + added.bytes_written
            skipped += added.skipped
        if staged is not None:
            dest.publish(staged)
    except BaseException:
        settle_writes()  # zarr's loop writes on for an interrupted main thread: removed only after
        if staged is not None:
            dest.discard(staged)
        elif kind == "icechunk":
            dest.rewind(before)
        else:  # published after the first batch: every object under the key goes
            dest.remove()
        raise
    return replace(summary, source=str(source), dest=str(dest) if kind != "icechunk" else target,
                   batches=len(batches), skipped=(*summary.skipped, *skipped),
                   logical_bytes=summary.logical_bytes + data, source_bytes=_size(source),
                   dest_bytes=dest.size() if kind == "local" else summary.dest_bytes + written,
                   seconds=time.perf_counter() - t0)


def _size(source: SourceSet) -> int:
    try:
        return source.stat().st_size
    except OSError:
        return 0


__all__ = ["BATCH_DATASETS", "decide", "in_batches", "parts", "plan", "run"]
