"""Planning shared by the Zarr layouts (pure): which Zarr type, chunks, shards and codec
each source dataset gets, or why it cannot be carried. Imports numpy and the source
side's records, never zarr, numcodecs, h5py or a writer, as rechunker's planning
imports numpy alone: a plan is easy to test and to reason about, and ``--dry-run``
prints the very object the writers consume.

Each array is planned by :func:`plan_array` (chunks grown from the source's up to
``--chunk-size``, optionally sharded); ``--compressor source`` keeps the stored chunks
where the filter pipeline has a Zarr spelling (:mod:`layoutkit.hdf5.encoding`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from layoutkit.errors import InvalidOptionError, MissingFilterError, UnsupportedFeatureError
from layoutkit.formats import (
    ARRAY_MEMBERS_ATTR,
    ARRAY_TYPE_ATTR,
    ENUM_ATTR,
    LONG_DOUBLE_ATTR,
    NULL_SPACE_ATTR,
    REFERENCE_ATTR,
    REFERENCE_MEMBERS_ATTR,
    REGION_ATTR,
    REGION_MEMBERS_ATTR,
    SEQUENCE_ATTR,
    SEQUENCE_LENGTHS_ATTR,
    SEQUENCE_MEMBERS_ATTR,
    TEXT_MEMBERS_ATTR,
    TEXT_SEQUENCE_ATTR,
    element_dims,
    member_field,
    members_under,
    moved_sequence_lengths,
    sequence_length_field,
    stored_path,
)
from layoutkit.hdf5.encoding import SourceEncoding, source_encoding
from layoutkit.hdf5.filters import can_read_raw
from layoutkit.hdf5.model import (
    ArrayInfo,
    GroupInfo,
    Inventory,
    carried_nowhere,
    element_shape,
    long_double,
    measured_members,
    reference_members,
    region_members,
    sequence_members,
    sequence_type,
    text_elements,
    text_members,
    text_reference_members,
    text_sequences,
)
from layoutkit.options import ShardSpec, parse_compressor
from layoutkit.plan import ArrayPlan, CopyTask, plan_chunks, plan_shards
from layoutkit.zarr_options import ConvertOptions

# --compressor source, for an array whose stored chunks cannot be copied as they are:
# stored plainly when the source stores it plainly, else zstd (read by every Zarr reader)
SOURCE_FALLBACK = parse_compressor("zstd:3")


@dataclass(frozen=True)
class ConvertPlan:
    source: str
    dest: str
    options: ConvertOptions
    arrays: tuple[ArrayPlan, ...]
    skipped: tuple[tuple[str, str], ...]
    tasks: tuple[CopyTask, ...]
    task_bytes: int
    # --compressor source: the arrays decoded and re-encoded, and why
    reencoded: tuple[tuple[str, str], ...] = ()

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)


def target_dtype(info: ArrayInfo) -> np.dtype | type:
    """The dtype the Zarr array gets for a source dataset."""
    if (feature := carried_nowhere(info)) is not None:
        raise UnsupportedFeatureError(info.path, feature)
    if info.kind in ("string", "reference", "region-reference"):
        return str
    if text_elements(info.dtype):  # an array type of variable-length strings: its elements text, trailing axes
        return str
    if text_sequences(info.dtype):  # sequences of strings: each the JSON text of its strings
        return str
    if long_double(info.dtype):  # each value the text that reads back as it (LONG_DOUBLE_ATTR)
        return str
    if info.kind == "enum":
        return np.dtype(info.dtype.str)  # the base integer, without h5py's enum metadata
    if info.kind == "vlen":
        base = sequence_type(info.dtype)
        if base is None:
            raise UnsupportedFeatureError(info.path, "variable-length sequences of other than numbers, fixed-length "
                                                     "bytes or strings (vlen arrays)")
        return bytes  # each sequence its values' bytes (:data:`~layoutkit.formats.SEQUENCE_ATTR`)
    if info.kind == "other":
        raise UnsupportedFeatureError(info.path, f"the HDF5 type {info.dtype}")
    if info.dtype.subdtype is not None:  # found by the generated files of tests/test_fuzz.py
        base, shape = info.dtype.subdtype
        plain = base.kind in "biuf" and base.itemsize <= 8 or base.kind == "S" or _plain_compound(base)
        if base.names and not plain and _one_fill(info):  # a compound's elements: as the rules store the compound
            return _compound_dtype(info, base)
        if not plain or not _one_fill(info):
            raise UnsupportedFeatureError(
                info.path, f"the HDF5 array type ({base} x {'x'.join(map(str, shape))}; Zarr has no array element "
                           "type: elements of numbers, fixed-length bytes or compounds become trailing axes, of "
                           "other types they cannot)")
        # its elements as trailing axes (:func:`element_axes`)
        return np.dtype(base.str) if not base.names else base
    if info.dtype.names:
        return _compound_dtype(info, info.dtype)
    return np.dtype(info.dtype.str)


def _compound_dtype(info: ArrayInfo, dtype: np.dtype) -> np.dtype:
    """The stored type of a compound ``dtype`` (a dataset's, or an array type's element):
    its text members at their longest value's length (UTF-8), array members a field an
    element, sequence members their bytes and lengths; refused where a member is none of
    those and Zarr cannot hold it."""
    if info.text_widths is None and (measured := measured_members(dtype)):  # the walk could not read its values
        import h5py

        raise UnsupportedFeatureError(info.path, f"a compound type with variable-length members ({', '.join(measured)}) "
                                                 f"whose values HDF5 {h5py.version.hdf5_version} cannot read")
    widths = dict(info.text_widths or ())
    arrays, seqs = array_members(dtype), sequence_members(dtype)
    _check_members(info, dtype, widths, arrays, seqs)
    return _stored_compound(dtype, widths, arrays, seqs) if widths or arrays else dtype


def _stored_compound(dtype: np.dtype, widths: dict[str, int], arrays: dict[str, tuple[int, ...]],
                     seqs: dict[str, np.dtype], prefix: str = "") -> np.dtype:
    """A compound as the type rules store it: its text members (``widths``, by path) as
    the fixed-length bytes of their longest value, its array members (``arrays``, by
    path: nested ones too) a field an element, its sequence members (``seqs``, by path too)
    their bytes and lengths; a nested member holding none of those as it is."""
    fields: list[tuple[str, Any]] = []
    for n in dtype.names or ():
        path = prefix + n
        if path in seqs:  # its values' bytes at the longest's length, and how many values
            fields += [(n, np.dtype(f"S{widths[path]}")), (sequence_length_field(n, dtype.names or ()), np.dtype("<u8"))]
        elif path in arrays:
            element = np.dtype(f"S{widths[path]}") if path in widths else dtype[n].base
            fields.extend((member_field(n, index), element) for index in np.ndindex(*arrays[path]))
        elif dtype[n].names and any(k.startswith(path + "/") for k in (*widths, *arrays)):
            fields.append((n, _stored_compound(dtype[n], widths, arrays, seqs, path + "/")))
        else:
            fields.append((n, np.dtype(f"S{widths[path]}") if path in widths else dtype[n]))
    return np.dtype(fields)


def array_members(dtype: np.dtype, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """A compound's members of an array type of numbers, variable-length strings or
    references, by path (a nested member's ``n/v``), with their element shapes: each
    stored as a field per element (:data:`~layoutkit.formats.ARRAY_MEMBERS_ATTR`; a
    string one, or a reference's text, at its longest value's length)."""
    out, texts = {}, set(text_members(dtype, prefix))
    texts |= {prefix + r for r in text_reference_members(dtype)}  # references: their text
    for name in dtype.names or ():
        sub = dtype[name]
        if sub.names:
            out.update(array_members(sub, f"{prefix}{name}/"))
        elif sub.subdtype is not None and (sub.base.kind in "biuf" and sub.base.itemsize <= 8 or prefix + name in texts):
            out[prefix + name] = tuple(sub.shape)
    return out


def _check_members(info: ArrayInfo, dtype: np.dtype, text: dict[str, int] | None = None,
                   arrays: dict[str, tuple[int, ...]] | None = None, seqs: dict[str, np.dtype] | None = None) -> None:
    """A compound's members, nested ones included (zarr-python writes nested structured
    types): refused where one is an array or variable-length, but for the text members
    measured (``text``, by path: nested ones too), the array members of numbers or text
    (``arrays``, by path too) and the sequence members (``seqs``, by path too; measured,
    as :func:`_compound_dtype` makes sure)."""
    for name in dtype.names or ():
        sub = dtype[name]
        if text and name in text or arrays and name in arrays or seqs and name in seqs:
            continue
        if sub.names:
            _check_members(info, sub, members_under(text, name), members_under(arrays, name), members_under(seqs, name))
            continue
        if sub.hasobject:
            raise UnsupportedFeatureError(info.path, f"a compound type with a variable-length member {name!r}")
        if sub.subdtype is not None:  # zarr-python has no structured type with a subarray field
            raise UnsupportedFeatureError(info.path, f"a compound type with an array member {name!r}")


def _plain_compound(dtype: np.dtype) -> bool:
    """A compound of numbers and fixed-length bytes, nested or not, no member an array:
    what Zarr holds as a structured type as it is."""
    if not dtype.names:
        return False
    return all((dtype[n].names and _plain_compound(dtype[n])) or (not dtype[n].names and dtype[n].subdtype is None
               and dtype[n].kind in "biufS" and dtype[n].itemsize <= 8 + 8 * (dtype[n].kind in "cS"))
               for n in dtype.names)


def _one_fill(info: ArrayInfo) -> bool:
    """Whether an array type's fill value is one number (Zarr has one fill value an array)."""
    fill = np.asarray(info.fill_value) if info.fill_value is not None else None
    if fill is not None and fill.dtype.hasobject:  # a compound holding text: its elements compared member by member
        keys = [_fill_key(v, fill.dtype) for v in fill.reshape(-1)]
        return all(k == keys[0] for k in keys)
    return fill is None or fill.size == 0 or bool((fill == fill.reshape(-1)[0]).all())


