"""The one run sequence every layout shares.

``convert`` and ``reorder`` (and whatever writes a layout next) run the same steps, in
this module and nowhere else. Above it there is one path in: the command line calls
:mod:`layoutkit.api`, which calls :func:`layoutkit.writing.write` (the destination's
name and kind checked, sources and destination parsed once, ``--dry-run``), which calls
:mod:`layoutkit.appending.batches` (a set of many files as several runs of this
sequence, the later ones appended), which calls :func:`run` here:

1. check the source (:func:`~layoutkit.hdf5.files.check_source`) and the destination
   (:meth:`~layoutkit.storage.LocalDestination.check`), before any work;
2. plan: walk the source once (:func:`~layoutkit.hdf5.inventory.read_inventory`), fingerprint
   its dimension scales when the layout deduplicates them
   (:func:`~layoutkit.hdf5.scale_reads.read_scale_digests`), and call the layout's pure
   :meth:`Layout.plan`;
3. stage the output (:meth:`~layoutkit.storage.LocalDestination.stage`) and let the layout
   create its skeleton there, stamped with the provenance attribute
   (:func:`provenance_attrs`), which hands back the :class:`Work` to do;
4. run the work's tasks on the engine (:func:`~layoutkit.schedulers.run_tasks`: serial,
   threads or dask.distributed; or :func:`~layoutkit.schedulers.map_ordered` when the
   results must be written in order on one thread, as HDF5 wants), while the layout may
   still be writing its skeleton (``Work.ready``: the tasks of this process need
   none of it, those of other processes wait for it);
5. let the layout finish (consolidate metadata, close files), then publish; on any error
   or Ctrl-C, discard the staged output instead, so no half-written destination is left.

A layout is a :class:`Layout` subclass in :mod:`layoutkit.layouts`, found by name in that
package's registry.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from layoutkit import __version__
from layoutkit.errors import (
    InvalidOptionError,
    LayoutkitError,
    LeftOut,
    OutputNotWritableError,
    RawReadFallback,
    UnsupportedFeatureError,
)
from layoutkit.formats import PROVENANCE_ATTR, stored_path
from layoutkit.hdf5.combined import walk_sources
from layoutkit.hdf5.files import check_source
from layoutkit.hdf5.inventory import Inventory
from layoutkit.hdf5.scale_reads import read_scale_digests
from layoutkit.hdf5.scales import ScaleDigest
from layoutkit.layout import Done, Layout, Work
from layoutkit.memory import settled_heap
from layoutkit.schedulers import file_mapper, map_ordered, run_tasks
from layoutkit.storage import Destination, ObjectSource, Source, SourceSet, as_kv, as_sources, destination
from layoutkit.storage.kv import settle_writes
from layoutkit.storage.log import LOG_KEY, committed, encode, entry_key, new_entry
from layoutkit.storage.sources import source_records
from layoutkit.templates import DEFAULT_TEMPLATE
from layoutkit.timings import Stages
from layoutkit.zarr_plan import with_stored_names

Progress = Callable[[int], None]

IN_PROCESS = ("serial", "threads")
"""The schedulers that run the tasks in this process (the others: in worker processes)."""

REMOTE_THREADS = 16
"""Threads that read a source in a bucket, at least: its requests wait on the network,
not on a core, so more of them in flight hide the round trips (``--workers`` counts
cores for a local source)."""


# -- provenance ----------------------------------------------------------------------


def recipe_of(layout: Layout | type[Layout], options: Any) -> dict[str, Any]:
    """The full effective recipe of ``options``: the layout's target and name, and every key."""
    out: dict[str, Any] = {"target": layout.target, "layout": layout.name}
    for key in layout.recipe_keys:
        out[key.name] = key.show(getattr(options, key.field))
    return out


def provenance(layout: Layout | type[Layout], options: Any, log: dict[str, Any] | None = None) -> str:
    """The JSON value of the :data:`PROVENANCE_ATTR` root attribute of a variant; with
    ``log``, the root's part of the log of the sources it was made from
    (:mod:`layoutkit.storage.log`: what ``convert --append`` recognises)."""
    doc = {"version": __version__, "command": layout.command, "recipe": recipe_of(layout, options)}
    return json.dumps(doc | ({LOG_KEY: log} if log is not None else {}))


def commit_message(layout: Layout | type[Layout], options: Any) -> str:
    """What a transactional destination records for a run: the command and its recipe."""
    recipe = recipe_of(layout, options)
    return f"layoutkit {layout.command}: " + json.dumps(recipe, sort_keys=True)


def provenance_attrs(layout: Layout | type[Layout], options: Any,
                     log: dict[str, Any] | None = None) -> dict[str, str]:
    """The root attributes the pipeline stamps on a variant: just :data:`PROVENANCE_ATTR`."""
    return {PROVENANCE_ATTR: provenance(layout, options, log)}


# -- the run ---------------------------------------------------------------------------


