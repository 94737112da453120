"""Write a paged-aggregation HDF5 file that mirrors a source's hierarchy.

Every group, dataset (metadata only), attribute, dimension scale and link is created
first, so the file's metadata sits together in the first metadata pages; raw data is
then written in the order the caller chooses, and HDF5 allocates it in that order.
Compressed chunks arrive pre-encoded (``write_direct_chunk``) from parallel workers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import h5py
import hdf5plugin
import imagecodecs
import numcodecs
import numpy as np

from layoutkit.errors import InvalidOptionError
from layoutkit.formats import PROVENANCE_ATTR, region_of_text
from layoutkit.hdf5.attrs import attribute, attribute_value, reference_path, region_as_text
from layoutkit.hdf5.chunk_index import chunk_count
from layoutkit.hdf5.files import Members
from layoutkit.hdf5.inventory import ArrayInfo, GroupInfo, Inventory
from layoutkit.hdf5.libhdf5 import to_btree_index
from layoutkit.hdf5.model import holds_reference, member_values, region_members, text_reference_members
from layoutkit.hdf5.raw import RawReader, SetReader, open_reader
from layoutkit.layout import Work
from layoutkit.layouts.hdf5_paged.plan import ReorderPlan, ReorderSummary, StoragePlan, without_arrays
from layoutkit.options import CompressorSpec
from layoutkit.plan import Region, blocks_over, region_size
from layoutkit.storage import Destination, read_head
from layoutkit.templates import compile_template
from layoutkit.timings import timed


def filter_kwargs(spec: CompressorSpec) -> dict[str, Any]:
    """h5py ``create_dataset`` keywords for a compressor (HDF5 filters)."""
    if spec.name == "none":
        return {}
    if spec.name == "gzip":
        return {"compression": "gzip", "compression_opts": spec.level, "shuffle": spec.shuffle}
    if spec.name == "lzf":
        return {"compression": "lzf", "shuffle": spec.shuffle}
    if spec.name == "zstd":
        return {**hdf5plugin.Zstd(clevel=spec.codec_level), "shuffle": spec.shuffle}
    if spec.name == "lz4":
        return {**hdf5plugin.LZ4(), "shuffle": spec.shuffle}
    if spec.name == "blosc":
        shuffle = hdf5plugin.Blosc.SHUFFLE if spec.shuffle else hdf5plugin.Blosc.NOSHUFFLE
        return dict(hdf5plugin.Blosc(cname=spec.blosc_cname, clevel=spec.codec_level, shuffle=shuffle))
    raise InvalidOptionError(f"Unknown compressor {spec}.")


class ChunkEncoder:
    """Encodes one chunk as HDF5's filter pipeline would (shuffle, then deflate/zstd)."""

    def __init__(self, spec: CompressorSpec, itemsize: int) -> None:
        self.steps = []
        if spec.shuffle and itemsize > 1:
            shuffle = numcodecs.Shuffle(elementsize=itemsize)
            self.steps.append(lambda b: bytes(shuffle.encode(b)))
        if spec.name == "gzip":
            # libdeflate: a zlib stream like zlib.compress's, 2.2x as fast at level 4 and
            # 5% smaller (measured on the sample's chunks); any inflate decodes it
            level = spec.codec_level
            # a new bytes object (the stub says any buffer)
            self.steps.append(lambda b: cast(bytes, imagecodecs.deflate_encode(b, level=level)))
        elif spec.name == "zstd":
            zstd = numcodecs.Zstd(level=spec.codec_level)
            self.steps.append(lambda b: bytes(zstd.encode(b)))

    def encode(self, data: bytes) -> bytes:
        with timed("encode"):
            for step in self.steps:
                data = step(data)
            return data


