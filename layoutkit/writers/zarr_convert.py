"""What every Zarr layout's writer shares: the tasks that copy blocks from the source
into a store, the run's summary and the sidecar.

The copy tasks (:func:`copy_task`, :func:`copy_packed_task`) read their blocks raw,
decode them outside h5py's lock and encode them on the worker. The planning they carry
out is :mod:`layoutkit.zarr_plan`'s (pure); :class:`~layoutkit.zarr_layout.ZarrLayout`
is the base of the Zarr layouts.
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit import __version__
from layoutkit.errors import OutputNotWritableError
from layoutkit.formats import RENAMED_KEY
from layoutkit.hdf5.inventory import ArrayInfo, Inventory
from layoutkit.hdf5.raw import RawReader, SetReader, open_reader
from layoutkit.options import ZarrFormat
from layoutkit.plan import CopyTask
from layoutkit.writers.zarr_ import ZarrWriter
from layoutkit.zarr_plan import renamed_nodes


@dataclass(frozen=True)
class ConvertSummary:
    source: str
    dest: str
    arrays: int
    groups: int
    links: int
    skipped: tuple[tuple[str, str], ...]
    logical_bytes: int
    source_bytes: int
    dest_bytes: int
    seconds: float
    sharded: int = 0  # arrays written with shards
    shards_requested: bool = False
    copied: int | None = None  # --compressor source: arrays whose stored chunks were copied as they are
    reencoded: tuple[tuple[str, str], ...] = ()
    batches: int = 1  # a set of many sources written in batches (layoutkit.appending.batches): how many

    @property
    def stored_throughput(self) -> float:
        """Bytes written per second (for a copy, the rate that matters)."""
        return self.dest_bytes / self.seconds if self.seconds > 0 else float("nan")

    @property
    def ratio(self) -> float:
        return self.logical_bytes / self.dest_bytes if self.dest_bytes else float("nan")

    @property
    def throughput(self) -> float:
        return self.logical_bytes / self.seconds if self.seconds > 0 else float("nan")

    def layout_lines(self) -> list[str]:
        """What the layout alone has to say of the run, a line each, after the summary
        every layout shares (the command prints them; shared code never asks which
        layout it holds)."""
        return []

    def lines(self) -> list[str]:
        """What ``layoutkit convert`` prints of the run, a line each."""
        from layoutkit.options import SOURCE_SIZE, format_size, plural, size_relative

        what = (f"in {self.batches} batches (the first converted, each next appended)" if self.batches > 1
                else f"{plural(self.arrays, 'array')} in {plural(self.groups, 'group')}")
        out = [f"converted {self.source} -> {self.dest}: {what}, {format_size(self.logical_bytes)} of data, "
               f"{size_relative(self.dest_bytes, self.source_bytes, SOURCE_SIZE)}, {self.seconds:.1f} s, "
               f"{format_size(self.throughput)}/s of data, {format_size(self.stored_throughput)}/s stored"]
        if self.copied is not None:
            said = "; ".join(f"{path} {reason}" for path, reason in self.reencoded[:5])
            more = f" and {len(self.reencoded) - 5:,} more" if len(self.reencoded) > 5 else ""
            out.append(f"{self.copied:,} arrays copied as stored, {len(self.reencoded):,} re-encoded"
                       + (f": {said}{more}" if said else ""))
        out += self.layout_lines()
        if self.shards_requested:
            out.append(f"{self.sharded:,} arrays sharded" if self.sharded else
                       "no array large enough to shard: each fits in one chunk, so none was sharded")
        if self.links:
            out.append(f"{self.links} links recorded in {self.dest}/layoutkit.json")
        out += [f"skipped {path}: {reason}" for path, reason in self.skipped]
        return out


# ---------------------------------------------------------------------------------
# the worker side (module level so dask can pickle it)


@dataclass(frozen=True)
class CopyJob:
    source: Any  # a path, or an ObjectSource
    dest: Any  # a store path, or a key-value target (layoutkit.storage.kv)
    zarr_format: ZarrFormat
    arrays: dict[str, ArrayInfo]
    # arrays whose Zarr fill value equals the HDF5 one: never-written regions are skipped
    sparse_ok: frozenset[str] = frozenset()
    # --compressor source: arrays whose stored chunks are copied as they are
    copied: frozenset[str] = frozenset()


_OPEN: dict[tuple[str, str], tuple[RawReader | SetReader, ZarrWriter]] = {}
_OPEN_LOCK = threading.Lock()


def _key(job: CopyJob) -> tuple[str, str]:
    return (getattr(job.source, "key", str(job.source)), str(job.dest))


def open_job(job: CopyJob) -> tuple[RawReader | SetReader, ZarrWriter]:
    """The reader and writer of ``job`` in this process: threads of a worker share them."""
    key = _key(job)
    with _OPEN_LOCK:
        if key not in _OPEN:
            _OPEN[key] = (open_reader(job.source, job.arrays), ZarrWriter(job.dest, job.zarr_format))
        return _OPEN[key]


def adopt_job(job: CopyJob, writer: ZarrWriter) -> None:
    """Let local threads share ``writer``, which already holds every array open."""
    with _OPEN_LOCK:
        _OPEN[_key(job)] = (open_reader(job.source, job.arrays), writer)


def close_open_files() -> None:
    """Close the sources this process opened for copy tasks."""
    while _OPEN:
        _, (reader, _writer) = _OPEN.popitem()
        reader.close()


def copy_task(job: CopyJob, task: CopyTask) -> int:
    """Copy every region of ``task`` from the source to the store; return bytes copied."""
    reader, writer = open_job(job)
    wanted = [(path, region) for path, region in task.items if path not in job.sparse_ok or reader.allocated(path, region)]
    reader.prefetch(wanted)  # in a bucket: the whole task's chunks in one batch of GETs
    blocks = []
    for path, region in wanted:
        if path in job.copied:
            writer.write_stored(path, region, reader.stored_chunks(path, region),
                                lambda origin, p=path: reader.read(p, _chunk_region(job.arrays[p], origin)),
                                path in job.sparse_ok)
        else:
            blocks.append((path, region, reader.read(path, region)))
    writer.write_many(blocks)
    return task.nbytes


def copy_packed_task(job: CopyJob, task: CopyTask, packing: dict[str, Any], dtypes: dict[str, str],
                     assemble: Any) -> int:
    """Write every block of ``task`` for a packing layout: a block of a packed array is
    ``assemble(reader, packing[path], dtype, region)``, a mirrored block is copied as
    ``convert`` copies it; return the bytes written."""
    reader, writer = open_job(job)
    blocks = []
    for path, region in task.items:
        parts = packing.get(path)
        if parts is not None:
            blocks.append((path, region, assemble(reader, parts, np.dtype(dtypes[path]), region)))
        elif path not in job.sparse_ok or reader.allocated(path, region):
            blocks.append((path, region, reader.read(path, region)))
    writer.write_many(blocks)
    return task.nbytes


def _chunk_region(info: ArrayInfo, origin: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    assert info.chunks is not None
    return tuple((o, min(o + c, n)) for o, c, n in zip(origin, info.chunks, info.shape))


# ---------------------------------------------------------------------------------


RUN_ONLY = frozenset({"workers", "scheduler"})


def sidecar(inventory: Inventory, plan: Any, mirrored: set[str] | None = None) -> dict[str, Any]:
    """The ``layoutkit.json`` document: options, links, netCDF dimensions, skipped arrays,
    and the dimension scales of each array stored at its own path (``mirrored``: those
    paths, when a layout packs the others; a packed array's scales are in its layout's
    index, and a map of every dataset's would grow with the shots, rewritten by every
    append: 2.8 MB for 1,000 shots of 50 signals)."""
    renamed = renamed_nodes(inventory)  # names with a backslash, stored at other paths
    return {
        **({RENAMED_KEY: renamed} if renamed else {}),
        "layoutkit_version": __version__,
        "command": "convert",
        "source": os.path.basename(plan.source),
        "zarr_format": plan.options.zarr_format,
        "options": {
            f.name: (v if isinstance(v := getattr(plan.options, f.name), (bool, int)) else str(v))
            for f in fields(plan.options)
            if f.name not in RUN_ONLY  # how the run went is not part of the layout
        },
        "userblock_size": inventory.userblock_size,
        "links": [asdict(link) for link in inventory.links],
        "netcdf_dimensions": {
            a.path: a.shape[0] if a.shape else 0 for a in inventory.arrays if a.dim_only
        },
        "skipped": [{"path": p, "reason": r} for p, r in plan.skipped],
        # where each axis's coordinates live, for readers that are not xarray
        "dimension_scales": {
            a.path: [list(s) for s in a.dim_scales]
            for a in inventory.arrays
            if not a.dim_only and any(a.dim_scales) and (mirrored is None or a.path in mirrored)
        } if mirrored is not None else unnamed_scales(inventory, plan),
        "notes": list(inventory.attr_notes),
        # Zarr has no named types: each committed datatype, its type and its attributes
        "datatypes": {t.path: {"type": str(t.dtype), "attributes": t.attrs} for t in inventory.datatypes},
    }


def unnamed_scales(inventory: Inventory, plan: Any) -> dict[str, list[list[str]]]:
    """The dimension scales of the arrays whose scales a reader would not find by name
    (:func:`~layoutkit.formats.scale_by_name`, searched up to the array's shot group): a
    store that mirrors the hierarchy lists only these, so that its ``layoutkit.json``
    does not grow with the shots and a reader of one shot need not read it whole. For a
    shot archive of consistent names the map is empty."""
    from layoutkit.formats import scale_by_name
    from layoutkit.templates import DEFAULT_TEMPLATE

    skipped = {p for p, _ in plan.skipped}
    stored = [a for a in inventory.arrays if not a.dim_only and a.path not in skipped]
    arrays = {a.path for a in stored}
    children: dict[str, set[str]] = {}
    for path in [*arrays, *(g.path for g in inventory.groups)]:
        while path.count("/") and path != "/":
            parent, _, name = path.rpartition("/")
            children.setdefault(parent, set()).add(name)
            path = parent
    template = getattr(plan.options, "template", None) or DEFAULT_TEMPLATE
    prefix = [p for p in template[: template.index("{shot}")].split("/") if p]

    def shot_group(path: str) -> str | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) <= len(prefix) or parts[: len(prefix)] != prefix:
            return None
        return "/" + "/".join(parts[: len(prefix) + 1])

    out: dict[str, list[list[str]]] = {}
    for a in stored:
        names = list(a.dims) if a.dims else []
        found = [
            [hit] if n and not n.startswith("phony_dim_") and (
                hit := scale_by_name(a.path, n, arrays.__contains__, lambda g: children.get(g, ()),
                                     top=shot_group(a.path))) else []
            for n in names
        ]
        actual = [list(s) for s in a.dim_scales] if a.dim_scales else [[] for _ in names]
        if found != actual or len(names) != len(a.dim_scales or names):
            out[a.path] = [list(s) for s in a.dim_scales] if a.dim_scales else [[] for _ in a.shape]
    return out


def not_writable(dest: Path, exc: OSError) -> OutputNotWritableError:
    return OutputNotWritableError(f"Destination {str(dest)!r} cannot be written ({exc.strerror or exc}).")


__all__ = ["ConvertSummary", "CopyJob", "adopt_job", "close_open_files", "copy_packed_task", "copy_task", "not_writable",
           "sidecar"]