def _fill_key(value: Any, dtype: np.dtype) -> Any:
    """A compound fill value's element as something to compare: its numbers' bytes, its
    text as text (unset, as h5py reads an array type's fill, ``None`` or ``0``: empty)."""
    if dtype.names:
        return tuple(_fill_key(value[n], dtype[n]) for n in dtype.names)
    if dtype.kind == "O":
        return "" if value is None or isinstance(value, int | np.integer) and value == 0 else str(value)
    return np.asarray(value, dtype).tobytes()


def element_axes(info: ArrayInfo) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """An HDF5 array type's element shape and the names of the trailing axes it becomes in
    Zarr (``<name>_element``, or ``<name>_element_<i>`` for several); empty for every
    other type. The arrays's attribute :data:`~layoutkit.formats.ARRAY_TYPE_ATTR` records
    how many of its last axes they are."""
    shape = element_shape(info.dtype)
    return shape, element_dims(info.path.rsplit("/", 1)[-1], len(shape))


def type_attrs(info: ArrayInfo, dtype: Any) -> dict[str, Any]:
    """The attributes by which the type rules (docs/formats/index.md) say how a dataset's
    type is stored, for an independent reader to decode it: an enum's mapping, a null
    dataspace, references, sequences and their value types, long doubles, an array
    type's element axes, and a compound's text, reference, sequence and array members
    (of the compound an array type's elements are, too). Empty for a type stored as it
    is. ``dtype``: :func:`target_dtype`'s answer. Planned into
    :attr:`~layoutkit.plan.ArrayPlan.type_attrs`, which the Zarr writer writes."""
    attrs: dict[str, Any] = {}
    if info.kind == "enum" and info.enum_mapping:
        attrs[ENUM_ATTR] = {k: int(v) for k, v in info.enum_mapping.items()}
    if info.null_space:
        attrs[NULL_SPACE_ATTR] = True
    if info.kind == "reference":
        attrs[REFERENCE_ATTR] = "object references, stored as the referenced paths"
    if info.kind == "region-reference":
        attrs[REGION_ATTR] = "region references, stored as their datasets' paths and selections (JSON)"
    compound = info.dtype.base
    if compound.names:
        attrs.update(_member_attrs(compound))
    if dtype is bytes:
        attrs[SEQUENCE_ATTR] = np.dtype(sequence_type(info.dtype)).str
    if dtype is str and text_sequences(info.dtype):  # (both stored as text)
        attrs[TEXT_SEQUENCE_ATTR] = "json"
    if dtype is str and long_double(info.dtype):
        attrs[LONG_DOUBLE_ATTR] = info.dtype.str
    if compound.names and (members := array_members(compound)):
        attrs[ARRAY_MEMBERS_ATTR] = {name: list(shape) for name, shape in members.items()}
    if element := element_shape(info.dtype):
        attrs[ARRAY_TYPE_ATTR] = len(element)
    return attrs


