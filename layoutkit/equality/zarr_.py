"""Equality of a Zarr variant with its HDF5 source: the comparisons every Zarr layout's comparator uses.

:func:`compare_zarr` walks the source inventory and checks, for every array, that the
store has it at the same path with the same shape, an equivalent dtype, the same fill
value, the same attributes and dimension names, and the same values (NaN-aware,
bit-exact for integers), streamed one write block at a time so memory stays bounded.
It returns a list of :class:`Mismatch`; an empty list means equal.

The comparators are written from what the formats document, not from the writers'
code: zarr's metadata, xarray's conventions (``_FillValue`` as base64 of a double in v3
attributes, ``dimension_names`` / ``_ARRAY_DIMENSIONS``) and the type rules (``docs/formats/index.md``) for
attributes and types. Nothing here imports :mod:`layoutkit.layouts` or
:mod:`layoutkit.writers`, so an encoding bug in a writer cannot hide from ``verify``.

:func:`compare_packed` compares a store of a packing layout (signal-major, shot-packed)
through its reader, :class:`~layoutkit.readers.packed.PackedArchive`: every packed
dataset read back at its source path, the mirrored rest as :func:`compare_zarr` does.
A layout's comparator (``layouts/<layout>/compare.py``) composes these.
"""

from __future__ import annotations

import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import h5py
import numpy as np
import zarr
from zarr.core.metadata import ArrayV3Metadata

from layoutkit.equality.expected import ReferenceReader, proof_blocks
from layoutkit.formats import (
    ARRAY_MEMBERS_ATTR,
    ARRAY_TYPE_ATTR,
    DIMENSIONS_ATTR,
    LAYOUT_ATTR,
    LONG_DOUBLE_ATTR,
    NODES_ATTR,
    NON_FINITE,
    PROVENANCE_ATTR,
    REFERENCE_MEMBERS_ATTR,
    REGION_MEMBERS_ATTR,
    RENAMED_KEY,
    SEQUENCE_ATTR,
    SEQUENCE_LENGTHS_ATTR,
    SEQUENCE_MEMBERS_ATTR,
    SIDECAR,
    TEXT_MEMBERS_ATTR,
    TEXT_SEQUENCE_ATTR,
    TYPE_RULE_ATTRS,
    element_dims,
    joined_members,
    joined_references,
    joined_sequences,
    long_double_text,
    long_doubles,
    member_field,
    moved_sequence_lengths,
    sequence_length_field,
    sequences,
    stored_path,
    text_sequences,
)
from layoutkit.hdf5.combined import walk_sources
from layoutkit.hdf5.files import first_line
from layoutkit.hdf5.inventory import ArrayInfo, Inventory
from layoutkit.hdf5.model import (
    element_shape,
    long_double,
    member_values,
    reference_members,
    region_members,
    text_members,
    text_reference_members,
)
from layoutkit.hdf5.values import Mismatch, as_py, decode_fill, equal_values, expected_dtype, same_attr, same_dtype
from layoutkit.plan import iter_blocks
from layoutkit.readers.base import plain_attrs, scan_grid
from layoutkit.storage import AnySource


