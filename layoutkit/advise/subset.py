"""Sample files for ``advise``: part of a source, written as an HDF5 file of its own that
keeps the source's chunking, filters, fill values and stored bytes.

Objects are copied with HDF5's own object copy (``H5Ocopy``: stored chunks are copied
as they are, not decoded), then the dimension scales are attached again: an object copy
into another file drops the references in ``DIMENSION_LIST`` and ``REFERENCE_LIST``.

For a shot archive the part is a set of whole shots, spread evenly over the archive
(early and late shots alike), plus everything outside the shot groups; for any other
file it is every array cut to its first rows (the same rows along a shared dimension),
chunks copied as stored.
"""

from __future__ import annotations

import itertools
import math
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from layoutkit.errors import CorruptSourceError
from layoutkit.hdf5.files import external_values, first_line, open_h5
from layoutkit.hdf5.inventory import ArrayInfo, Inventory
from layoutkit.storage import SourceLike
from layoutkit.templates import compile_template, match_template, natural_key

SCALE_BOOKKEEPING = ("DIMENSION_LIST", "REFERENCE_LIST")


@dataclass(frozen=True)
class Part:
    """Which part of a source a sample holds.

    ``prefixes`` are groups copied whole (shot groups); ``arrays`` are datasets copied one
    by one; ``rows`` the arrays cut to their first rows (path -> rows kept). ``scale`` is
    the sample's size in the unit predictions extrapolate by (shots, or stored bytes
    when the source is not a shot archive).
    """

    prefixes: tuple[str, ...]
    arrays: tuple[str, ...]
    scale: float
    rows: tuple[tuple[str, int], ...] = ()


def shots_of(inventory: Inventory, template: str) -> dict[str, str]:
    """Shot name -> the shot's group path, in natural order ({} when the template matches
    nothing)."""
    _, prefix = compile_template(template)
    shots: dict[str, str] = {}
    for path in match_template([a.path for a in inventory.arrays], template):
        m = prefix.match(path)
        if m:
            shots.setdefault(m.group("shot"), path[: m.end()].rstrip("/"))
    return {name: shots[name] for name in sorted(shots, key=natural_key)}