def _member_attrs(compound: np.dtype) -> dict[str, Any]:
    """A compound's text, reference, region and sequence members (:func:`type_attrs`)."""
    attrs: dict[str, Any] = {}
    if text := text_members(compound):
        attrs[TEXT_MEMBERS_ATTR] = text
    if refs := reference_members(compound):
        attrs[REFERENCE_MEMBERS_ATTR] = refs
    if regions := region_members(compound):
        attrs[REGION_MEMBERS_ATTR] = regions
    if seqs := sequence_members(compound):
        attrs[SEQUENCE_MEMBERS_ATTR] = {name: kind.str for name, kind in seqs.items()}
        if moved := moved_sequence_lengths(compound, seqs):  # a member holds the name its lengths' field would have
            attrs[SEQUENCE_LENGTHS_ATTR] = moved
    return attrs


def _check_filters(info: ArrayInfo) -> None:
    for f in info.filters:
        if not f.available:
            raise MissingFilterError(info.path, f.id, f.name)


def plan_array(info: ArrayInfo, options: ConvertOptions, block_limit: int) -> ArrayPlan:
    """Plan one array: raise :class:`UnsupportedFeatureError` when it cannot be carried."""
    if info.external and info.unmapped:  # else read through HDF5, from its files
        raise UnsupportedFeatureError(info.path, f"external raw storage ({info.unmapped})")
    if info.layout == "virtual" and info.unmapped:  # else read through HDF5, from the files it maps
        raise UnsupportedFeatureError(info.path, f"a virtual dataset ({info.unmapped})")
    if "\\" in info.path:  # zarr-python takes it for a path separator: planned at its stored path (with_stored_names)
        raise UnsupportedFeatureError(info.path, "a backslash in its name (Zarr stores cannot address it)")
    _check_filters(info)
    dtype = target_dtype(info)
    element, _ = element_axes(info)
    text = dtype is str or dtype is bytes  # variable-length: text, or a sequence's bytes
    itemsize = np.dtype(dtype).itemsize if not text else 16
    target = min(options.chunk_bytes, block_limit)
    shape = info.shape + element
    size = math.prod(shape) if shape else 1
    compressor, encoding = options.compressor, None
    if compressor.name == "source":
        found = source_encoding(info) if not element else reencode_reason(info)
        if isinstance(found, SourceEncoding) and size > 0:
            encoding = found
        else:
            compressor = SOURCE_FALLBACK if info.filters else parse_compressor("none")
    if encoding is not None:
        # the HDF5 chunk shape exactly, even past the array's end: the stored chunks are whole
        assert info.chunks is not None
        chunks = tuple(info.chunks)
    else:
        chunks = plan_chunks(shape, itemsize, info.chunks and info.chunks + element, options.chunks, target)
    shards = None
    if options.zarr_format == 3 and not text:
        spec = options.shards
        if spec.mode != "none":
            spec = ShardSpec(spec.mode, min(spec.target_bytes, block_limit))
        shards = plan_shards(shape, chunks, itemsize, spec)
    regions = info.stored_regions
    if regions is not None and element:
        regions = tuple((*r, *((0, n) for n in element)) for r in regions)
    return ArrayPlan(
        path=info.path,
        shape=shape,
        dtype=str(_unpadded(np.dtype(dtype))) if not text else "str" if dtype is str else "bytes",
        itemsize=itemsize,
        chunks=chunks,
        shards=shards,
        compressor=compressor,
        read_mode="none" if size == 0 else ("copy" if encoding else "raw" if can_read_raw(info) else "h5py"),
        nbytes=size * itemsize,
        source_encoding=encoding,
        regions=regions,
        type_attrs=type_attrs(info, dtype),
    )