class PagedHDF5Writer:
    """Creates the output file's structure, then takes raw data in write order.

    Parameters
    ----------
    path
        The output file (layoutkit writes to a temporary sibling and renames).
    page_size
        File space page size in bytes.
    userblock_size
        Bytes reserved at the start of the file (copied from the source afterwards).
    """

    name = "hdf5-paged"

    def __init__(self, path: str | Path, page_size: int, userblock_size: int = 0) -> None:
        self.path = Path(path)
        kwargs: dict[str, Any] = {}
        if userblock_size:
            # with paged file space HDF5 aligns objects to pages and needs the user block
            # to be whole pages; the source's user block bytes are copied to its start
            kwargs["userblock_size"] = -(-userblock_size // page_size) * page_size
        self.file = h5py.File(
            # free space not persisted: the file is written once, and persisting it moved
            # the superblock extension, which opening reads, to the end of the metadata
            self.path, "w", fs_strategy="page", fs_persist=False, fs_page_size=page_size,
            # the 1.10 format at least: dense attribute storage (attributes over 64 kB), and the
            # fixed/extensible-array chunk indexes, whose metadata is a fraction of 1.8's
            # B-trees for datasets of many small chunks (a 1.3 MB file of them grew to 2.8 MB)
            track_order=True, libver=("v110", "latest"), **kwargs,
        )
        # paths only: an open HDF5 dataset costs tens of kB and there may be 10^5 of them;
        # writes arrive dataset by dataset, so only the current one is kept open
        self.datasets: set[str] = set()
        self._type_paths: dict[tuple[int, int], str] = {}  # (member, address) of a committed type -> its path
        # copied whole as they are stored when created (strings HDF5 converts on reading)
        self.copied: set[str] = set()
        self._current: tuple[str, h5py.h5d.DatasetID] | None = None

    # -- structure ----------------------------------------------------------------

    def create(
        self,
        inventory: Inventory,
        source: Members,
        storage: dict[str, StoragePlan],
        dedupe: dict[str, str],
        root_attrs: dict[str, str] | None = None,
        template: str | None = None,
    ) -> None:
        """Create groups, datasets (no data), attributes, scales and links.

        ``source`` opens the source's file, or a set's members (:class:`Members`), each
        node taken from the member the inventory names. ``dedupe`` maps a duplicate dimension
        scale to the copy that is kept; the duplicate's path becomes a hard link to it,
        and datasets attached to the duplicate are attached to the kept copy.
        ``root_attrs`` (text) are added to the root group's attributes, replacing any of
        the same name (layoutkit's provenance).

        With a shot ``template``, each shot's objects are made together, its scales
        attached there too where they and what they are attached to are all the shot's
        (:func:`shot_units`): HDF5 places metadata in the order it is made, so that a
        shot's headers and the attributes attaching adds to them lie in one block, not
        in three blocks tens of MiB apart (one GET each for a reader in a bucket).
        """
        files = source
        f = self.file
        self._deferred_refs: list[tuple[str, str, Any, Any, int]] = []
        for g in inventory.groups:
            if g.path == "/":
                self._copy_attrs(files(g.member)[g.path], f, g.member)
        # the recipe (which tells a reader how to read the file) first, while the root's header
        # is in the first page, and as a fixed-length string, in the header itself: added
        # last, it grew where the metadata then ended, and a variable-length string's bytes
        # lie in a global heap on a page of its own; a reader in a bucket paid two more GETs
        # of 8 MiB for it at 50,000 shots, one at 4,000
        for name, text in (root_attrs or {}).items():
            raw = text.encode()
            f.attrs.create(name, np.bytes_(raw), dtype=h5py.string_dtype("utf-8", max(1, len(raw))))
        # committed datatypes before the datasets and attributes that use them (and after
        # the groups they are in): made in one unit
        units = shot_units(inventory, None if inventory.datatypes else template)
        self._type_paths = {(t.member, t.address): t.path for t in inventory.datatypes}
        attacher = _Attacher(self, inventory, files, dedupe, units)
        for k, unit in enumerate(units):
            if k == 1:
                # every shot's link first, in one run, to be made a group when its shot is: the
                # links of the group that holds the shots (its name index and heap) then lie
                # together, not spread between the shots' objects (at 50,000 shots a lookup
                # of one name read 5 blocks of 1 MiB, with these together one)
                for later in units[1:]:
                    if later.top is not None:
                        f[later.top] = h5py.SoftLink(_PLACEHOLDER)
            self._make_groups(unit, files)
            if k == 0:
                for t in inventory.datatypes:
                    files(t.member)[t.path].id.copy().commit(f.id, t.path.encode("utf8"))
                for t in inventory.datatypes:
                    self._copy_attrs(files(t.member)[t.path], f[t.path], t.member)
            self._make_arrays(unit, files, storage, dedupe)
            if unit.shot is not None:
                attacher.attach(unit)
        attacher.attach()  # everything not attached with its shot
        for dup, kept in dedupe.items():
            f[dup] = f[kept]
        for link in inventory.links:
            if link.kind == "hard":
                f[link.path] = f[link.target]
            elif link.kind == "soft":
                f[link.path] = h5py.SoftLink(link.target)
            elif link.kind == "external":
                f[link.path] = h5py.ExternalLink(link.target_file, link.target)
        self._remap_reference_attrs(files)

    def _make_groups(self, unit: ShotUnit, files: Members) -> None:
        for g in unit.groups:
            if g.path == unit.top:
                del self.file[g.path]  # its placeholder: the link made again, in the place it freed
            self.file.create_group(g.path, track_order=True)
            self._copy_attrs(files(g.member)[g.path], self.file[g.path], g.member)

    def _make_arrays(self, unit: ShotUnit, files: Members, storage: dict[str, StoragePlan],
                     dedupe: dict[str, str]) -> None:
        for info in unit.arrays:
            if info.path not in dedupe:
                self._create_dataset(info, files(info.origin.member)[info.path], storage[info.path])
                self.datasets.add(info.path)
        for info in unit.arrays:  # scales first, then attach
            if info.is_scale and info.path not in dedupe:
                name = files(info.origin.member)[info.path].attrs.get("NAME")
                dsid = self.file[info.path].id
                if isinstance(name, bytes):
                    h5py.h5ds.set_scale(dsid, name)
                elif isinstance(name, str):
                    h5py.h5ds.set_scale(dsid, name.encode())
                else:
                    h5py.h5ds.set_scale(dsid)

    def _remap_reference_attrs(self, files: Members) -> None:
        """Object-reference attributes point at objects of the source; point them at the
        objects at the same paths in the output (null or dangling ones stay null); region
        references at the same selections of the datasets at the same paths."""
        for path, name, dtype, value, member in self._deferred_refs:
            held = np.asarray(value)
            out = self._references_here(held, files(member))
            self.file[path].attrs.create(name, out if held.shape else out[()], dtype=dtype)

    def _references_here(self, values: np.ndarray, source: h5py.File) -> np.ndarray:
        """``values`` (as h5py read them from ``source``) with each reference in them, in
        any member of a compound and any element, made again to this file's object at
        the same path (a region reference: the same selection of it)."""
        if values.dtype.names:
            out = values.copy()
            for n in values.dtype.names:
                out[n] = self._references_here(values[n], source)
            return out
        if values.dtype.kind != "O":
            return values
        out = np.empty(values.shape, dtype=object)
        for i, ref in np.ndenumerate(values):
            if isinstance(ref, h5py.RegionReference):
                out[i] = self.region_reference(region_as_text(source, ref))
            elif isinstance(ref, h5py.Reference):
                out[i] = self.object_reference(reference_path(source, ref))
            elif isinstance(ref, np.ndarray):  # a sequence of them
                out[i] = self._references_here(ref, source)
            else:  # (text, in a compound beside the references)
                out[i] = ref
        return out

    def _create_dataset(self, info: ArrayInfo, src: h5py.Dataset, plan: StoragePlan) -> None:
        # a set's variable joined from files that pack it differently is stored decoded
        # (:mod:`layoutkit.hdf5.concat`): its type, fill value and attributes the inventory's
        dtype = info.dtype if info.unpack else src.dtype
        # strings padded with spaces or NUL-terminated keep their type: HDF5 pads them as it writes
        kwargs: dict[str, Any] = {"dtype": h5py.Datatype(src.id.get_type()) if info.strpad else dtype,
                                  "track_order": True}
        if info.type_path is not None and not info.unpack and info.type_path in self.file:
            kwargs["dtype"] = self.file[info.type_path]  # its committed type, by reference as in the source
        if info.null_space:
            kwargs["data"] = h5py.Empty(dtype)
        else:
            kwargs["shape"] = info.shape
            maxshape = src.maxshape
            if maxshape is not None and maxshape != info.shape:
                kwargs["maxshape"] = maxshape  # unlimited dimensions (netCDF) stay unlimited
        # only a fill value the source's writer set: HDF5's default needs no copy (and a
        # default for a 64 kB string type would not even fit in an object header)
        user_fill = info.unpack or src.id.get_create_plist().fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED
        if user_fill and info.fill_value is not None and not info.null_space and info.kind not in ("string", "reference", "region-reference"):
            kwargs["fillvalue"] = info.fill_value
        if plan.layout == "chunked" or "maxshape" in kwargs:
            # unlimited dimensions need chunks even when small: keep the source's
            kwargs["chunks"] = plan.chunks or info.chunks or True
            kwargs.update(filter_kwargs(plan.compressor))
        if plan.layout == "compact":
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            kwargs["dcpl"] = dcpl  # h5py puts the fill value into it
        ds = self.file.create_dataset(info.path, **kwargs)
        if _fixed_index_too_large(kwargs.get("maxshape"), ds.chunks, info.shape):
            to_btree_index(ds.id)
        if info.strpad and not info.null_space and 0 not in info.shape:
            self._copy_stored(src, ds)
        self._copy_attrs(src, ds, info.origin.member, keep=set(info.attrs) if info.unpack else None)
        if info.unpack and "_FillValue" in info.attrs:
            ds.attrs.create("_FillValue", info.attrs["_FillValue"], dtype=dtype)

    # -- data ---------------------------------------------------------------------

    def write_chunk(self, path: str, offset: tuple[int, ...], data: bytes, filter_mask: int = 0) -> None:
        dsid = self._dataset_id(path)
        with timed("write"):
            dsid.write_direct_chunk(offset, data, filter_mask)

    def write_region(self, path: str, region: tuple[tuple[int, int], ...], data: np.ndarray) -> None:
        if path in self.copied:
            return  # copied as stored when created
        ds = h5py.Dataset(self._dataset_id(path))
        ref = h5py.check_ref_dtype(ds.dtype)
        if ref is not None:  # the reader gives referenced paths, or a region's text
            texts = np.asarray(data, dtype=object)
            data = np.empty(texts.shape, dtype=ds.dtype)
            for i, p in np.ndenumerate(texts):
                data[i] = self.region_reference(p) if ref is h5py.RegionReference else self.object_reference(p)
        if ds.dtype.names and (refs := text_reference_members(ds.dtype)):
            data = np.array(data, dtype=ds.dtype)  # paths and regions' text, as the reader gives them: this file's references
            regions = set(region_members(ds.dtype))
            for name in refs:
                field = member_values(data, name)  # (a view: set in place; a nested member's by its path)
                for index in np.ndindex(*field.shape):
                    p = field[index] if isinstance(field[index], str) else ""
                    field[index] = self.region_reference(p) if name in regions else self.object_reference(p)
        with timed("h5py"):
            if ds.dtype.kind == "O" and isinstance(h5py.check_vlen_dtype(ds.dtype), np.dtype):
                # sequences as h5py read them, one object each: ds[...] = would take a block
                # of equally long (or empty) ones for one more axis
                ds.write_direct(np.asarray(data, dtype=object), dest_sel=tuple(slice(a, b) for a, b in region) or None)
            elif not region:
                ds[()] = data
            else:
                ds[tuple(slice(a, b) for a, b in region)] = data

    def object_reference(self, path: str) -> h5py.Reference:
        """A reference to this file's object at ``path``: a null one where the path is
        empty or names no object of the file."""
        return self.file[path].ref if path and path in self.file else h5py.Reference()

    def region_reference(self, text: str) -> h5py.RegionReference:
        """The region reference a region's text (:func:`~layoutkit.formats.region_text`)
        describes, in this file: a null one where the text is empty or names no dataset
        of the file."""
        region = region_of_text(text)
        if region is None or not isinstance(self.file.get(region[0]), h5py.Dataset):
            return h5py.RegionReference()
        path, selection, coords = region
        space = self.file[path].id.get_space()
        if selection == "all":
            space.select_all()
        elif selection == "none":
            space.select_none()
        elif selection == "points":
            space.select_elements(np.asarray(coords, dtype=np.uint64).reshape(len(coords), -1))
        else:
            space.select_none()
            for start, end in coords:
                count = tuple(b - a + 1 for a, b in zip(start, end))
                space.select_hyperslab(tuple(start), count, op=h5py.h5s.SELECT_OR)
        return h5py.h5r.create(self.file.id, path.encode("utf8"), h5py.h5r.DATASET_REGION, space)

    def _dataset_id(self, path: str) -> h5py.h5d.DatasetID:
        # the dataset being written (pieces arrive dataset by dataset), opened low-level:
        # a high-level Dataset reads its creation properties and resolves its file again,
        # 2.2x the time, and the writes are serial, on the sink's thread
        if self._current is None or self._current[0] != path:
            self._current = (path, h5py.h5d.open(self.file.id, path.encode("utf8")))
        return self._current[1]

    def close(self) -> None:
        self._current = None
        self.file.close()

    def _copy_stored(self, src: h5py.Dataset, dst: h5py.Dataset) -> None:
        """Copy a dataset of space-padded or NUL-terminated strings byte for byte, read and
        written in the file's own type: HDF5's conversions to and from NUL padding are
        not inverses (a 1-byte NUL-terminated string, netCDF's char, written from "x"
        becomes "")."""
        tid = src.id.get_type()
        data = np.empty(src.shape, dtype=src.dtype)
        src.id.read(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=tid)
        dst.id.write(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=tid)
        self.copied.add(dst.name)

    def _copy_attrs(self, src: h5py.HLObject, dst: h5py.HLObject, member: int = 0,
                    keep: set[str] | None = None) -> None:
        """Copy attributes with their exact HDF5 types, in the source's order (of
        ``src``, in the set's ``member``; only those in ``keep`` when given, and
        ``_FillValue`` then set by the caller).

        Dimension-scale bookkeeping is recreated by set_scale/attach_scale (``CLASS`` and
        ``NAME`` of a scale, every ``DIMENSION_LIST``/``REFERENCE_LIST``); object
        references (and region references) are remapped once every object exists.
        """
        is_scale = isinstance(src, h5py.Dataset) and h5py.h5ds.is_scale(src.id)
        for name in src.attrs:
            if name in ("DIMENSION_LIST", "REFERENCE_LIST") or (is_scale and name in ("CLASS", "NAME")):
                continue
            if keep is not None and (name not in keep or name == "_FillValue"):
                continue
            try:  # as src.attrs[name], and its dtype
                value, dtype = attribute(src.id, name)
            except (OSError, TypeError, ValueError):
                continue  # unreadable: left out (--skip-unsupported), and said
            if holds_reference(dtype):  # made once every object exists (inside a compound too)
                self._deferred_refs.append((dst.name, name, dtype, value, member))
                continue
            if self._type_paths:  # an attribute of a committed type keeps it by reference
                tid = h5py.h5a.open(src.id, name.encode("utf8") if isinstance(name, str) else name).get_type()
                if tid.committed() and (path := self._type_paths.get((member, h5py.h5o.get_info(tid).addr))):
                    dtype = self.file[path]
            if isinstance(value, h5py.Empty):
                dst.attrs.create(name, value)
            else:
                dst.attrs.create(name, value, dtype=dtype)


@dataclass(frozen=True)
class _Piece:
    """One unit of data to write, produced by a worker and written in order."""

    path: str
    region: Region
    chunk: bytes | None = None  # pre-encoded chunk (write_direct_chunk)
    filter_mask: int = 0
    data: np.ndarray | None = None  # values for HDF5 to store (and filter) itself
    nbytes: int = 0


def _pieces(plan: ReorderPlan, infos: dict[str, ArrayInfo]) -> Iterator[tuple[str, Region]]:
    for path in plan.order:
        s = plan.storage[path]
        info = infos[path]
        if s.layout == "none":
            continue
        if s.layout == "chunked" and s.chunks:
            yield from ((path, r) for r in blocks_over(info.shape, s.chunks, info.stored_regions))
        else:
            yield path, tuple((0, n) for n in info.shape)


# the 1.10 format gives a chunked dataset of bounded maximum shape a fixed-array index,
# sized for its maximum at once: 10 elements declared growable to 10^11 made a file of
# 149 GiB (sparse) that nothing opened in time. Past this many chunks such a dataset
# keeps the version-1 B-tree, which grows with what is written
FIXED_INDEX_MAX_CHUNKS = 1 << 20


@dataclass(frozen=True)
class ShotUnit:
    """The groups and arrays of one shot (``shot`` None: those outside every shot), in
    the inventory's order."""

    shot: str | None
    groups: tuple[GroupInfo, ...]
    arrays: tuple[ArrayInfo, ...]
    top: str | None = None  # the shot's own group, when it is one of ``groups``


_PLACEHOLDER = "/layoutkit-placeholder-of-a-shot"
"""Where a shot's link points until its group is made: a soft link's target at least as
long as the address a group's link holds, so that the link made again fits where this one was."""


def shot_units(inventory: Inventory, template: str | None) -> list[ShotUnit]:
    """The objects below the root by the shot the ``template`` places them in: those
    outside every shot first (the groups that hold the shots among them), then each
    shot's, in the inventory's order (the order links are made in is the order netCDF
    lists groups in). No template: one unit of everything."""
    groups = [g for g in inventory.groups if g.path != "/"]
    if template is None:
        return [ShotUnit(None, tuple(groups), inventory.arrays)]
    _, prefix = compile_template(template)
    members: dict[str | None, tuple[list[GroupInfo], list[ArrayInfo]]] = {None: ([], [])}
    tops: dict[str | None, str] = {}
    for kind, items in ((0, groups), (1, inventory.arrays)):
        for item in items:
            m = prefix.match(item.path)
            shot = m.group("shot") if m else None
            members.setdefault(shot, ([], []))[kind].append(item)  # type: ignore[arg-type]
            if kind == 0 and m and m.group(0).rstrip("/") == item.path:
                tops[shot] = item.path
    return [ShotUnit(s, tuple(groups), tuple(arrays), tops.get(s)) for s, (groups, arrays) in members.items()]


class _Attacher:
    """Attaches the dimension scales as the source has them: in each scale's source
    REFERENCE_LIST order (so the lists read back as in the source; tools such as h5diff
    compare them entry by entry), then what the datasets' own DIMENSION_LISTs add.

    :meth:`attach` of a shot's unit attaches its scales there, when every attachment that
    touches the shot's objects is within the shot (then their order is the same as in one
    pass over the file); :meth:`attach` with no unit, every attachment not made yet, in
    that one pass's order."""

    def __init__(self, writer: PagedHDF5Writer, inventory: Inventory, files: Members, dedupe: dict[str, str],
                 units: list[ShotUnit]) -> None:
        self.writer, self.dedupe = writer, dedupe
        # (member, address) of each array: the addresses the inventory's walk found (asked
        # again only of an inventory made otherwise); low-level ids: a high-level Dataset
        # of each source array or entry (its creation property list copied out, its
        # filters listed) cost more than the rest of this together
        addr_to_path = {}
        for a in inventory.arrays:
            o = a.origin
            addr = (o.address if o.address is not None
                    else h5py.h5o.get_info(h5py.h5o.open(files(o.member).id, a.path.encode("utf8"))).addr)
            addr_to_path[o.member, addr] = a.path

        def addr_of(ref: Any, member: int) -> tuple[int, int] | None:
            oid = h5py.h5r.dereference(ref, files(member).id) if ref else None
            return None if oid is None else (member, h5py.h5o.get_info(oid).addr)

        # (dataset, scale, axis), in the one pass's order
        self.pairs: list[tuple[str, str, int]] = []
        for info in inventory.arrays:
            if not info.is_scale:
                continue
            member = info.origin.member
            sid = h5py.h5o.open(files(member).id, info.path.encode("utf8"))
            entries = attribute_value(sid, "REFERENCE_LIST") if h5py.h5a.exists(sid, b"REFERENCE_LIST") else None
            for entry in () if entries is None else entries:
                try:
                    address = addr_of(entry[0], member)
                    target = addr_to_path.get(address) if address is not None else None
                except (KeyError, ValueError, OSError):
                    target = None
                if target is not None:
                    self.pairs.append((target, info.path, int(entry[1])))
        for info in inventory.arrays:
            if not info.is_scale:
                for axis, scales in enumerate(() if info.null_space else info.dim_scales):
                    self.pairs.extend((info.path, scale, axis) for scale in scales)
        # what this writer attached, in the file it created: asking HDF5 (H5DSis_attached)
        # reads both reference lists and opens every object they name, on every call
        self.attached: set[tuple[str, str, int]] = set()
        self.opened: dict[str, Any] = {}  # the scale being attached (entries arrive scale by scale)
        # each shot's attachments, unless one of them reaches outside the shot
        shot_of = {a.path: unit.shot for unit in units for a in unit.arrays}
        self.of_shot: dict[str | None, list[tuple[str, str, int]]] = {}
        shared: set[str | None] = set()
        for pair in self.pairs:
            path, scale, _ = pair
            ends = {shot_of.get(path), shot_of.get(scale), shot_of.get(dedupe.get(scale, scale))}
            if len(ends) > 1:
                shared |= ends
            self.of_shot.setdefault(shot_of.get(path), []).append(pair)
        for shot in shared:
            self.of_shot.pop(shot, None)

    def attach(self, unit: ShotUnit | None = None) -> None:
        for path, scale, axis in self.pairs if unit is None else self.of_shot.get(unit.shot, ()):
            self._one(path, scale, axis)
        self.opened.clear()

    def _one(self, path: str, scale: str, axis: int) -> None:
        kept = self.dedupe.get(scale, scale)
        written = self.writer.datasets
        if path in self.dedupe or path not in written or kept not in written or (path, kept, axis) in self.attached:
            return
        if kept not in self.opened:
            self.opened.clear()
            self.opened[kept] = self.writer.file[kept].id
        h5py.h5ds.attach_scale(self.writer.file[path].id, self.opened[kept], axis)
        self.attached.add((path, kept, axis))


def _fixed_index_too_large(maxshape: Any, chunks: tuple[int, ...] | None, shape: tuple[int, ...]) -> bool:
    if not maxshape or not chunks or None in maxshape:
        return False  # an unlimited axis: an extensible array or a B-tree, grown as written
    return chunk_count(tuple(maxshape), chunks) > max(FIXED_INDEX_MAX_CHUNKS, 4 * chunk_count(shape, chunks))


@dataclass(frozen=True)
class PieceJob:
    reader: RawReader | SetReader
    plan: ReorderPlan
    infos: dict[str, ArrayInfo]
    encoders: dict[str, ChunkEncoder]


def make_piece(job: PieceJob, item: tuple[str, Region]) -> _Piece:
    """Read (and encode, where the target allows) one chunk or dataset, for the writer."""
    reader, plan, infos, encoders = job.reader, job.plan, job.infos, job.encoders
    path, region = item
    s = plan.storage[path]
    info = infos[path]
    nbytes = region_size(region) * info.dtype.itemsize if region else info.dtype.itemsize
    if s.layout == "chunked" and not reader.allocated(path, region):
        return _Piece(path, region, nbytes=nbytes)  # never written in the source: leave it so
    if s.raw_copy:
        origin = tuple(a for a, _ in region)
        raw, mask = reader.read_raw_chunk(path, origin)
        return _Piece(path, region, chunk=raw, filter_mask=mask, nbytes=nbytes)
    data = reader.read(path, region)
    if s.direct and s.chunks:
        shape = tuple(b - a for a, b in region)
        block = np.ascontiguousarray(data)
        if shape != s.chunks:  # HDF5 stores edge chunks whole
            full = np.zeros(s.chunks, dtype=info.dtype)
            full[tuple(slice(0, n) for n in shape)] = block
            block = full
        return _Piece(path, region, chunk=encoders[path].encode(block.tobytes()), nbytes=nbytes)
    return _Piece(path, region, data=data, nbytes=nbytes)


def _largest_piece(plan: ReorderPlan, infos: dict[str, ArrayInfo]) -> int:
    """Bytes of the largest unit written at once: a chunk, or a whole unchunked dataset."""
    sizes = [
        math.prod(s.chunks) * infos[p].dtype.itemsize if s.chunks else infos[p].nbytes
        for p, s in plan.storage.items()
        if s.layout != "none"
    ]
    return max(sizes, default=1)


def begin(staged: Path, source: Path, inventory: Inventory, plan: ReorderPlan,
          attrs: dict[str, Any]) -> Work:
    options = plan.options
    if plan.skipped:  # --skip-unsupported: left out, and listed in the provenance
        inventory = without_arrays(inventory, {p for p, _ in plan.skipped})
        attrs = dict(attrs) | {PROVENANCE_ATTR: json.dumps(
            json.loads(attrs[PROVENANCE_ATTR]) | {"skipped": [{"path": p, "reason": r} for p, r in plan.skipped]})}
    infos = {a.path: a for a in inventory.arrays}
    writer = PagedHDF5Writer(staged, plan.page_size, inventory.userblock_size)
    reader: RawReader | SetReader | None = None

    def close() -> None:
        writer.close()
        if reader is not None:
            reader.close()

    try:
        with Members(source) as files:
            writer.create(inventory, files, plan.storage, plan.dedupe, attrs, plan.options.template)
        encoders = {
            p: ChunkEncoder(s.compressor, infos[p].dtype.itemsize) for p, s in plan.storage.items() if s.direct
        }
        reader = open_reader(source, infos)
    except BaseException:
        close()
        raise
    counts = {"raw_copied": 0}

    def sink(piece: _Piece) -> int:
        if piece.chunk is not None:
            writer.write_chunk(piece.path, tuple(a for a, _ in piece.region), piece.chunk, piece.filter_mask)
            counts["raw_copied"] += plan.storage[piece.path].raw_copy
        elif piece.data is not None:
            writer.write_region(piece.path, piece.region, piece.data)
        return piece.nbytes

    window = max(2, options.memory_limit // max(1, 4 * _largest_piece(plan, infos)))
    return Work(
        make_piece, PieceJob(reader, plan, infos, encoders), _pieces(plan, infos), sink=sink,
        window=min(window, 8 * options.workers), close=close,
        state={"counts": counts, "userblock": inventory.userblock_size,
               # the user block is the file's whose root group is kept (a set's first)
               "head": Members(source).members[next((g.member for g in inventory.groups if g.path == "/"), 0)]},
    )


def finish(work: Work, staged: Path, plan: ReorderPlan) -> None:
    work.close()  # HDF5 writes its last metadata on close
    userblock = work.state["userblock"]
    if userblock:
        with open(staged, "r+b") as fout:
            fout.write(read_head(work.state["head"], userblock))


def summarize(source: Path, dest: Destination, inventory: Inventory, plan: ReorderPlan, work: Work,
              seconds: float) -> ReorderSummary:
    return ReorderSummary(
        source=str(source), dest=str(dest), by=plan.options.by, arrays=len(plan.order),
        merged_scales=len(plan.dedupe), raw_copied=work.state["counts"]["raw_copied"], page_size=plan.page_size,
        logical_bytes=plan.nbytes, source_bytes=source.stat().st_size, dest_bytes=dest.size(), seconds=seconds,
        skipped=plan.skipped,
    )


__all__ = ["ChunkEncoder", "PagedHDF5Writer", "PieceJob", "begin", "filter_kwargs", "finish", "make_piece",
           "summarize"]
