"""Writing signal-major Zarr: the packed series' arrays and index, and the tasks that fill them.

Each task writes whole shards (or chunks) of a packed array, assembled from the parts of
the shots' datasets that fall in them (:func:`assemble_block`), so memory stays within
the budget however large a signal is; mirrored arrays are copied as a shot-major store's.
The layout itself is specified in :mod:`layoutkit.layouts.signal_major.spec`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from layoutkit.formats import LAYOUT_ATTR
from layoutkit.hdf5.inventory import ArrayInfo, GroupInfo, Inventory
from layoutkit.hdf5.raw import RawReader
from layoutkit.layout import Work
from layoutkit.layouts.signal_major.plan import SignalMajorPlan, index_values, packed_arrays, packed_pieces
from layoutkit.layouts.signal_major.spec import (
    DATA,
    MIRRORED_ARRAY,
    SERIES_ATTR,
    SHOT_ATTR,
    SHOTS_ARRAY,
    PackedSeries,
    series_document,
    series_document_v2,
    shot_documents,
)
from layoutkit.plan import ArrayPlan, CopyTask, Region
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


def assemble_block(reader: RawReader, rows: tuple[tuple[str, int, int], ...], dtype: np.dtype,
                   region: Region) -> np.ndarray:
    """One write block of a packed array, read from the shots' datasets it spans.

    ``rows`` are ``(source path, start, length)`` in packing order. Only the part of each
    dataset inside the block is read, so a block never costs more memory than itself.
    """
    (lo, hi), rest = region[0], tuple(region[1:])
    out = np.empty(tuple(b - a for a, b in region), dtype=dtype)
    pieces = list(packed_pieces([r[1] for r in rows], [r[2] for r in rows], lo, hi))
    reads = [(rows[k][0], ((first, stop), *rest)) for k, first, stop, _ in pieces]
    reader.prefetch(reads)  # one batch of requests for every shot in the block (in a bucket)
    for (path, piece), (_, first, stop, at) in zip(reads, pieces):
        out[at : at + stop - first] = reader.read(path, piece)
    return out


class SignalMajorWriter(ZarrWriter):
    """A :class:`ZarrWriter` that also creates the packed series of a signal-major store.

    Arrays the packing does not carry (outside the template, or of types it does not
    pack) are mirrored at their source paths exactly as ``convert --layout shot-major`` does.
    """

    def create_layout(
        self,
        inventory: Inventory,
        mirrored: list[ArrayPlan],
        packed: list[ArrayPlan],
        series: list[PackedSeries],
        groups: list[GroupInfo],
        sidecar: dict[str, Any],
        root_attrs: dict[str, Any],
        version: int,
        amend: Any = None,
    ) -> None:
        """Create every group and array (metadata only).

        ``groups`` are the source groups to mirror (the root among them, whose
        attributes get ``root_attrs`` added); ``packed`` plans the arrays of ``series``
        (and, in version 2, the root-level lists); ``amend`` as :meth:`ZarrWriter.create`'s.
        """
        infos = [a for a in inventory.arrays if a.path in {p.path for p in mirrored}]
        for s in series:
            infos += packed_arrays(s, version)
        infos += [_text_info(a.path, a.shape) for a in packed if a.path.strip("/") in (SHOTS_ARRAY, MIRRORED_ARRAY)]
        document = series_document_v2 if version >= 2 else series_document
        root = next((g for g in groups if g.path == "/"), GroupInfo("/", {}))
        all_groups = [GroupInfo("/", {**root.attrs, **root_attrs})]
        all_groups += [g for g in groups if g.path != "/"]
        all_groups += [GroupInfo(f"/{s.group}", {SERIES_ATTR: document(s)}) for s in series]
        synthetic = Inventory(
            path=inventory.path,
            userblock_size=inventory.userblock_size,
            is_netcdf4=inventory.is_netcdf4,
            groups=tuple(all_groups),
            arrays=tuple(infos),
            links=inventory.links,
            attr_notes=inventory.attr_notes,
        )
        self.create(synthetic, [*mirrored, *packed], sidecar, amend=amend)

    def write_index(self, series: list[PackedSeries], version: int, lists: dict[str, tuple[str, ...]]) -> int:
        """Write the index arrays of every series, and version 2's root-level lists
        (array name -> values); returns their bytes."""
        blocks: list[tuple[str, tuple[tuple[int, int], ...], np.ndarray]] = [
            (path, ((0, len(v)),), v) for s in series for path, v in index_values(s, version)]
        blocks += [(f"/{name}", ((0, len(v)),), np.array(v, dtype=object)) for name, v in lists.items() if v]
        self.write_many(blocks)
        return sum(v.size * 8 for _, _, v in blocks)


def _text_info(path: str, shape: tuple[int, ...]) -> ArrayInfo:
    """A root-level list of names (version 2's shots, and arrays inside shots): text."""
    return ArrayInfo(path=path, shape=shape, dtype=np.dtype("O"), kind="string", layout="chunked", chunks=None,
                     filters=(), fill_value=None, attrs={}, dims=(path.strip("/"),), dim_scales=((),),
                     is_scale=False, storage_bytes=0)


def add_shot_documents(plan: SignalMajorPlan, docs: dict[str, dict[str, Any]]) -> None:
    """Version 2: every shot group's ``zarr.json`` gets the attribute :data:`SHOT_ATTR`,
    the shot's own index (:func:`~layoutkit.layouts.signal_major.spec.shot_documents`)
    and the nodes inside the shot (its groups' attributes, its arrays' ``zarr.json``
    documents), which the root's node listing leaves out. A shot group the source
    implies (no attributes of its own) is written for it."""
    _, prefix = compile_template(plan.layout["template"])
    per_shot = {shot: {**doc, "groups": {}, "mirrored": {}} for shot, doc in shot_documents(list(plan.series)).items()}
    where: dict[str, str] = {}  # shot -> its group's node path
    for s in plan.series:
        for p in s.parts:
            for r in p.rows:
                if (m := prefix.match(r.source)) is not None:  # a packed row lies in its shot
                    where.setdefault(r.shot, m.group(0).strip("/"))
    for node, files in list(docs.items()):
        m = prefix.match(f"/{node}/")
        if m is None:
            continue
        shot, shot_node = m.group("shot"), m.group(0).strip("/")
        where[shot] = shot_node
        entry = per_shot.setdefault(shot, {"rows": {}, "attrs": {}, "same_as": {}, "groups": {}, "mirrored": {}})
        rel = node[len(shot_node) + 1:]
        doc = files["zarr.json"]
        if rel and doc["node_type"] == "group":
            entry["groups"][rel] = doc.get("attributes") or {}
        elif rel:
            entry["mirrored"][rel] = doc
    for shot, entry in per_shot.items():
        node = where[shot]
        parent = node
        while parent and parent not in docs:  # the shot group, and its parents, when implied
            docs[parent] = {"zarr.json": {"zarr_format": 3, "node_type": "group", "attributes": {}}}
            parent = parent.rpartition("/")[0]
        group = docs[node]["zarr.json"]
        group["attributes"] = {**(group.get("attributes") or {}), SHOT_ATTR: entry}


# the worker side (module level so dask can pickle it)


@dataclass(frozen=True)
class PackJob(CopyJob):
    # packed array (store path) -> its shots' datasets: (source path, start, length)
    packing: dict[str, tuple[tuple[str, int, int], ...]] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)