def _unpadded(dtype: np.dtype) -> np.dtype:
    """A compound type as a Zarr store holds it, its members packed without the padding
    between them (PyTables' and pandas' tables; zarr-python keeps the fields alone)."""
    if not dtype.names:
        return dtype
    return np.dtype([(n, _unpadded(dtype[n])) for n in dtype.names])


def reencode_reason(info: ArrayInfo) -> str:
    """Why ``--compressor source`` decodes and re-encodes ``info`` instead of copying it."""
    if element_shape(info.dtype):
        return "holds an HDF5 array type (its elements become trailing axes)"
    found = source_encoding(info)
    return found if isinstance(found, str) else "has no stored chunks"


def with_stored_names(inventory: Inventory) -> Inventory:
    """The inventory as a Zarr store names its nodes (:func:`~layoutkit.formats.stored_path`):
    each group and array whose name holds a backslash at its stored path, its source path
    kept (``source_path``: the readers of the source open that), and the dimension scales
    attached to arrays and the dimensions named after them renamed with them; the same inventory when no name holds one.

    Raises
    ------
    UnsupportedFeatureError
        Two nodes that would be stored under one name (``a\\b`` beside a literal ``a%5Cb``).
    """
    if not any("\\" in p for p in inventory.node_paths()):
        return inventory
    taken: dict[str, str] = {}
    for path in inventory.node_paths():
        other = taken.setdefault(stored_path(path), path)
        if other != path:
            raise UnsupportedFeatureError(path, f"a name Zarr would store as {stored_path(path)!r}, as it stores {other!r}")

    def renamed(path: str) -> dict[str, Any]:
        return {"path": stored_path(path), "source_path": path} if stored_path(path) != path else {}

    groups = tuple(replace(g, **renamed(g.path)) for g in inventory.groups)
    arrays = tuple(replace(a, **renamed(a.path), dims=tuple(stored_path(d) for d in a.dims),
                           dim_scales=tuple(tuple(stored_path(s) for s in axis) for axis in a.dim_scales))
                   for a in inventory.arrays)
    return replace(inventory, groups=groups, arrays=arrays)


