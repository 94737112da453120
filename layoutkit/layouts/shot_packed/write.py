"""Writing shot-packed Zarr: the store's skeleton with each shot's index, then tasks that
fill each shot's packed array.

Each task writes whole shards (or chunks) of a packed array, assembled from whole rows
of the datasets that fall in them (:func:`assemble_bytes`), so memory stays within the
budget however large a shot is; mirrored arrays are copied as a shot-major store's. The
layout itself is specified in :mod:`layoutkit.layouts.shot_packed.spec`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.formats import LAYOUT_ATTR
from layoutkit.hdf5.inventory import ArrayInfo, Inventory
from layoutkit.layout import Work
from layoutkit.layouts.shot_packed.plan import ShotPackedPlan
from layoutkit.layouts.shot_packed.spec import INDEX_ATTR, SHOTS_ARRAY, IndexTables, Segment
from layoutkit.plan import ArrayPlan, CopyTask
from layoutkit.storage import Destination, portable, portable_target
from layoutkit.templates import compile_template
from layoutkit.writers.zarr_ import ZarrWriter
from layoutkit.writers.zarr_convert import (
    ConvertSummary,
    CopyJob,
    adopt_job,
    close_open_files,
    copy_packed_task,
    not_writable,
    sidecar,
)


def assemble_bytes(reader: Any, segments: tuple[Segment, ...], dtype: np.dtype, region: Any) -> np.ndarray:
    """The block ``region`` (``((lo, hi),)``, in bytes) of a packed array: the bytes of the
    source datasets that fall in it, each read as whole rows of its first axis."""
    (lo, hi), = region
    out = np.empty(hi - lo, dtype=np.uint8)
    reads = []
    for seg in segments:
        a, b = max(lo, seg.start), min(hi, seg.start + seg.size)
        if a >= b:
            continue
        info = reader.arrays[seg.source]
        row = math.prod(info.shape[1:]) * info.dtype.itemsize
        first, last = (a - seg.start) // row, -(-(b - seg.start) // row)
        reads.append((seg, a, b, first * row, ((first, last), *((0, n) for n in info.shape[1:]))))
    reader.prefetch([(seg.source, rows) for seg, _, _, _, rows in reads])
    for seg, a, b, first_byte, rows in reads:
        data = np.ascontiguousarray(reader.read(seg.source, rows), dtype=reader.arrays[seg.source].dtype)
        skip = a - seg.start - first_byte
        out[a - lo : b - lo] = data.reshape(-1).view(np.uint8)[skip : skip + (b - a)]
    return out


def _packed_info(plan: ArrayPlan, index: dict[str, Any] | None = None) -> ArrayInfo:
    """The inventory entry the Zarr writer creates a packed array from (version 3: the
    shot's index its attribute)."""
    return ArrayInfo(path=plan.path, shape=plan.shape, dtype=np.dtype(plan.dtype), kind="numeric", layout="chunked",
                     chunks=None, filters=(), fill_value=None, attrs={INDEX_ATTR: index} if index else {}, dims=(),
                     dim_scales=(), is_scale=False, storage_bytes=0)


def _shots_info(plan: ArrayPlan) -> ArrayInfo:
    """The root-level list of shots (version 3): text, one chunk."""
    return ArrayInfo(path=plan.path, shape=plan.shape, dtype=np.dtype("O"), kind="string", layout="chunked",
                     chunks=None, filters=(), fill_value=None, attrs={}, dims=(SHOTS_ARRAY,), dim_scales=((),),
                     is_scale=False, storage_bytes=0)


def _inline_unpacked(plan: ShotPackedPlan, docs: dict[str, dict[str, Any]]) -> None:
    """Version 3: a shot's index carries the metadata documents of the shot's unpacked
    arrays, so reading a shot fetches one document, not one per array."""
    for shot in plan.shots:
        if not shot.index:
            continue
        node = docs[shot.array.strip("/")]["zarr.json"]
        inline = {rel: docs[f"{shot.group}/{rel}".strip("/")]["zarr.json"] for rel in shot.index["mirrored"]}
        node["attributes"] = {**node["attributes"], INDEX_ATTR: {**shot.index, "mirrored": inline}}


# the worker side (module level so dask can pickle it)


@dataclass(frozen=True)
class ShotPackJob(CopyJob):
    packing: dict[str, tuple[Segment, ...]] | None = None  # packed array -> its segments
    dtypes: dict[str, str] | None = None


def shot_pack_task(job: ShotPackJob, task: CopyTask) -> int:
    """Write every block of ``task``: packed blocks assembled from the datasets they
    hold, mirrored blocks copied as ``convert`` copies them; return the bytes written."""
    return copy_packed_task(job, task, job.packing or {}, job.dtypes or {}, assemble_bytes)


def begin(staged: Path, source: Path, inventory: Inventory, plan: ShotPackedPlan,
          attrs: dict[str, Any]) -> Work:
    options = plan.options
    index = {s.array: s.index for s in plan.shots}
    shots_list = f"/{SHOTS_ARRAY}"
    mirrored = [a for a in plan.arrays if a.path not in index and a.path != shots_list]
    infos = {a.path: a for a in inventory.arrays}
    writer = ZarrWriter(staged, options.zarr_format)
    made = [_packed_info(a, index[a.path]) for a in plan.arrays if a.path in index]
    made += [_shots_info(a) for a in plan.arrays if a.path == shots_list]
    layout_inventory = replace(inventory, groups=plan.groups, arrays=(*inventory.arrays, *made))
    # the index's tables (version 2) are in the root's attributes only
    layout = {k: v for k, v in plan.layout.items() if k not in IndexTables.LAYOUT_KEYS}
    doc = {**sidecar(inventory, plan, {a.path for a in mirrored}), "layout": layout}
    try:
        writer.create(layout_inventory, list(plan.arrays), doc, {**attrs, LAYOUT_ATTR: plan.layout},
                      amend=partial(_inline_unpacked, plan) if plan.shot_names else None)
        if plan.shot_names:
            writer.write_many([(shots_list, ((0, len(plan.shot_names)),), np.array(plan.shot_names, dtype=object))])
    except OSError as exc:
        raise not_writable(Path(plan.dest or staged), exc) from None
    packing = {s.array: s.segments for s in plan.shots}
    sources = {seg.source for segs in packing.values() for seg in segs} | {a.path for a in mirrored}
    job = ShotPackJob(
        portable(source), portable_target(staged), options.zarr_format, {p: infos[p] for p in sources},
        frozenset(writer.fill_matches_source({a.path: infos[a.path] for a in mirrored})),
        packing=packing, dtypes=dict.fromkeys(packing, "|u1"),
    )
    adopt_job(job, writer)
    _, prefix = compile_template(plan.layout["template"])
    # version 3: the root's consolidated metadata lists the nodes outside shot groups only
    keep = (lambda node: prefix.match(f"/{node}/") is None) if plan.shot_names else None
    return Work(shot_pack_task, job, plan.tasks, cleanup=close_open_files, close=close_open_files,
                done_bytes=16 * len(plan.shot_names), complete=partial(writer.finish, keep=keep))


def summarize(source: Path, dest: Destination, inventory: Inventory, plan: ShotPackedPlan,
              work: Work, seconds: float) -> ConvertSummary:
    return ConvertSummary(
        source=str(source), dest=str(dest), arrays=len(plan.arrays), groups=len(plan.groups),
        links=len(inventory.links), skipped=plan.skipped, logical_bytes=plan.nbytes,
        source_bytes=source.stat().st_size, dest_bytes=dest.size(), seconds=seconds,
        sharded=sum(1 for a in plan.arrays if a.shards), shards_requested=plan.options.shards.mode != "none",
    )


__all__ = ["ShotPackJob", "assemble_bytes", "begin", "shot_pack_task", "summarize"]