def pack_task(job: PackJob, task: CopyTask) -> int:
    """Write every block of ``task``: packed blocks assembled from the shots they span,
    mirrored blocks copied as ``convert`` copies them; return the bytes written."""
    return copy_packed_task(job, task, job.packing, job.dtypes, assemble_block)


def begin(staged: Path, source: Path, inventory: Inventory, plan: SignalMajorPlan,
          attrs: dict[str, Any]) -> Work:
    options = plan.options
    mirrored = [a for a in plan.arrays if a.read_mode not in ("pack", "index")]
    packed = [a for a in plan.arrays if a.read_mode in ("pack", "index")]
    writer = SignalMajorWriter(staged, options.zarr_format)
    doc = {**sidecar(inventory, plan, {a.path for a in mirrored}), "layout": plan.layout,
           "merged_scales": plan.merged_scales}
    try:
        v2 = plan.version >= 2
        writer.create_layout(
            inventory, mirrored, packed, list(plan.series), list(plan.groups), doc,
            {**attrs, LAYOUT_ATTR: plan.layout}, plan.version,
            amend=partial(add_shot_documents, plan) if v2 else None,
        )
        index_bytes = writer.write_index(list(plan.series), plan.version,
                                         {SHOTS_ARRAY: plan.shot_names, MIRRORED_ARRAY: plan.in_shots})
    except OSError as exc:
        raise not_writable(Path(plan.dest or staged), exc) from None
    infos = {a.path: a for a in inventory.arrays}
    packing = {
        s.array(p, DATA): tuple((r.source, r.start, r.length) for r in p.rows) for s in plan.series for p in s.parts
    }
    sources = {r[0] for rows in packing.values() for r in rows} | {a.path for a in mirrored}
    job = PackJob(
        portable(source),
        portable_target(staged),
        options.zarr_format,
        {p: infos[p] for p in sources},
        frozenset(writer.fill_matches_source({a.path: infos[a.path] for a in mirrored})),
        packing=packing,
        dtypes={s.array(p, DATA): p.dtype.str for s in plan.series for p in s.parts},
    )
    adopt_job(job, writer)
    _, prefix = compile_template(plan.layout["template"])
    # version 2: the root's consolidated metadata lists the nodes outside shot groups only
    keep = (lambda node: prefix.match(f"/{node}/") is None) if v2 else None
    return Work(pack_task, job, plan.tasks, cleanup=close_open_files, close=close_open_files,
                done_bytes=index_bytes, complete=partial(writer.finish, keep=keep))


def summarize(source: Path, dest: Destination, inventory: Inventory, plan: SignalMajorPlan,
              work: Work, seconds: float) -> ConvertSummary:
    return ConvertSummary(
        source=str(source), dest=str(dest), arrays=len(plan.arrays),
        groups=len(plan.groups) + len(plan.series), links=len(inventory.links), skipped=plan.skipped,
        logical_bytes=plan.nbytes, source_bytes=source.stat().st_size, dest_bytes=dest.size(), seconds=seconds,
        sharded=sum(1 for a in plan.arrays if a.shards), shards_requested=plan.options.shards.mode != "none",
    )


__all__ = ["PackJob", "SignalMajorWriter", "add_shot_documents", "assemble_block", "begin", "pack_task", "summarize"]
