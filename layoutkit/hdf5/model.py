"""What a walk of an HDF5 source finds, as plain frozen dataclasses: every layout plans
from them without touching the file again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from layoutkit.formats import RULES


@dataclass(frozen=True)
class FilterInfo:
    """One stage of a dataset's HDF5 filter pipeline."""

    id: int
    name: str
    options: tuple[int, ...]
    available: bool


@dataclass(frozen=True)
class MappedBlock:
    """One mapping of an HDF5 virtual dataset whose source is a whole dataset of another
    file, placed as one block (a NeXus master file's frames): where it lies in the virtual
    dataset, and how the mapped dataset stores its bytes."""

    file: str  # the mapped file, found as HDF5 finds it (an absolute path)
    dataset: str  # the mapped dataset's path in it
    origin: tuple[int, ...]  # the block's corner in the virtual dataset
    shape: tuple[int, ...]  # the block's (and the mapped dataset's) shape
    layout: str  # the mapped dataset's storage: "contiguous", "chunked", "compact"...
    chunks: tuple[int, ...] | None
    filters: tuple[FilterInfo, ...]
    dtype: str  # the mapped dataset's type (numpy's spelling, byte order included)


class Unsupported(str):
    """A note of the walk (:attr:`Inventory.attr_notes`) for an object or an attribute
    no layout carries over: ``where`` names it ("Dataset '/a'", "Attribute 'r' of '/a'"),
    ``feature`` says why. Commands refuse the source naming it, or leave it out under
    ``--skip-unsupported``; ``only``: the output format that cannot carry it, when the
    other can (reorder copies attributes from the source itself)."""

    where: str
    feature: str
    only: str  # the one output format that cannot carry it ("zarr"); "": none can

    def __new__(cls, where: str, feature: str, only: str = "") -> Unsupported:
        note = super().__new__(cls, f"{where}: {feature}")
        note.where, note.feature, note.only = where, feature, only
        return note

    def __reduce__(self) -> tuple[Any, tuple[str, str, str]]:  # walker processes send it back
        return (Unsupported, (self.where, self.feature, self.only))


def text_members(dtype: np.dtype, prefix: str = "") -> list[str]:
    """A compound's members that are variable-length strings, or arrays of them: the top
    level's by name, a nested member's by its path (``n/s``)."""
    import h5py

    out = []
    for n in dtype.names or ():
        sub = dtype[n]
        if sub.names:
            out += text_members(sub, f"{prefix}{n}/")
        elif (info := h5py.check_string_dtype(sub.base)) is not None and info.length is None:
            out.append(prefix + n)
    return out


def sequence_type(dtype: np.dtype) -> np.dtype | None:
    """The type of a variable-length sequence's values, when they are numbers or
    fixed-length bytes (each value its bytes, so a sequence's bytes are its values')."""
    import h5py

    base = h5py.check_vlen_dtype(dtype)
    if base is None:
        return None
    base = np.dtype(base)
    if base.kind == "S" and not base.names and base.subdtype is None:
        return base
    return base if base.kind in "biuf" and not base.names and base.subdtype is None and base.itemsize <= 8 else None