def renamed_nodes(inventory: Inventory) -> dict[str, str]:
    """Each node of an inventory :func:`with_stored_names` renamed: stored path -> source path."""
    nodes: list[ArrayInfo | GroupInfo] = [*inventory.groups, *inventory.arrays]
    return {n.path: n.source_path for n in nodes if n.source_path is not None}


def check_source_options(options: ConvertOptions) -> None:
    """``--compressor source`` copies the source's chunks, so it keeps their shape."""
    if options.compressor.name == "source" and options.chunks.mode == "shape":
        raise InvalidOptionError(
            "Expected --chunks source (or auto) with --compressor source, which copies the source's "
            f"chunks as they are. Got --chunks {','.join(map(str, options.chunks.shape or ()))}."
        )


def plan_arrays(
    arrays: list[ArrayInfo], options: ConvertOptions, budget: int
) -> tuple[list[ArrayPlan | None], list[tuple[str, str]]]:
    """Plan each array, or (with ``skip_unsupported``) leave it out and say why."""
    plans: list[ArrayPlan | None] = []
    skipped: list[tuple[str, str]] = []
    for info in arrays:
        try:
            plans.append(plan_array(info, options, budget))
        except (UnsupportedFeatureError, MissingFilterError) as exc:
            if not options.skip_unsupported:
                raise
            skipped.append((info.path, str(exc)))
            plans.append(None)
    return plans, skipped


def packable(info: ArrayInfo) -> bool:
    """Datasets of fixed-size numbers (or booleans; not long doubles) with at least one axis, stored
    where they are declared: a dataset declared far larger than it is written
    (:attr:`~layoutkit.hdf5.model.ArrayInfo.stored_regions`) is mirrored, which writes
    its stored chunks alone, where packing would write every element of it."""
    return (
        info.stored_regions is None
        and info.kind in ("numeric", "bool")
        and info.dtype.kind in "biufc"
        and not long_double(info.dtype)  # (stored as text: mirrored)
        and len(info.shape) >= 1
        and not info.null_space
        and not info.dim_only
    )


__all__ = ["SOURCE_FALLBACK", "ConvertPlan", "array_members", "check_source_options", "element_axes", "packable", "sequence_type", "plan_array", "plan_arrays", "renamed_nodes", "with_stored_names",
           "reencode_reason", "target_dtype"]