def compare_zarr(
    source: AnySource,
    store: str | Path | Any,
    inventory: Inventory | None = None,
    skipped: frozenset[str] = frozenset(),
    workers: int = 2,
    name: str | None = None,
    index_attrs: frozenset[str] = frozenset(),
    names: bool = True,
) -> list[Mismatch]:
    """Compare a Zarr store that mirrors an HDF5 source (a shot-major store, or the
    mirrored part of another layout's) with that source.

    Parameters
    ----------
    source
        The HDF5 file.
    store
        The Zarr store: a folder, or a zarr store object (e.g. ``ObjectStore`` over a bucket).
    skipped
        Paths left out on purpose (``--skip-unsupported``); not reported as missing.
    workers
        Arrays compared at the same time.
    index_attrs
        Attributes a layout adds to groups as its index (not source attributes).
    names
        Whether to check the record of the nodes stored under other names
        (:func:`compare_renamed`); False when ``inventory`` is a part of the source's.

    Returns
    -------
    list of Mismatch
        Empty when the store is faithful.
    """
    inventory = inventory or walk_sources(source)
    name = name or str(store)
    # the arrays' own metadata is the truth; consolidated metadata is only a cache of it
    root = zarr.open_group(store, mode="r", use_consolidated=False)
    zfmt = root.metadata.zarr_format
    found: list[Mismatch] = []

    def miss(path: str, what: str, detail: str) -> None:
        found.append(Mismatch(name, path, what, detail))

    def node(path: str, kind: type) -> Any:
        """The store's node at ``path`` if it is of ``kind``, else report it and None."""
        what = "group" if kind is zarr.Group else "array"
        try:
            found_node = root if path == "/" else root[stored_path(path).lstrip("/")]
        except KeyError:
            miss(path, "missing", f"{what} not in the store")
            return None
        if not isinstance(found_node, kind):
            miss(path, "missing", f"the store has something else than a {what} there")
            return None
        return found_node

    for g in inventory.groups:
        if (zg := node(g.path, zarr.Group)) is not None:
            compare_attrs(g.path, *without_provenance(g.path, dict(g.attrs), dict(zg.attrs)), miss,
                          TYPE_RULE_ATTRS | index_attrs)

    _compare_datatypes(inventory, root, miss)
    arrays = [a for a in inventory.arrays if not a.dim_only and a.path not in skipped]
    if names:
        compare_renamed(inventory, _sidecar(root), skipped, miss)

    def one(info: ArrayInfo) -> list[Mismatch]:
        own: list[Mismatch] = []
        try:
            z = root[stored_path(info.path).lstrip("/")]
        except KeyError:
            return [Mismatch(name, info.path, "missing", "array not in the store")]
        if not isinstance(z, zarr.Array):
            return [Mismatch(name, info.path, "missing", "the store has something else than an array there")]
        try:
            compare_array(info, z, zfmt, reader, lambda p, w, d: own.append(Mismatch(name, p, w, d)))
        except (OSError, ValueError, RuntimeError, zlib.error) as exc:  # a chunk that does not decode
            own.append(Mismatch(name, info.path, "values", f"cannot be read: {first_line(exc)}"))
        return own

    # arrays are compared in parallel: zarr decodes outside the GIL, HDF5 reads the
    # source (in worker processes when there is much of it); each array is streamed one
    # write block at a time
    with ReferenceReader(source, {a.path: a for a in arrays}) as reader, ThreadPoolExecutor(max(1, workers)) as pool:
        for own in pool.map(one, arrays):
            found.extend(own)
    return found


def _array_members(dtype: np.dtype, prefix: str = "") -> dict[str, list[int]]:
    """A compound's array members and their element shapes, by path (a nested member's ``n/v``)."""
    out: dict[str, list[int]] = {}
    for n in dtype.names or ():
        if dtype[n].names:
            out.update(_array_members(dtype[n], f"{prefix}{n}/"))
        elif dtype[n].subdtype is not None:
            out[prefix + n] = list(dtype[n].shape)
    return out


def _of_strings(dtype: np.dtype) -> bool:
    """Whether a variable-length type's sequences are of variable-length strings, as h5py reports the type."""
    base = h5py.check_vlen_dtype(dtype)
    info = h5py.check_string_dtype(base) if isinstance(base, np.dtype) else None
    return info is not None and info.length is None


def _sequence_members(dtype: np.dtype, prefix: str = "") -> dict[str, str]:
    """A compound's members that are variable-length sequences of numbers or fixed-length
    bytes, by path (``n/v`` in a nested member), with their values' type strings, as h5py
    reports the type."""
    out = {}
    for name in dtype.names or ():
        if dtype[name].names:
            out.update(_sequence_members(dtype[name], f"{prefix}{name}/"))
            continue
        base = h5py.check_vlen_dtype(dtype[name])
        if base is not None and base not in (str, bytes):
            out[prefix + name] = np.dtype(base).str
    return out


