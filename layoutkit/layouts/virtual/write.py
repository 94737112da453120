"""Writing a virtual store: the shot-major skeleton, then tasks that set references to
the sources' chunks (reading their chunk indexes only) and write what cannot be
referenced.

A task's references go to an Icechunk session (:meth:`IcechunkKV.set_refs`), or, in the
folder an append stages its new shots in, to a document the layout's merge sets in the
repository (:data:`~layoutkit.layouts.virtual.spec.REFS_PREFIX`). A chunk is written
instead of referenced when its filters were skipped (a filter mask), when the source's
chunk index failed the self-check (:meth:`~layoutkit.hdf5.raw.RawReader.chunk_locations`),
or when it was never written and Zarr's fill value is not HDF5's.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from layoutkit.formats import LAYOUT_ATTR
from layoutkit.hdf5.inventory import Inventory
from layoutkit.layout import Done, Work
from layoutkit.layouts.virtual.mapped import WRITE, MappedChunks
from layoutkit.layouts.virtual.plan import VirtualPlan
from layoutkit.layouts.virtual.refindex import attach
from layoutkit.layouts.virtual.spec import LAYOUT_NAME, LAYOUT_VERSION, REFS_PREFIX, VERSIONS_KEY
from layoutkit.options import format_size
from layoutkit.plan import CopyTask
from layoutkit.storage import Destination, ObjectSource, SourceSet, as_kv, portable, portable_target
from layoutkit.storage.icechunk_repo import IcechunkKV, source_url
from layoutkit.writers.zarr_ import ZarrWriter
from layoutkit.writers.zarr_convert import (
    ConvertSummary,
    CopyJob,
    adopt_job,
    close_open_files,
    copy_task,
    not_writable,
    open_job,
    sidecar,
)


@dataclass(frozen=True)
class VirtualSummary(ConvertSummary):
    referenced: int = 0  # arrays whose chunks are references into the sources
    referenced_bytes: int = 0
    written: tuple[tuple[str, str], ...] = ()  # arrays written, and why they are not referenced
    written_bytes: int = 0
    chunks_written: int = 0  # chunks of referenced arrays written all the same (filter mask, distrusted index, fill)

    def layout_lines(self) -> list[str]:
        said = "; ".join(f"{path} {reason}" for path, reason in self.written[:5])
        more = f" and {len(self.written) - 5:,} more" if len(self.written) > 5 else ""
        return [f"{self.referenced:,} arrays referenced where they lie ({format_size(self.referenced_bytes)}), "
                f"{len(self.written):,} written ({format_size(self.written_bytes)})" + (f": {said}{more}" if said else "")
                + (f"; {self.chunks_written:,} chunks of referenced arrays written (their filters skipped, or "
                   "never written with another fill value)" if self.chunks_written else "")]


@dataclass(frozen=True)
class VirtualJob:
    copy: CopyJob  # the source, the store, every planned array
    referenced: frozenset[str]
    versions: dict[str, dict[str, Any]]  # source URL -> {"mtime": epoch seconds} or {"etag": ...}


def version_of(source: Path | ObjectSource) -> dict[str, Any]:
    """What identifies the version of a source a reference points into: its ETag in a
    bucket, else its modification time (whole seconds, rounded up: what a bucket's
    Last-Modified would say)."""
    if isinstance(source, ObjectSource):
        import obstore

        from layoutkit.storage.retry import retrying

        store, key = source.store_and_key
        head = retrying(lambda: obstore.head(store, key))
        return {"etag": head.get("e_tag") or "", "size": int(head["size"])}
    stat = os.stat(source)
    return {"mtime": math.ceil(stat.st_mtime_ns / 1e9), "size": stat.st_size}


def begin(staged: Any, source: Any, inventory: Inventory, plan: VirtualPlan, attrs: dict[str, Any]) -> Work:
    kv = as_kv(staged)
    writer = ZarrWriter(staged, 3)
    try:
        writer.create(inventory, list(plan.arrays), sidecar(inventory, plan),
                      {**attrs, LAYOUT_ATTR: {"name": LAYOUT_NAME, "version": LAYOUT_VERSION}})
    except OSError as exc:
        raise not_writable(Path(plan.dest or str(staged)), exc) from None
    members = source.members if isinstance(source, SourceSet) else (source,)
    versions = {source_url(m): version_of(m) for m in members}
    referenced = set(plan.referenced)
    mapped = {b.file for a in inventory.arrays if a.path in referenced and a.mapped for b in a.mapped}
    versions.update({source_url(Path(f)): version_of(Path(f)) for f in mapped})  # each file once, not each frame
    if isinstance(kv, IcechunkKV):
        attach(kv)  # layoutkit's copy of the references set, written before the commit
    else:  # an append's staging folder: the merge sets the references
        kv.put(VERSIONS_KEY, json.dumps(versions).encode())
    infos = {a.path: a for a in inventory.arrays}
    planned = {a.path: infos[a.path] for a in plan.arrays}
    copy = CopyJob(portable(source), portable_target(staged), 3, planned, frozenset(writer.fill_matches_source(planned)))
    adopt_job(copy, writer)
    job = VirtualJob(copy, frozenset(plan.referenced), versions)
    return Work(reference_task, job, plan.tasks, cleanup=close_open_files, close=close_open_files,
                complete=writer.finish)


def reference_task(job: VirtualJob, task: CopyTask) -> Done:
    """Reference the chunks of ``task``'s referenced arrays, write the rest; the task's
    logical bytes (the progress of a run counts the data it makes readable), and the
    chunks of referenced arrays it wrote instead (``chunks_written``)."""
    others = tuple(item for item in task.items if item[0] not in job.referenced)
    if others:
        copy_task(job.copy, replace(task, items=others))
    reader, writer = open_job(job.copy)
    refs: dict[str, list[list[Any]]] = {}
    # array -> its file's URL and its allocated chunks, asked once: a task holds thousands
    # of small chunks of a few arrays (a lookup per chunk was 0.3 s of a NeXus-like file)
    urls: dict[str, str] = {}
    located: dict[str, Mapping[tuple[int, ...], tuple[int, int, int]] | None] = {}
    blocks: list[Any] = []
    written = 0  # chunks of referenced arrays written instead
    mapped: dict[str, MappedChunks] = {}  # a virtual dataset's: its chunks in the files it maps
    try:
        for path, region in task.items:
            if path in job.referenced and job.copy.arrays[path].layout == "virtual":
                chunks_of = mapped.get(path) or mapped.setdefault(path, MappedChunks(job.copy.arrays[path]))
                chunks_of.cover(region)
                written += _mapped_refs(job, path, region, chunks_of, refs, blocks, reader)
    finally:
        for chunks_of in mapped.values():
            chunks_of.close()
    for path, region in task.items:
        if path not in job.referenced or path in mapped:
            continue
        info = job.copy.arrays[path]
        chunks = info.chunks if info.layout == "chunked" and info.chunks else info.shape
        origins = list(itertools.product(*(range(a // c * c, b, c) for (a, b), c in zip(region, chunks))))
        found = located[path] if path in located else located.setdefault(path, reader.chunk_locations(path))
        if found is None:  # its index is not trusted: the region written, read through HDF5
            blocks.append((path, region, reader.read(path, region)))
            written += len(origins)
            continue
        url = urls.get(path) or urls.setdefault(path, source_url(reader.source_of(path)))
        for origin in origins:
            entry = found.get(origin)
            if entry is not None and entry[2] == 0:
                refs.setdefault(path, []).append([[o // c for o, c in zip(origin, chunks)], url, entry[0], entry[1]])
            elif entry is not None or path not in job.copy.sparse_ok:
                block = tuple((o, min(o + c, n)) for o, c, n in zip(origin, chunks, info.shape))
                blocks.append((path, block, reader.read(path, block)))
                written += 1
    if blocks:
        writer.write_many(blocks)
    if refs:
        put_refs(job.copy.dest, task.index, refs, job.versions)
    return Done(task.nbytes, {"chunks_written": written})


def _mapped_refs(job: VirtualJob, path: str, region: Any, chunks_of: MappedChunks, refs: dict[str, list[list[Any]]],
                 blocks: list[Any], reader: Any) -> int:
    """The references of a virtual dataset's chunks in ``region`` into the files it maps
    (added to ``refs``); a chunk that cannot be referenced read through HDF5 (added to
    ``blocks``), as is an unmapped one whose fill value Zarr's does not give. How many
    chunks are written."""
    info, grid, written = job.copy.arrays[path], chunks_of.grid, 0
    for origin in itertools.product(*(range(a // c * c, b, c) for (a, b), c in zip(region, grid))):
        where = chunks_of.locate(origin)
        if isinstance(where, tuple):
            refs.setdefault(path, []).append([[o // c for o, c in zip(origin, grid)], source_url(Path(where[0])),
                                              where[1], where[2]])
        elif where == WRITE or path not in job.copy.sparse_ok:
            block = tuple((o, min(o + c, n)) for o, c, n in zip(origin, grid, info.shape))
            blocks.append((path, block, reader.read(path, block)))
            written += 1
    return written


def put_refs(dest: Any, number: int, refs: dict[str, list[list[Any]]], versions: dict[str, dict[str, Any]]) -> None:
    """Set ``refs`` ({array: [[chunk index, url, offset, length], ...]}) in an Icechunk
    session, or keep them in a staging folder's document ``number``."""
    kv = as_kv(dest)
    if isinstance(kv, IcechunkKV):
        for path, chunks in refs.items():
            kv.set_refs(path, chunks, versions)
        return
    kv.put(f"{REFS_PREFIX}{number:08d}.json", json.dumps(refs).encode())


def summarize(source: Any, dest: Destination, inventory: Inventory, plan: VirtualPlan, work: Work,
              seconds: float) -> VirtualSummary:
    members = source.members if isinstance(source, SourceSet) else (source,)
    sizes = sum(m.size() if isinstance(m, ObjectSource) else os.stat(m).st_size for m in members)
    chunks_written = work.counts["chunks_written"]
    return VirtualSummary(
        source=str(source), dest=str(dest), arrays=len(plan.arrays), groups=len(inventory.groups),
        links=len(inventory.links), skipped=plan.skipped, logical_bytes=plan.nbytes, source_bytes=sizes,
        dest_bytes=dest.repository_bytes() if hasattr(dest, "repository_bytes") else dest.size(), seconds=seconds, referenced=len(plan.referenced),
        referenced_bytes=plan.referenced_bytes, written=plan.written,
        written_bytes=plan.nbytes - plan.referenced_bytes, chunks_written=chunks_written,
    )


__all__ = ["VirtualJob", "VirtualSummary", "begin", "put_refs", "reference_task", "summarize", "version_of"]