def declared_order(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Variable-length sequences (a dataset of them, or a compound's members) labelled with
    the byte order their type declares. h5py (3.16) reads the sequences of a big-endian
    type (``vlen of >f8``) as arrays labelled native-endian that hold the big-endian bytes
    (h5dump, and the bytes, read 2.5 where h5py's array says 5.4e-321); their bytes are
    kept, their label mended. Sequences already labelled so are left as they are."""
    import h5py

    if dtype.names:  # (a nested member's too)
        for name in dtype.names:
            held = values.dtype.names and name in values.dtype.names
            if held and (h5py.check_vlen_dtype(dtype[name]) is not None or dtype[name].names and dtype[name].hasobject):
                values[name] = declared_order(values[name], dtype[name])
        return values
    base = h5py.check_vlen_dtype(dtype)
    if not isinstance(base, np.dtype) or base.byteorder in "=|" or base.isnative:
        return values
    if values.dtype.kind != "O":  # a scalar's sequence: h5py gives the array itself
        return values.view(base) if values.dtype.newbyteorder("=") == base.newbyteorder("=") else values
    out = np.array(values, dtype=object)  # a copy, C order: its flat view is itself (a field's view is strided)
    flat = out.reshape(-1)
    for i, seq in enumerate(flat):
        if isinstance(seq, np.ndarray) and seq.dtype != base and seq.dtype.newbyteorder("=") == base.newbyteorder("="):
            flat[i] = seq.view(base)
    return out


def text_elements(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is an HDF5 array type of variable-length strings (``string x 2``),
    whose elements h5py reads as bytes: text, as the Zarr layouts store them."""
    import h5py

    if dtype.subdtype is None:
        return False
    info = h5py.check_string_dtype(dtype.base)
    return info is not None and info.length is None


def as_text(values: np.ndarray) -> np.ndarray:
    """Variable-length strings as h5py reads them in an array type (bytes; an unset one
    empty) as text, as the type rules store them (:func:`text_elements`)."""
    out = np.empty(np.shape(values), dtype=object)
    flat, held = out.reshape(-1), np.asarray(values, dtype=object).reshape(-1)
    for i, v in enumerate(held):
        flat[i] = v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else "" if v is None else v
    return out


def text_sequences(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a variable-length sequence of variable-length strings (h5py
    reads each element as an array of bytes): stored as text, each element the JSON of
    its strings (:data:`~layoutkit.formats.TEXT_SEQUENCE_ATTR`)."""
    import h5py

    base = h5py.check_vlen_dtype(dtype)
    info = h5py.check_string_dtype(base) if isinstance(base, np.dtype) else None
    return info is not None and info.length is None


def as_text_sequences(values: np.ndarray) -> np.ndarray:
    """Sequences of variable-length strings as h5py reads them (arrays of bytes) as arrays
    of text (:func:`text_sequences`)."""
    out = np.empty(np.shape(values), dtype=object)
    flat, held = out.reshape(-1), np.asarray(values, dtype=object).reshape(-1)
    for i, seq in enumerate(held):
        flat[i] = as_text(np.asarray(seq if seq is not None else (), dtype=object))
    return out


def typed_values(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Values of ``dtype`` as h5py reads them, as the type rules read them: sequences of
    strings and array types of strings as text, sequences in their type's byte order
    (:func:`declared_order`); anything else as it is. A scalar dataset's sequence comes
    in a 0-d object array (h5py gives the sequence itself)."""
    if text_sequences(dtype):
        return as_text_sequences(values)
    if text_elements(dtype):
        return as_text(values)
    return declared_order(values, dtype) if dtype.kind == "O" or dtype.names else values


def long_double(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a float wider than 64 bits (C's long double, as h5py reads
    it), or a complex of two: stored as text (:data:`~layoutkit.formats.LONG_DOUBLE_ATTR`)."""
    return (dtype.kind == "f" and dtype.itemsize > 8 or dtype.kind == "c" and dtype.itemsize > 16) \
        and not dtype.names and dtype.subdtype is None


def sequence_members(dtype: np.dtype, prefix: str = "") -> dict[str, np.dtype]:
    """A compound's members that are variable-length sequences of numbers or fixed-length
    bytes, by path (a nested member's ``n/v``), with the type of their values."""
    out = {}
    for n in dtype.names or ():
        if dtype[n].names:
            out.update(sequence_members(dtype[n], f"{prefix}{n}/"))
        elif (base := sequence_type(dtype[n])) is not None:
            out[prefix + n] = base
    return out


def measured_members(dtype: np.dtype) -> list[str]:
    """A compound's members stored at their longest value's length (text members, by
    path, sequence members and reference members, whose paths are measured): what the
    walk measures (:attr:`ArrayInfo.text_widths`)."""
    return text_members(dtype) + list(sequence_members(dtype)) + text_reference_members(dtype)


def member_values(values: Any, path: str) -> Any:
    """The values of a compound's member at ``path`` (``n/s``: member ``s`` of member ``n``)."""
    for part in path.split("/"):
        values = values[part]
    return values


def element_shape(dtype: np.dtype) -> tuple[int, ...]:
    """The shape of an HDF5 array type's elements (``int16 x 3``: ``(3,)``), which h5py
    reads as trailing axes; ``()`` for every other type."""
    return tuple(dtype.subdtype[1]) if dtype.subdtype is not None else ()


def carried_nowhere(info: ArrayInfo) -> str | None:
    """What in ``info``'s type no layout carries over (the feature, as an error names it),
    or None. A member that is an object or region reference, or an array of them, at
    any depth of nested members, is carried (as its text: :func:`text_reference_members`);
    references inside a sequence member are not."""
    plain = set(text_reference_members(info.dtype))
    return _stray_reference(info.dtype, plain) if info.dtype.names else None


def _stray_reference(dtype: np.dtype, plain: set[str], prefix: str = "") -> str | None:
    for name in dtype.names or ():
        sub, path = dtype[name], prefix + name
        if path in plain or not sub.hasobject or not holds_reference(sub):
            continue
        if sub.names:
            if (found := _stray_reference(sub, plain, path + "/")) is not None:
                return found
            continue
        return f"object references inside a compound member ({path!r})"
    return None


def reference_members(dtype: np.dtype, prefix: str = "", kind: Any = None) -> list[str]:
    """A compound's members that are object references, or array members of them
    (``kind``: h5py's type of reference, ``h5py.Reference`` by default), a nested
    member's by its path (``n/r``): stored as the paths they point at
    (:data:`~layoutkit.formats.REFERENCE_MEMBERS_ATTR`; an array member's a field an element)."""
    import h5py

    kind = kind or h5py.Reference
    out = []
    for n in dtype.names or ():
        if dtype[n].names:
            out += reference_members(dtype[n], f"{prefix}{n}/", kind)
        elif h5py.check_ref_dtype(dtype[n].base) is kind:  # (of an array member: each element)
            out.append(prefix + n)
    return out


def text_reference_members(dtype: np.dtype) -> list[str]:
    """Every member stored as a reference's text: :func:`reference_members` (paths) and
    :func:`region_members` (regions' text), by path."""
    return reference_members(dtype) + region_members(dtype)


def region_members(dtype: np.dtype) -> list[str]:
    """A compound's members that are region references, by path as :func:`reference_members`:
    stored as their text (:data:`~layoutkit.formats.REGION_MEMBERS_ATTR`)."""
    import h5py

    return reference_members(dtype, kind=h5py.RegionReference)


def type_rule(dtype: np.dtype) -> str | None:
    """Which of the type rules (docs/formats/index.md) a dataset of ``dtype`` is stored
    by in Zarr, as ``inspect`` counts them: a type Zarr has no spelling for. None for a
    type Zarr holds as it is (numbers, bool, fixed-length bytes, strings, opaque, a
    compound of those)."""
    import h5py

    ref = h5py.check_ref_dtype(dtype)
    kind = ("array" if dtype.subdtype is not None
            else ("region" if ref is h5py.RegionReference else "reference") if ref is not None
            else "enum" if h5py.check_enum_dtype(dtype) is not None
            else "long double" if long_double(dtype)
            else "sequence" if dtype.kind == "O" and h5py.check_string_dtype(dtype) is None
            else "compound" if dtype.names and (text_members(dtype) or sequence_members(dtype)
                                                or text_reference_members(dtype) or _has_array_member(dtype))
            else None)
    return RULES[kind] if kind else None


def _has_array_member(dtype: np.dtype) -> bool:
    return any(dtype[n].subdtype is not None or dtype[n].names and _has_array_member(dtype[n]) for n in dtype.names or ())


def with_paths(values: np.ndarray, dtype: np.dtype, path_of: Any) -> np.ndarray:
    """A compound's values with its reference members (:func:`reference_members`, at
    any depth) as the paths they point at, and its region members (:func:`region_members`)
    as their text: ``path_of(ref)`` gives either (an unset reference the empty string)."""
    names = text_reference_members(dtype)
    if not names or not values.dtype.names:
        return values
    out = np.array(values, copy=True)
    for name in names:
        held = np.asarray(member_values(values, name), dtype=object)
        member_values(out, name)[...] = np.array([path_of(r) for r in held.reshape(-1)] + [None],
                                                 dtype=object)[:-1].reshape(held.shape)
    return out


def holds_reference(dtype: np.dtype) -> bool:
    """Whether a type holds object or region references anywhere: itself, a member at
    any depth, an array type's element, a sequence's values."""
    import h5py

    if dtype.names:
        return any(holds_reference(dtype[n]) for n in dtype.names)
    base = dtype.base if dtype.subdtype else dtype
    if base.names:
        return holds_reference(base)
    return h5py.check_ref_dtype(base) is not None or (
        (inner := h5py.check_vlen_dtype(base)) is not None and holds_reference(np.dtype(inner)))


@dataclass(frozen=True)
class ArrayInfo:
    """Everything planning needs to know about one HDF5 dataset.

    ``kind`` is one of ``numeric``, ``bool``, ``string``, ``bytes``, ``compound``,
    ``enum``, ``opaque``, ``reference``, ``region-reference``, ``vlen``; ``dims`` holds one dimension name per
    axis (scale names, or ``phony_dim_N``).
    """

    path: str
    shape: tuple[int, ...]
    dtype: np.dtype
    kind: str
    layout: str
    chunks: tuple[int, ...] | None
    filters: tuple[FilterInfo, ...]
    fill_value: Any
    attrs: dict[str, Any]
    dims: tuple[str, ...]
    dim_scales: tuple[tuple[str, ...], ...]
    is_scale: bool
    storage_bytes: int
    enum_mapping: dict[str, int] | None = None
    external: bool = False
    dim_only: bool = False
    null_space: bool = False
    offset: int | None = None  # file offset of contiguous raw data (None: never written)
    maxshape: tuple[int | None, ...] | None = None  # None on an axis: unlimited (None: as shape)
    # a chunked dataset's index when it has few chunks (one B-tree leaf): (origin, offset,
    # size, filter mask) of each allocated chunk, read with its storage size; None: not
    # recorded (many chunks), readers ask the file
    chunk_entries: tuple[tuple[tuple[int, ...], int, int, int], ...] | None = None
    # those entries held against HDF5's own reads by the walker process that recorded them
    # (:func:`~layoutkit.hdf5.chunk_index.index_disagreement`): "" they agree, else where
    # they do not; None: not checked there (the raw reader checks them on first use)
    index_checked: str | None = None
    address: int | None = None  # the object's address in the source file (None: not walked)
    member: int = 0  # which source of a set holds it (:class:`~layoutkit.storage.SourceSet`); 0 for one file
    # a set's array concatenated along its first axis from the datasets of several
    # sources (netCDF files along their record dimension): each one, in order; with
    # ``unpack``, each is decoded as xarray decodes it (mask, scale and offset), as
    # their encodings differ (:mod:`layoutkit.hdf5.combined`)
    segments: tuple[ArrayInfo, ...] | None = None
    unpack: bool = False
    # why the raw chunk path must not read it (its chunk index failed the self-check:
    # :func:`~layoutkit.hdf5.chunk_index.index_problem`); None: the raw path may
    raw_fallback: str | None = None
    # a virtual dataset's mapped files HDF5 cannot find (it would read their regions as
    # the fill value, silently), or the missing files of an external dataset (``external``:
    # its raw data in other files, read through HDF5 from beside the file), named; None:
    # each is found (or the dataset is neither)
    unmapped: str | None = None
    # a fixed-length string type's padding when it is not NUL padding ("nullterm",
    # "spacepad"): HDF5 converts such strings as it reads them (cut at the first NUL,
    # trailing spaces dropped), so their stored bytes are not their values
    strpad: str | None = None
    # a compound's variable-length string, sequence and reference members: (name, the
    # longest value's bytes, a reference's path's) of each, measured over the data by the
    # walk (:func:`measured_members`); None: it has none
    text_widths: tuple[tuple[str, int], ...] | None = None
    # a dataset declared far larger than it is written (:func:`~layoutkit.hdf5.chunk_index.sparse_storage`):
    # the regions its stored data lie in, clipped to its extent; everywhere else it reads
    # as its fill value. None: planned over its whole extent
    stored_regions: tuple[tuple[tuple[int, int], ...], ...] | None = None
    # the path of the committed (named) datatype its type is, when it is one (:class:`DatatypeInfo`)
    type_path: str | None = None
    # a virtual dataset's mappings when each maps a whole dataset of another file as one
    # block (:class:`MappedBlock`): what its chunks can be referenced from; None: not so
    mapped: tuple[MappedBlock, ...] | None = None
    # its path in the source when ``path`` is the one a Zarr store gives it
    # (:func:`~layoutkit.formats.stored_path`: a name with a backslash); None: the same
    source_path: str | None = None

    @property
    def in_source(self) -> str:
        """Its path in the source file (what readers of the source open)."""
        return self.source_path or self.path

    @property
    def origin(self) -> ArrayInfo:
        """The source dataset it is created from: itself, or the first of the datasets a
        set's array is joined from (its member's file holds its attributes)."""
        return self.segments[0] if self.segments else self

    @property
    def extendible(self) -> bool:
        """Whether an axis may grow (netCDF's unlimited dimensions): HDF5 then needs chunks."""
        return self.maxshape is not None and tuple(self.maxshape) != self.shape

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class GroupInfo:
    path: str
    attrs: dict[str, Any]
    member: int = 0  # which source of a set it is taken from (as :attr:`ArrayInfo.member`)
    source_path: str | None = None  # its path in the source, as :attr:`ArrayInfo.source_path`


@dataclass(frozen=True)
class DatatypeInfo:
    """A committed (named) datatype: an object of the hierarchy holding a type that
    datasets and attributes may use by reference (netCDF-4 keeps its enum types so)."""

    path: str
    dtype: np.dtype
    attrs: dict[str, Any]
    address: int  # its object address in its source file (what an attribute's type is found by)
    member: int = 0  # which source of a set it is taken from (as :attr:`ArrayInfo.member`)


@dataclass(frozen=True)
class LinkInfo:
    """A link that is not the first hard link to its object."""

    path: str
    kind: str  # "hard" | "soft" | "external"
    target: str
    target_file: str | None = None


@dataclass(frozen=True)
class Inventory:
    """The walked hierarchy of one HDF5 source."""

    path: str
    userblock_size: int
    is_netcdf4: bool
    groups: tuple[GroupInfo, ...]
    arrays: tuple[ArrayInfo, ...]
    links: tuple[LinkInfo, ...]
    attr_notes: tuple[str, ...] = field(default=())
    datatypes: tuple[DatatypeInfo, ...] = field(default=())

    @property
    def unsupported(self) -> tuple[Unsupported, ...]:
        """The objects and attributes the walk found that a layout cannot carry over (they
        are not in :attr:`arrays`, :attr:`groups` or any ``attrs``)."""
        return tuple(n for n in self.attr_notes if isinstance(n, Unsupported))

    def node_paths(self) -> list[str]:
        """The path of every group, then of every array."""
        return [*(g.path for g in self.groups), *(a.path for a in self.arrays)]

    def array(self, path: str) -> ArrayInfo:
        for a in self.arrays:
            if a.path == path:
                return a
        raise KeyError(path)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)


# ---------------------------------------------------------------------------------
# attributes


# ---------------------------------------------------------------------------------
# datasets


__all__ = ["ArrayInfo", "DatatypeInfo", "FilterInfo", "GroupInfo", "Inventory", "LinkInfo"]