def _stored_compound(want: np.dtype, text: list[str], members: dict[str, list[int]], got: np.dtype,
                     seqs: dict[str, str] | None = None) -> np.dtype:
    """The compound ``want`` as the type rules store it: each text member the
    fixed-length bytes the store holds there (``S<n>``: any length, the values show a
    short one; held otherwise, it stays the source's and the type compares unequal), each
    array member a field per element (``v[0]``, ...), each sequence member (``seqs``) its
    bytes so and a ``uint64`` field of lengths beside them."""
    fields: list[tuple[str, Any]] = []
    for name in want.names or ():
        if seqs and name in seqs:
            held = got[name] if got.names and name in got.names else None
            fields += [(name, held if held is not None and held.kind == "S" else want[name]),
                       (sequence_length_field(name, want.names or ()), np.dtype("<u8"))]
            continue
        if name in members:  # (a text member's elements: the bytes the store holds, as below)
            for index in np.ndindex(*members[name]):
                held = got[member_field(name, index)] if got.names and member_field(name, index) in got.names else None
                fields.append((member_field(name, index), held if name in text and held is not None and held.kind == "S"
                               else want[name].base))
            continue
        held = got[name] if got.names and name in got.names else None
        inner = [t[len(name) + 1:] for t in text if t.startswith(name + "/")]  # a nested member's, by path
        inner_m = {m[len(name) + 1:]: s for m, s in members.items() if m.startswith(name + "/")}
        inner_s = {m[len(name) + 1:]: s for m, s in (seqs or {}).items() if m.startswith(name + "/")}
        if (inner or inner_m or inner_s) and held is not None and held.names and want[name].names:
            fields.append((name, _stored_compound(want[name], inner, inner_m, held, inner_s)))
            continue
        fields.append((name, held if name in text and held is not None and held.kind == "S" else want[name]))
    return np.dtype(fields)


def _compare_datatypes(inventory: Inventory, root: zarr.Group, miss: Any) -> None:
    """Each committed datatype of the source, recorded in the store's ``layoutkit.json``
    (Zarr has no named types) with its type and attributes."""
    if not inventory.datatypes:
        return
    recorded = _sidecar(root).get("datatypes", {})
    for t in inventory.datatypes:
        got = recorded.get(t.path)
        if not isinstance(got, dict):
            miss(t.path, "missing", "committed datatype not recorded in layoutkit.json")
            continue
        if got.get("type") != str(t.dtype):
            miss(t.path, "dtype", f"recorded as {got.get('type')!r}, expected {str(t.dtype)!r}")
        compare_attrs(t.path, dict(t.attrs), dict(got.get("attributes") or {}), miss, frozenset())


def compare_renamed(inventory: Inventory, sidecar: dict[str, Any], skipped: frozenset[str], miss: Any) -> None:
    """Each node whose name the store cannot hold as it is (a backslash) must be at its
    stored path (:func:`~layoutkit.formats.stored_path`, checked where it is read) and
    recorded there in ``layoutkit.json`` under its source path; no other node may be."""
    recorded = sidecar.get(RENAMED_KEY) or {}
    every = {stored_path(p): p for p in inventory.node_paths() if stored_path(p) != p}
    for stored, path in every.items():
        if path not in skipped and recorded.get(stored) != path:
            miss(path, "name", f"stored as {stored!r}, which layoutkit.json records as {recorded.get(stored)!r}")
    for stored in recorded.keys() - every.keys():
        miss(str(recorded[stored]), "name", f"layoutkit.json records {stored!r} for a node the source has not")


def _sidecar(root: zarr.Group) -> dict[str, Any]:
    """The store's ``layoutkit.json``: in an Icechunk repository, inside the root's
    provenance attribute; else the document beside the root."""
    import json

    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    from layoutkit.storage.icechunk_repo import sidecar_in

    found = sidecar_in(root.attrs.get(PROVENANCE_ATTR))
    if found:
        return found
    raw = sync(root.store.get(SIDECAR, prototype=default_buffer_prototype()))
    try:
        doc = json.loads(raw.to_bytes()) if raw is not None else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _dimension_names(z: zarr.Array) -> tuple[str | None, ...]:
    """An array's dimension names: v3 metadata's, or v2's xarray attribute."""
    if isinstance(z.metadata, ArrayV3Metadata):
        return tuple(z.metadata.dimension_names or ())
    return tuple(cast(list[str], z.attrs.get(DIMENSIONS_ATTR, [])))