def plan(
    layout: Layout, src: str | os.PathLike[str] | Source, dst: str | os.PathLike[str], options: Any,
    inventory: Inventory | None = None, stages: Stages | None = None,
) -> tuple[Inventory, Any]:
    """Walk the source (unless ``inventory`` is given) and plan ``layout``; writes nothing.
    ``stages`` gets the time of the walk (``inventory``), the scales' fingerprints
    (``scales``) and the planning (``plan``).

    Raises
    ------
    LayoutkitError
        A source that cannot be read, an option that does not fit the file, a dataset
        the layout cannot carry.
    """
    source = sources_of(src, options)
    options = io_options(options, source)
    stages = stages or Stages()
    with stages.active():
        if inventory is None:
            with stages.step("inventory"):
                workers = getattr(options, "workers", 1)
                inventory = walk_sources(source, workers, file_mapper(getattr(options, "scheduler", "threads"), workers))
        refuse_unsupported(inventory, options, layout.format)
        template = layout.scale_template(options)
        digests: dict[str, ScaleDigest] = {}
        if template:
            with stages.step("scales"):
                digests = read_scale_digests(source, inventory, template)
        if layout.format == "zarr":  # names with a backslash at the paths a store can address
            inventory = with_stored_names(inventory)
            digests = {stored_path(p): d for p, d in digests.items()}
        with stages.step("plan"):
            planned = layout.plan(inventory, options, digests, dest=str(dst))
        say_fallbacks(inventory, layout.format)  # once the run is certain: a refusal is its one sentence
        return inventory, planned


def say_fallbacks(inventory: Inventory, output: str = "") -> None:
    """Warn (:class:`~layoutkit.errors.RawReadFallback`) of each dataset the walk found
    the raw chunk path cannot be trusted with: it is planned to be read by HDF5; and for
    ``output`` "zarr" (:class:`~layoutkit.errors.LeftOut`) of each committed datatype,
    which Zarr has no object for (it is recorded in ``layoutkit.json``)."""
    for info in inventory.arrays:
        if info.raw_fallback:
            warnings.warn(RawReadFallback(
                f"{info.path} is read through HDF5's own read, not as raw chunks ({info.raw_fallback})"),
                stacklevel=2)
    if output == "zarr":
        for t in inventory.datatypes:
            warnings.warn(LeftOut(f"left out {t.path}: a committed datatype (Zarr has no named types; the arrays "
                                  "of that type keep the type itself, and layoutkit.json records it"
                                  f"{' with its attributes' if t.attrs else ''})"), stacklevel=2)


def refuse_unsupported(inventory: Inventory, options: Any, output: str) -> None:
    """Refuse a source holding an object or attribute no layout carries over (a damaged
    object, region references, references inside compounds; for ``output`` "zarr" also
    what only HDF5 holds), naming it; with ``--skip-unsupported`` each is left
    out and listed (:class:`~layoutkit.errors.LeftOut`)."""
    skip = getattr(options, "skip_unsupported", False)
    for note in inventory.unsupported:
        if note.only and note.only != output:
            continue
        if not skip:
            raise UnsupportedFeatureError(note.where, note.feature, where=note.where)
        warnings.warn(LeftOut(f"left out {note.where}: {note.feature}"), stacklevel=2)


def run(
    layout: Layout,
    src: str | os.PathLike[str] | Source,
    dst: str | os.PathLike[str] | Destination,
    options: Any,
    progress: Progress | None = None,
    planned: tuple[Inventory, Any] | None = None,
    stages: Stages | None = None,
) -> Any:
    """Write ``src`` at ``dst`` in ``layout``: check, plan, stage, run, finish, publish.

    Parameters
    ----------
    layout
        A registered layout (:func:`layoutkit.layouts.get_layout`).
    options
        The layout's options dataclass.
    progress
        Called with the bytes of each finished task.
    planned
        ``(inventory, plan)`` from :func:`plan`, to avoid walking the source twice.
    stages
        Gets the time of each step, and of the work inside it (``layoutkit --timings``).

    Returns
    -------
    The layout's summary.

    Raises
    ------
    LayoutkitError
        For every expected failure; the destination is then left as it was.
    """
    source = sources_of(src, options)
    options = io_options(options, source)
    stages = stages or Stages()
    if planned is None:
        with stages.step("inventory"):
            check_source(source)
    dest = destination_for(layout, dst) if isinstance(dst, (str, os.PathLike)) else dst
    check_destination(dest, options, layout)
    inventory, the_plan = planned or plan(layout, source, str(dest), options, stages=stages)
    report = progress or (lambda n: None)
    t0 = time.perf_counter()
    staged = dest.stage(layout.output)
    # Once the layout has begun, its work is closed before anything else happens, whatever
    # ends the run and wherever the interrupt lands: close stops what writes into the staged
    # output in the background, which would otherwise put back folders the discard removed.
    open_work: Work | None = None
    try:
        with stages.active():
            with stages.step("skeleton"):
                entry = new_entry(0, "convert", source_records(source, read=layout.rewrites)) if layout.format == "zarr" else None
                work = open_work = layout.begin(staged, source, inventory, the_plan,
                                                provenance_attrs(layout, options, committed(entry) if entry else None))
                if entry is not None:  # the sources, outside the root (a commit's metadata in Icechunk)
                    as_kv(staged).put(entry_key(0), encode(entry))
            report(work.done_bytes)
            if getattr(options, "scheduler", "threads") not in IN_PROCESS:
                with stages.step("skeleton"):
                    work.ready()  # the workers read the skeleton from the destination
            with stages.step("tasks"), settled_heap():
                _execute(work, options, report)
            with stages.step("skeleton"):
                work.ready()  # what of it was written meanwhile
            with stages.step("finish"):
                layout.finish(work, staged, the_plan)
            with stages.step("close"):
                work.close()
                open_work = None
            with stages.step("publish"):
                dest.publish(staged, commit_message(layout, options))
    except BaseException as exc:
        if open_work is not None:
            with stages.step("close"), contextlib.suppress(Exception):  # the error that ended the run is the one to say
                open_work.close()
        settle_writes()  # what zarr's event loop still writes for the interrupted main thread
        dest.discard(staged)
        if isinstance(exc, Exception) and not isinstance(exc, LayoutkitError) and _no_space(exc):
            raise OutputNotWritableError(
                f"Destination {str(dest)!r} cannot be written: no space left on its device "
                "(what the run had written is removed)."
            ) from None
        raise
    # the run's steps, reading and planning the sources included: what --timings totals (the
    # summary said 1.4 s where --timings said 1.96 s, the inventory of a set of files left out)
    return layout.summarize(source, dest, inventory, the_plan, work, stages.total() or time.perf_counter() - t0)