def spread(items: Sequence[str], count: int) -> list[str]:
    """``count`` items spread evenly over ``items`` (first and last included)."""
    if count >= len(items):
        return list(items)
    if count == 1:
        return [items[len(items) // 2]]
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


def _outside(path: str, shot_groups: Iterable[str]) -> bool:
    return not any(path == g or path.startswith(g + "/") for g in shot_groups)


TYPICAL_DRAWS = 256
"""Draws :func:`typical_items` compares when the items cannot all be tried (every set of
K is tried when there are at most this many)."""


def read_sizes(inventory: Inventory, template: str) -> dict[str, dict[str, int]]:
    """Bytes a ``shot`` read of each shot, and a ``signal`` read of each signal, delivers
    from this source: each dataset the template matches, with the first dimension scale
    of each axis (its coordinate), as verify's patterns count what they read."""
    by_path = {a.path: a for a in inventory.arrays}
    sizes: dict[str, dict[str, int]] = {"shot": {}, "signal": {}}
    for path, (shot, signal) in match_template(list(by_path), template).items():
        a = by_path[path]
        n = a.nbytes + sum(by_path[axis[0]].nbytes for axis in a.dim_scales if axis and axis[0] in by_path)
        sizes["shot"][shot] = sizes["shot"].get(shot, 0) + n
        sizes["signal"][signal] = sizes["signal"].get(signal, 0) + n
    return sizes


def typical_items(names: Sequence[str], sizes: dict[str, int], k: int, seed: int, pattern: str) -> tuple[str, ...]:
    """K of ``names`` (shots or signals) whose mean size is closest to the mean of every
    item in ``sizes`` (the whole source's): what a read of K items costs on average, not
    what K items drawn at random happen to hold. Shots of the 40-shot sample range over
    2x in size, and K=2-3 random ones read 9-26% more bytes at full size than the ones
    advise had drawn from its sample, which predicted every shot-major layout's shot read
    too fast. Every set of K is tried when there are at most :data:`TYPICAL_DRAWS`, else
    that many random ones (seeded: the same arguments give the same items)."""
    names = [n for n in names if n in sizes]
    k = min(k, len(names))
    if not names or not k:
        return ()
    target = sum(sizes.values()) / len(sizes)
    if math.comb(len(names), k) <= TYPICAL_DRAWS:
        draws: Iterable[Sequence[str]] = itertools.combinations(names, k)
    else:
        rng = random.Random(f"{seed}:{pattern}:typical")
        draws = (rng.sample(names, k) for _ in range(TYPICAL_DRAWS))
    best = min(draws, key=lambda pick: abs(sum(sizes[n] for n in pick) / k - target))
    return tuple(best)


def shot_part(inventory: Inventory, shots: dict[str, str], chosen: Sequence[str]) -> Part:
    """Whole shots ``chosen`` and every array outside the shot groups."""
    groups = tuple(shots.values())
    outside = tuple(a.path for a in inventory.arrays if _outside(a.path, groups))
    return Part(tuple(shots[s] for s in chosen), outside, float(len(chosen)))


def array_part(inventory: Inventory, target_bytes: int) -> Part:
    """Every array, cut along its first axis to about ``target_bytes`` stored in all.

    Arrays that share their first dimension (a netCDF dimension, or a dimension scale)
    keep the same rows, so the sample's coordinates still fit its variables; a file
    within ``target_bytes`` is taken whole, and so is an array whose filters are not
    :data:`CUTTABLE_FILTERS`.
    """
    total = sum(a.storage_bytes for a in inventory.arrays)
    paths = tuple(a.path for a in inventory.arrays)
    if total <= target_bytes:
        return Part((), paths, float(max(1, total)))
    fraction = target_bytes / total
    longest: dict[str, int] = {}
    for a in inventory.arrays:
        if a.shape and not a.null_space:
            key = _first_dim(a)
            longest[key] = max(longest.get(key, 0), a.shape[0])
    rows, stored = {}, 0.0
    for a in inventory.arrays:
        if not a.shape or a.null_space or a.shape[0] <= 1 or not _cuttable(a):
            stored += a.storage_bytes
            continue
        kept = min(a.shape[0], max(1, math.ceil(fraction * longest[_first_dim(a)])))
        if kept < a.shape[0]:
            rows[a.path] = kept
        stored += a.storage_bytes * kept / a.shape[0]
    return Part((), paths, float(max(1.0, stored)), tuple(sorted(rows.items())))


# Filters whose creation leaves their parameters as given. Others (bitshuffle, blosc,
# szip...) rewrite them in a callback when a dataset is created, so a dataset created
# with the source's settings would not hold the source's; such arrays are copied whole.
CUTTABLE_FILTERS = frozenset({1, 2, 3})  # deflate, shuffle, fletcher32


def _cuttable(a: ArrayInfo) -> bool:
    return all(f.id in CUTTABLE_FILTERS for f in a.filters) and not a.external


def _first_dim(a: ArrayInfo) -> str:
    name = a.dims[0] if a.dims else ""
    return a.path if not name or name.startswith("phony_dim_") else f"dim:{name}"


def _copy_rows(theirs: h5py.Dataset, out: h5py.File, path: str, rows: int) -> None:
    """The dataset's first ``rows`` rows, with its creation properties: stored chunks
    copied as they are (an edge chunk is stored whole in HDF5 too), other layouts read
    and written."""
    parent, name = out[path.rsplit("/", 1)[0] or "/"], path.rsplit("/", 1)[-1]
    shape = (rows, *theirs.shape[1:])
    if theirs.chunks is not None:  # the source's limits: a chunk may not exceed a fixed dimension
        maxshape = tuple(h5py.h5s.UNLIMITED if m is None else m for m in (theirs.maxshape or theirs.shape))
    else:
        maxshape = shape
    space = h5py.h5s.create_simple(shape, maxshape)
    ours = h5py.h5d.create(parent.id, name.encode(), theirs.id.get_type(), space, dcpl=theirs.id.get_create_plist())
    if theirs.chunks is not None and theirs.dtype.kind != "O":
        def copy(info: Any) -> None:
            if info.chunk_offset[0] < rows:
                mask, data = theirs.id.read_direct_chunk(info.chunk_offset)
                ours.write_direct_chunk(info.chunk_offset, data, filter_mask=mask)

        theirs.id.chunk_iter(copy)
    else:
        out[path][...] = theirs[:rows]
    _copy_attrs(theirs, out[path])


def _copy_attrs(src: h5py.HLObject, dst: h5py.HLObject) -> None:
    for name in src.attrs:
        if name in SCALE_BOOKKEEPING:
            continue
        dtype = src.attrs.get_id(name).dtype
        dst.attrs.create(name, src.attrs[name], dtype=dtype)


def _ensure_group(src: h5py.File, out: h5py.File, path: str) -> None:
    parts = [p for p in path.strip("/").split("/") if p]
    current = ""
    for part in parts:
        current += "/" + part
        if current not in out:
            group = out.create_group(current)
            _copy_attrs(src[current], group)


def _recreate(theirs: h5py.Dataset, out: h5py.File, path: str) -> None:
    """Write a dataset again with its creation properties, type, values and attributes."""
    if path in out:
        del out[path]
    parent, name = out[path.rsplit("/", 1)[0] or "/"], path.rsplit("/", 1)[-1]
    h5py.h5d.create(parent.id, name.encode(), theirs.id.get_type(), theirs.id.get_space(),
                    dcpl=theirs.id.get_create_plist())
    if theirs.shape is not None and theirs.size:
        out[path][...] = theirs[()]
    _copy_attrs(theirs, out[path])


def _internal(src: h5py.File, out: h5py.File, path: str) -> None:
    """Write a dataset with external raw storage as an ordinary one, its values read from
    its files (:func:`~layoutkit.hdf5.files.external_values`), with its fill value and attributes."""
    theirs = src[path]
    with external_values(src, path) as ds:
        values = ds[()]
    out.create_dataset(path, data=values, dtype=theirs.dtype, fillvalue=theirs.fillvalue)
    _copy_attrs(theirs, out[path])


def _groups_of(out: h5py.File) -> list[str]:
    found: list[str] = []
    out.visititems(lambda name, obj: found.append("/" + name) if isinstance(obj, h5py.Group) else None)
    return found


def _mapped(src: h5py.File, out: h5py.File, values: np.ndarray) -> np.ndarray:
    mapped = np.empty(values.shape, dtype=h5py.ref_dtype)
    for index, ref in np.ndenumerate(values):
        name = src[ref].name if ref else None
        mapped[index] = out[name].ref if name is not None and name in out else h5py.Reference()
    return mapped


def _remap_references(src: h5py.File, out: h5py.File, path: str) -> None:
    """Point object references (in attributes, or a dataset's values) at the sample's
    objects: an object copy into another file leaves them null."""
    theirs, ours = src[path], out[path]
    for name in list(theirs.attrs):
        if name in SCALE_BOOKKEEPING or h5py.check_dtype(ref=theirs.attrs.get_id(name).dtype) is not h5py.Reference:
            continue
        values = np.asarray(theirs.attrs[name])
        ours.attrs.create(name, _mapped(src, out, values).reshape(values.shape), dtype=h5py.ref_dtype)
    if isinstance(theirs, h5py.Dataset) and h5py.check_dtype(ref=theirs.dtype) is h5py.Reference:
        ours[...] = _mapped(src, out, np.asarray(theirs[()]))


def write_part(source: SourceLike, inventory: Inventory, part: Part, destination: str | os.PathLike) -> Path:
    """Write ``part`` of ``source`` to the new HDF5 file ``destination``.

    The root's attributes, the groups on the way and every copied object keep their
    attributes; stored chunks are copied without decoding; every dimension scale that
    was attached in the source is attached again when both ends are in the sample.
    The file has the oldest object format that holds it (attributes over 64 KiB need
    HDF5 1.8's).
    """
    destination = Path(destination)
    try:
        _write_part(source, inventory, part, destination, "earliest")
    except OSError as exc:
        if "message is too large" not in str(exc) or isinstance(exc, CorruptSourceError):
            raise
        _write_part(source, inventory, part, destination, "v108")
    return destination


def _write_part(source: SourceLike, inventory: Inventory, part: Part, destination: Path, low: str) -> None:
    def inside(path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in part.prefixes)

    kept = [a for a in inventory.arrays if a.path in part.arrays or inside(a.path)]
    cut = dict(part.rows)
    with open_h5(source) as src, h5py.File(destination, "w", libver=(low, "latest")) as out:
        _copy_attrs(src, out)
        for g in inventory.groups:
            if inside(g.path):
                _ensure_group(src, out, g.path)
        for a in kept:
            parent, name = a.path.rsplit("/", 1)
            _ensure_group(src, out, parent or "/")
            try:
                if a.path in cut:
                    _copy_rows(src[a.path], out, a.path, cut[a.path])
                elif a.dtype.kind == "O":  # H5Ocopy mishandles variable-length data and fill values
                    _recreate(src[a.path], out, a.path)
                elif a.external:  # H5Ocopy keeps the names of its files, which are not beside the sample
                    _internal(src, out, a.path)
                else:
                    src.copy(src[a.path], out[parent or "/"], name=name)
            except (OSError, RuntimeError) as exc:
                raise CorruptSourceError(
                    f"Dataset {a.path!r} of {str(source)!r} cannot be read for the sample ({first_line(exc)})."
                ) from None
            for bookkeeping in SCALE_BOOKKEEPING:
                if bookkeeping in out[a.path].attrs:
                    del out[a.path].attrs[bookkeeping]
        for link in inventory.links:
            if not inside(link.path) or link.path in out:
                continue
            _ensure_group(src, out, link.path.rsplit("/", 1)[0] or "/")
            if link.kind == "soft":
                out[link.path] = h5py.SoftLink(link.target)
            elif link.kind == "external":
                out[link.path] = h5py.ExternalLink(link.target_file or "", link.target)
            elif link.target in out:
                out[link.path] = out[link.target]
        copied = {a.path for a in kept}
        for path in ["/", *_groups_of(out), *sorted(copied)]:
            _remap_references(src, out, path)
        for a in kept:
            for axis, scales in enumerate(a.dim_scales):
                for scale in scales:
                    if scale in copied:
                        out[a.path].dims[axis].attach_scale(out[scale])


__all__ = ["TYPICAL_DRAWS", "Part", "array_part", "read_sizes", "shot_part", "shots_of", "spread", "typical_items",
           "write_part"]