def without_provenance(path: str, expected: dict[str, Any], got: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Leave out the one root attribute layoutkit adds to every variant (the recipe it was
    written with), on both sides; every other attribute is compared."""
    if path != "/":
        return expected, got
    return ({k: v for k, v in expected.items() if k != PROVENANCE_ATTR},
            {k: v for k, v in got.items() if k != PROVENANCE_ATTR})


def compare_attrs(path: str, expected: dict[str, Any], got: dict[str, Any], miss: Any,
                  ignore: frozenset[str] = TYPE_RULE_ATTRS) -> None:
    """Report each attribute of ``expected`` (the source's) that ``got`` (the store's)
    lacks or holds otherwise, and each of ``got`` the source lacks but for ``ignore``."""
    for key, value in expected.items():
        if key not in got:
            miss(path, "attribute", f"{key!r} missing")
        elif not same_attr(value, got[key]):
            miss(path, "attribute", f"{key!r} is {got[key]!r}, expected {value!r}")
    for key in got:
        if key not in expected and key not in ignore:
            miss(path, "attribute", f"{key!r} is not in the source")


def _stored_members(info: ArrayInfo, z: zarr.Array, want: Any, miss: Any) -> Any:
    """The type a compound with text, array, sequence or reference members is stored as
    (the type rules: text and paths as fixed-length UTF-8, arrays a field an element,
    sequences their bytes and lengths), its attributes naming those members checked (an
    array type of such compounds: its elements so); ``want`` for any other type."""
    path, compound = info.path, info.dtype.base
    text, members, seqs = text_members(compound), _array_members(compound), _sequence_members(compound)
    refs, regions = reference_members(compound), region_members(compound)
    if not (text or members or seqs or refs or regions):
        return want
    for attr, expected in ((REFERENCE_MEMBERS_ATTR, refs), (REGION_MEMBERS_ATTR, regions), (SEQUENCE_MEMBERS_ATTR, seqs),
                           (TEXT_MEMBERS_ATTR, text),
                           (ARRAY_MEMBERS_ATTR, members), (SEQUENCE_LENGTHS_ATTR, moved_sequence_lengths(compound, seqs))):
        if expected and z.attrs.get(attr) != expected:
            miss(path, "attribute", f"{attr!r} is {z.attrs.get(attr)!r}, expected {expected}")
    return _stored_compound(np.dtype(want), text + refs + regions, members, np.dtype(z.dtype), seqs)


def compare_array(info: ArrayInfo, z: zarr.Array, zfmt: int, reader: ReferenceReader, miss: Any) -> None:
    path = info.path
    # an HDF5 array type: its elements are the last axes, named <name>_element[_i], their
    # rank in the hdf5_array_type attribute (the format pages' type rules)
    element = element_shape(info.dtype)
    if tuple(z.shape) != info.shape + element:
        miss(path, "shape", f"{tuple(z.shape)}, expected {info.shape + element}")
        return
    if element and z.attrs.get(ARRAY_TYPE_ATTR) != len(element):
        miss(path, "attribute", f"{ARRAY_TYPE_ATTR!r} is {z.attrs.get(ARRAY_TYPE_ATTR)!r}, expected {len(element)}")
    want = _stored_members(info, z, expected_dtype(info), miss)
    if info.kind == "vlen" and _of_strings(info.dtype):  # the type rules: each sequence the JSON of its strings
        if z.attrs.get(TEXT_SEQUENCE_ATTR) != "json":
            miss(path, "attribute", f"{TEXT_SEQUENCE_ATTR!r} is {z.attrs.get(TEXT_SEQUENCE_ATTR)!r}, expected 'json'")
            return
    elif info.kind == "vlen":  # the type rules: each sequence its values' bytes, their type in an attribute
        if z.attrs.get(SEQUENCE_ATTR) != np.dtype(h5py.check_vlen_dtype(info.dtype)).str:
            miss(path, "attribute", f"{SEQUENCE_ATTR!r} is {z.attrs.get(SEQUENCE_ATTR)!r}, expected "
                                    f"{np.dtype(h5py.check_vlen_dtype(info.dtype)).str!r}")
            return
    elif want is str:
        if z.dtype.kind not in "OUT" and "String" not in type(z.dtype).__name__:
            miss(path, "dtype", f"{z.dtype}, expected variable-length strings")
        if info.dtype.kind in "fc" and z.attrs.get(LONG_DOUBLE_ATTR) != info.dtype.str:  # long doubles as text
            miss(path, "attribute", f"{LONG_DOUBLE_ATTR!r} is {z.attrs.get(LONG_DOUBLE_ATTR)!r}, expected {info.dtype.str!r}")
            return
    elif not same_dtype(np.dtype(want), np.dtype(z.dtype)):
        miss(path, "dtype", f"{z.dtype}, expected {np.dtype(want)}")
        return
    # dimension names
    # (a name with a backslash as the store names it: the type rules, "Names")
    want_dims = tuple(stored_path(d) for d in info.dims) + element_dims(stored_path(path).rsplit("/", 1)[-1], len(element))
    if (info.shape or element) and (dims := _dimension_names(z)) != want_dims:
        miss(path, "dims", f"{dims}, expected {want_dims}")
    # attributes
    expected = dict(info.attrs)
    got = dict(z.attrs)
    # _FillValue is stored the way xarray expects: base64 in v3 attributes, the
    # fill_value itself in v2; compare it as a number
    want_fv = info.attrs.get("_FillValue")
    expected.pop("_FillValue", None)
    got_fv = got.pop("_FillValue", None)
    if want_fv is not None and zfmt == 3:
        if got_fv is None:
            miss(path, "attribute", "'_FillValue' missing")
        else:
            got_fv = decode_fill(got_fv, np.dtype(z.dtype) if want is not str else np.dtype(object))
            if isinstance(want_fv, list) and len(want_fv) == 1:
                want_fv = want_fv[0]  # netCDF's 1-element array
            if not same_attr(as_py(want_fv), as_py(got_fv)):
                miss(path, "attribute", f"'_FillValue' is {got_fv!r}, expected {want_fv!r}")
    compare_attrs(path, expected, got, miss)
    _compare_fill(info, z, zfmt, want, miss)
    # values, one write block at a time
    _compare_values(info, z, element, reader, miss)


def _compare_fill(info: ArrayInfo, z: zarr.Array, zfmt: int, want: Any, miss: Any) -> None:
    path = info.path
    # fill value (v3 keeps HDF5's; v2 keeps it only where it is not netCDF's default); a
    # sequence's is the empty one
    if info.kind == "vlen":
        if z.fill_value not in (b"", "", None):
            miss(path, "fill_value", f"{z.fill_value!r}, expected the empty sequence")
    elif want is str and info.dtype.kind in "fc":  # a long double's: its text, in either format
        fv = np.asarray(info.fill_value if info.fill_value is not None else 0, dtype=info.dtype)
        if not equal_values(fv.reshape(1), long_doubles(np.asarray([z.fill_value], dtype=object), info.dtype.str)).all():
            miss(path, "fill_value", f"{z.fill_value!r}, expected {fv[()]!r}")
    elif zfmt == 3 and want is not str and info.fill_value is not None and not info.dtype.base.names:
        fv = np.asarray(info.fill_value).astype(z.dtype).reshape(-1)  # an array type's: each element's
        got_fill = np.broadcast_to(np.asarray(z.fill_value).astype(z.dtype).reshape(1), fv.shape)
        if not equal_values(fv, got_fill).all():
            miss(path, "fill_value", f"{z.fill_value!r}, expected {info.fill_value!r}")
    # a compound's fill value: HDF5's, in either format (xarray masks no compound); an
    # unset text member (None) is the empty string; an array type of compounds': each element's
    if (compound := info.dtype.base).names and info.fill_value is not None:
        want_c = np.asarray(info.fill_value).astype(compound).reshape(-1)
        members = _array_members(compound)
        for name in text_members(compound):  # (of an array member: each element; of a nested one: by path)
            *parents, leaf = name.split("/")
            owner = member_values(want_c, "/".join(parents)) if parents else want_c
            held = owner[leaf]  # (unset: None; in an array type's fill h5py gives 0)
            owner[leaf] = np.array([b"" if v is None or isinstance(v, int) else v.encode() if isinstance(v, str) else v
                                    for v in held.reshape(-1)], dtype=object).reshape(held.shape)
        seqs = _sequence_members(compound)
        for name in text_reference_members(compound):  # a fill's: unset, the empty text
            member_values(want_c, name)[...] = np.array([b""] + [None], dtype=object)[:-1]
        for name, kind in seqs.items():  # an unset sequence (None) is the empty one
            *parents, leaf = name.split("/")
            owner = member_values(want_c, "/".join(parents)) if parents else want_c
            owner[leaf] = np.array([np.zeros(0, kind) if v is None else v for v in owner[leaf]] + [None],
                                   dtype=object)[:-1]
        try:
            got_c = np.broadcast_to(np.asarray(z.fill_value, dtype=np.dtype(z.dtype)).reshape(1), want_c.shape).copy()
            got_c = joined_members(got_c, members) if members else got_c
            got_c = joined_sequences(got_c, seqs, moved_sequence_lengths(compound, seqs)) if seqs else got_c.astype(want_c.dtype)
        except (TypeError, ValueError):
            got_c = None
        if got_c is None or not equal_values(want_c, got_c).all():
            miss(path, "fill_value", f"{z.fill_value!r}, expected {info.fill_value!r}")


def _compare_values(info: ArrayInfo, z: zarr.Array, element: tuple[int, ...], reader: ReferenceReader,
                    miss: Any) -> None:
    path, compound = info.path, info.dtype.base  # (an array type of compounds: its elements')
    members, seqs = _array_members(compound), _sequence_members(compound)
    refs = text_reference_members(compound)
    block = (z.shards or z.chunks)[: len(info.shape)] if info.shape else ()  # the source's axes
    where = reader.stored_regions(path)
    blocks = proof_blocks(path, info.shape, block, where, None if where is None else zarr_stored_regions(z))
    for region, values in reader.read_each(path, blocks):
        sel = tuple(slice(a, b) for a, b in region) if region else ()
        expected_v = np.asarray(values)
        got_v = np.asarray(z[sel] if sel else z[...])
        if members:  # array members a field an element: joined again by the type rules
            got_v = joined_members(got_v, members)
        if seqs:  # sequence members their bytes and lengths: joined again so
            got_v = joined_sequences(got_v, seqs, moved_sequence_lengths(compound, seqs))
        if refs:  # reference members the paths' bytes: as text, as the source's are read
            got_v = joined_references(got_v, refs)
        if info.dtype.kind in "fc" and (kind := z.attrs.get(LONG_DOUBLE_ATTR)):  # long doubles their text
            got_v = long_doubles(got_v, str(kind))
        if info.kind == "vlen" and _of_strings(info.dtype):  # a sequence of strings its JSON text
            got_v = text_sequences(got_v)
        elif info.kind == "vlen":  # a sequence its values' bytes
            got_v = sequences(got_v, str(z.attrs[SEQUENCE_ATTR]))
        eq = equal_values(expected_v, got_v)
        if not eq.all():
            bad = np.argwhere(~eq)[0] if eq.ndim else ()
            index = tuple(int(i) + a for i, (a, _) in zip(bad, (*region, *((0, n) for n in element))))
            miss(path, "values", f"first difference at index {index}")
            return


def zarr_stored_regions(z: Any) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The regions of the chunks (the shards, when sharded) a Zarr array stores, from
    its store's listing: the grid's keys are not enumerated (zarr's
    ``nchunks_initialized`` does, and a grid of 10^8 chunks takes minutes)."""
    from zarr.core.chunk_key_encodings import V2ChunkKeyEncoding
    from zarr.core.sync import sync

    meta = z.metadata
    if meta.zarr_format == 3:
        encoding = meta.chunk_key_encoding
    else:
        encoding = V2ChunkKeyEncoding(separator=meta.dimension_separator or ".")
    prefix = f"{z.path}/" if z.path else ""

    async def keys() -> list[str]:
        return [k async for k in z.store.list_prefix(prefix)]

    block = z.shards or z.chunks
    found = []
    for key in sync(keys()):
        name = key[len(prefix):]
        if name in ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"):
            continue
        try:
            coords = encoding.decode_chunk_key(name)
        except (ValueError, TypeError):
            continue
        if len(coords) == len(block):
            found.append(tuple((i * b, min((i + 1) * b, n)) for i, b, n in zip(coords, block, z.shape)))
    return tuple(found)


def compare_packed(source: str | Path, store: Any, archive_class: Any, check_index: Any,
                   inventory: Inventory | None, skipped: frozenset[str], workers: int,
                   name: str | None, index_attrs: frozenset[str] = frozenset()) -> list[Mismatch]:
    """Compare a store of a packing layout with its source.

    Every packed dataset is read back at its source path through the layout's reader
    (``archive_class``, a :class:`~layoutkit.readers.packed.PackedArchive` opened on the
    arrays' own metadata, not the consolidated copy) and compared with the source: shape,
    dtype, fill value, attributes, dimension scales and values, one source chunk at a
    time; arrays and groups the layout mirrors are compared as :func:`compare_zarr` does.
    ``check_index(archive, source_paths, miss)`` checks the layout's index; ``index_attrs``
    are the attributes that index adds to groups.
    """
    from dataclasses import replace

    inventory = inventory or walk_sources(source)
    name = name or str(store)
    found: list[Mismatch] = []

    def miss(path: str, what: str, detail: str) -> None:
        found.append(Mismatch(name, path, what, detail))

    with warnings.catch_warnings():  # walking the hierarchy meets layoutkit.json
        warnings.simplefilter("ignore")
        where = Path(store) if isinstance(store, (str, Path)) else name  # a store in a bucket: its URL
        archive = archive_class(where, root=zarr.open_group(store, mode="r", use_consolidated=False))
    arrays = [a for a in inventory.arrays if not a.dim_only and a.path not in skipped]
    # groups without attributes that hold packed datasets are implied by the index (read
    # whole first: what is packed is what the index says, not a shot's own copy of it)
    implied = archive.virtual_tree()
    # (the layout's reader finds each at the path the store names it: stored_path)
    packed = [a for a in arrays if archive.locate(stored_path(a.path)) is not None]
    mirrored = [a for a in arrays if archive.locate(stored_path(a.path)) is None]
    groups = [g for g in inventory.groups if g.path != "/" and (g.attrs or stored_path(g.path) not in implied)]
    found += compare_zarr(source, store, replace(inventory, groups=tuple(groups), arrays=tuple(mirrored)),
                          skipped, workers, name, index_attrs, names=False)
    compare_renamed(inventory, _sidecar(archive.root), skipped, miss)
    root = next((g for g in inventory.groups if g.path == "/"), None)
    if root is not None:
        got = {k: v for k, v in archive.root.attrs.items() if k not in (LAYOUT_ATTR, NODES_ATTR)}
        compare_attrs("/", *without_provenance("/", dict(root.attrs), got), miss)

    with ReferenceReader(source, {a.path: a for a in packed}) as reader, ThreadPoolExecutor(max(1, workers)) as pool:
        for own in pool.map(lambda info: compare_packed_array(archive, reader, info, name), packed):
            found.extend(own)
    check_index(archive, {stored_path(p) for p in {a.path for a in arrays} | set(skipped)}, miss)
    return found


def compare_packed_array(archive: Any, reader: ReferenceReader, info: ArrayInfo, name: str) -> list[Mismatch]:
    """One packed dataset against the source: shape, dtype, fill value, attributes,
    dimension scales, and values one source chunk at a time (through the layout's reader)."""
    own: list[Mismatch] = []

    def report(path: str, what: str, detail: str) -> None:
        own.append(Mismatch(name, path, what, detail))

    at = stored_path(info.path)
    row = archive.locate(at)
    z = archive.zarr_array(row.data)
    shape = getattr(row, "shape", None) or (row.length, *z.shape[1:])  # shot-packed rows carry their shape
    if shape != info.shape:
        return [Mismatch(name, info.path, "shape", f"{shape}, expected {info.shape}")]
    dtype = np.dtype(getattr(row, "dtype", None) or z.dtype)  # shot-packed rows carry their dtype
    if not same_dtype(dtype, info.dtype):
        return [Mismatch(name, info.path, "dtype", f"{dtype}, expected {info.dtype}")]
    _check_packed_fill(archive, row, z, dtype, info, report)
    # the row's attributes as the layout's reader gives them (long doubles read back as
    # the store's record says); the source's so, by the source's own types
    compare_attrs(info.path, _typed(plain_attrs(dict(info.attrs), TYPE_RULE_ATTRS)),
                  _typed(plain_attrs(dict(row.attrs), TYPE_RULE_ATTRS)), report)
    shot = archive.shot_of(at)
    got_dims = [[archive.scale_source(shot, r) for r in axis] for axis in row.dims]
    want_dims = [[stored_path(s) for s in axis] for axis in info.dim_scales]
    if info.dim_scales and any(info.dim_scales) and got_dims != want_dims:
        report(info.path, "dims", f"dimension scales {got_dims}, expected {want_dims}")
    _check_packed_values(archive, reader, info, report)
    return own


def _typed(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes with their long doubles as their type and text, comparable as JSON is:
    text stored where a long double is expected compares unequal."""
    return {k: {np.dtype(v.dtype).str: long_double_text(v).tolist()}
            if isinstance(v, (np.ndarray, np.generic)) and long_double(v.dtype) else v for k, v in attrs.items()}


def _check_packed_values(archive: Any, reader: ReferenceReader, info: ArrayInfo, report: Any) -> None:
    grid = scan_grid(info.shape, info.dtype.itemsize, info.chunks)
    try:
        for region in iter_blocks(info.shape, grid):
            sel = tuple(slice(a, b) for a, b in region)
            eq = equal_values(np.asarray(reader.read(info.path, region)), archive.get(stored_path(info.path), sel))
            if not eq.all():
                bad = np.argwhere(~eq)[0]
                report(info.path, "values", f"first difference at index {tuple(int(i) + a for i, (a, _) in zip(bad, region))}")
                break
    except (OSError, ValueError, RuntimeError, zlib.error) as exc:  # a chunk that does not decode
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        report(info.path, "values", f"cannot be read: {first}")


def _check_packed_fill(archive: Any, row: Any, z: Any, dtype: np.dtype, info: ArrayInfo, report: Any) -> None:
    """A packed dataset's fill value: in its index row when the layout keeps it there (as
    JSON, NaN and infinities as strings), else the packed array's (Zarr v3)."""
    if hasattr(row, "fill_value"):
        parts = [NON_FINITE.get(v, v) if isinstance(v, str) else v
                 for v in (row.fill_value if isinstance(row.fill_value, list) else [row.fill_value])]
        got = None if parts == [None] else complex(*parts) if len(parts) == 2 else parts[0]
        want = None if info.fill_value is None else np.asarray(info.fill_value).astype(dtype).reshape(1)
        if (want is None) != (got is None) or (
                want is not None and not equal_values(want, np.asarray(got, dtype=dtype).reshape(1)).all()):
            report(info.path, "fill_value", f"{got!r}, expected {info.fill_value!r}")
    elif info.fill_value is not None and archive.root.metadata.zarr_format == 3:
        fv = np.asarray(info.fill_value).astype(z.dtype).reshape(1)
        if not equal_values(fv, np.asarray(z.fill_value).astype(z.dtype).reshape(1)).all():
            report(info.path, "fill_value", f"{z.fill_value!r}, expected {info.fill_value!r}")


__all__ = [
    "compare_array",
    "compare_attrs",
    "compare_packed",
    "compare_packed_array",
    "compare_zarr",
    "without_provenance",
]