def _no_space(exc: BaseException) -> bool:
    """An error of a full disk: ENOSPC or EDQUOT, or HDF5's words for it."""
    while exc is not None:
        if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def destination_for(layout: Layout, dst: str | os.PathLike, storage_options: dict[str, str] | None = None,
                    tmpdir: str | os.PathLike | None = None, icechunk: bool = False) -> Destination:
    """The destination ``dst`` names, parsed once (:func:`layoutkit.storage.destination`):
    an Icechunk repository when it says so, or when the layout writes nowhere else."""
    only_icechunk = tuple(layout.destinations) == ("icechunk",)
    return destination(dst, storage_options or {}, tmpdir, icechunk or only_icechunk)


def check_destination(dest: Destination, options: Any, layout: Layout | None = None) -> None:
    """Refuse, before any work, a destination that cannot take this run: one of a kind
    the layout does not write to, one that exists (unless ``--overwrite``), cannot be
    written, or cannot be written by ``--scheduler``."""
    kind = getattr(dest, "kind", "local")
    if layout is not None and kind not in layout.destinations and not (kind == "staging" and layout.appends):
        where = {"local": "a local path", "bucket": "a bucket", "icechunk": "an Icechunk repository"}
        said = " or ".join(where.get(k, k) for k in layout.destinations)
        raise InvalidOptionError(f"The {layout.name} layout writes to {said}, not to {where.get(kind, kind)} "
                                 f"({dest}).")
    if getattr(dest, "threads_only", False) and getattr(options, "scheduler", "threads") not in ("threads", "serial"):
        raise InvalidOptionError(f"{dest} is written by threads of this process: use --scheduler threads "
                                 f"(got {options.scheduler!r}).")
    dest.check(getattr(options, "overwrite", False))


def sources_of(given: Any, options: Any) -> Source:
    """What a run reads: one source, or several as one archive (a list, a glob: a
    :class:`~layoutkit.storage.SourceSet` under the options' template)."""
    return as_sources(given, getattr(options, "template", DEFAULT_TEMPLATE))


def io_options(options: Any, source: Source) -> Any:
    """``options`` with at least :data:`REMOTE_THREADS` thread workers when the source is
    in a bucket (the threads engine only: processes and clusters keep ``--workers``)."""
    members = source.members if isinstance(source, SourceSet) else (source,)
    if (any(isinstance(m, ObjectSource) for m in members) and getattr(options, "scheduler", None) == "threads"
            and getattr(options, "workers", REMOTE_THREADS) < REMOTE_THREADS):
        return replace(options, workers=REMOTE_THREADS)
    return options


def _execute(work: Work, options: Any, report: Progress) -> None:
    workers = getattr(options, "workers", 1)
    if work.sink is None:
        def done(result: int | Done) -> None:  # a task's bytes, and what it counted
            if isinstance(result, Done):
                work.counts.update(result.counts)
                result = result.nbytes
            report(result)

        run_tasks(
            work.fn, work.job, list(work.tasks), scheduler=getattr(options, "scheduler", "threads"),
            workers=workers, progress=done, cleanup=work.cleanup,
        )
        return
    for result in map_ordered(partial(work.fn, work.job), work.tasks, workers, window=work.window):
        report(work.sink(result))


__all__ = ["IN_PROCESS", "PROVENANCE_ATTR", "REMOTE_THREADS", "Layout", "Work", "check_destination", "io_options", "plan", "provenance", "provenance_attrs", "recipe_of", "run"]
