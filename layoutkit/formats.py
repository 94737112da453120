"""The names every variant layoutkit writes shares, whatever its layout: one definition each.

Writers, readers and comparators import them from here, so they cannot drift apart. A
layout's own names (its groups, arrays, index attributes and version) are in its
package's ``spec`` module (:mod:`layoutkit.layouts`); the rules below are the ones the
format pages of the documentation call "Types" and "Provenance".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

PROVENANCE_ATTR = "layoutkit"
"""The one root attribute layoutkit adds to every variant: the effective recipe, as JSON
(``{"version": ..., "command": ..., "recipe": {...}}``)."""

LAYOUT_ATTR = "layoutkit_layout"
"""The root attribute of a Zarr store that says which layout it holds
(``{"name": ..., "version": ..., ...}``); a store without it mirrors the HDF5 hierarchy."""

NODES_ATTR = "layoutkit_nodes"
"""The root attribute of a store whose root must not grow with the shots (shot-packed
version 3, signal-major version 2): the ``zarr.json`` documents of every node outside the
shot groups, by path, as Zarr's consolidated metadata would list them. Zarr's own
consolidated metadata must list every node (zarr-python answers KeyError for one it
leaves out), so such a store has none at its root: zarr and xarray read it node by node,
layoutkit reads this one document."""

SIDECAR = "layoutkit.json"
"""The document beside a Zarr store's root: options, links, netCDF dimensions, skipped
datasets, dimension scales (in Icechunk, folded into :data:`PROVENANCE_ATTR`)."""

RENAMED_KEY = "renamed"
"""The entry of :data:`SIDECAR` that maps each node stored under another name than the
source's (:func:`stored_path`) to its path in the source."""


def stored_path(path: str) -> str:
    """A source's path as a Zarr store names it: a name holding a backslash, which
    zarr-python takes for a ``/`` (``a\\b`` would be ``b`` in a group ``a``), stored with
    its ``%`` and its backslashes percent-encoded (``%25``, ``%5C``); every other name as it
    is. The store's :data:`SIDECAR` records each such node (:data:`RENAMED_KEY`)."""
    if "\\" not in path:
        return path
    return "/".join(n.replace("%", "%25").replace("\\", "%5C") if "\\" in n else n for n in path.split("/"))


# -- the type rules: what an HDF5 feature becomes in Zarr -----------------------------------

DIMENSIONS_ATTR = "_ARRAY_DIMENSIONS"
"""Zarr v2's (xarray's) dimension names; v3 stores them as ``dimension_names``."""
ENUM_ATTR = "hdf5_enum"
"""An enum dataset: its base integers, and this attribute the name -> value mapping."""
REFERENCE_ATTR = "hdf5_reference"
"""An object-reference dataset: the referenced paths as text."""
REGION_ATTR = "hdf5_region_reference"
"""A region-reference dataset: each reference as the text of :func:`region_text` (the
referenced dataset's path and its selection), an unset one as the empty string."""
NULL_SPACE_ATTR = "hdf5_null_dataspace"
"""A dataset with a null dataspace (no shape, no value): a zero-size array marked so."""

ARRAY_TYPE_ATTR = "hdf5_array_type"
"""A dataset of an HDF5 array type (``int16 x 3``): its elements are the array's last
axes, as h5py reads them; this attribute is how many (the element's rank), and the axes
are named by :func:`element_dims`."""


def element_dims(name: str, rank: int) -> tuple[str, ...]:
    """The names of the axes an HDF5 array type's elements become in the dataset ``name``
    (its last path component): ``<name>_element``, or ``<name>_element_<i>`` for an
    element of several axes."""
    return (f"{name}_element",) if rank == 1 else tuple(f"{name}_element_{i}" for i in range(rank))


ARRAY_MEMBERS_ATTR = "hdf5_array_members"
"""A compound with array members (``v``: float32 x 3; zarr-python has no structured
type with an array field): each such member is stored as one field per element,
:func:`member_field` (``v[0]``, ``v[1]``, ...; ``v[0,1]`` for several axes, C order),
in the member's place; this attribute maps each such member, by path (a nested
member's ``n/v``), to its element shape."""


def member_field(name: str, index: tuple[int, ...]) -> str:
    """The field an array member's element at ``index`` is stored in (:data:`ARRAY_MEMBERS_ATTR`)."""
    return f"{name}[{','.join(map(str, index))}]"


def joined_members(values: Any, members: dict[str, list[int]]) -> Any:
    """Values read from a store, their array members one field per element
    (:data:`ARRAY_MEMBERS_ATTR`), in the compound type they were written from: each
    member a field of its element shape again, in its place."""
    import numpy as np

    dtype = values.dtype
    fields: list[tuple[Any, ...]] = []
    top = {m: s for m, s in members.items() if "/" not in m}
    nested: dict[str, Any] = {}
    for name in dtype.names or ():
        member = next((m for m in top if name == member_field(m, (0,) * len(top[m]))), None)
        inner = {m[len(name) + 1:]: s for m, s in members.items() if m.startswith(name + "/")}
        if member is not None:
            fields.append((member, dtype[name], tuple(top[member])))
        elif inner and dtype[name].names:  # a nested member's (``n/v``): joined in its place
            nested[name] = joined_members(values[name], inner)
            fields.append((name, nested[name].dtype))
        elif not any(name.startswith(m + "[") for m in top):
            fields.append((name, dtype[name]))
    out = np.empty(values.shape, np.dtype(fields))
    for field in fields:
        if len(field) == 2:
            out[field[0]] = nested[field[0]] if field[0] in nested else values[field[0]]
            continue
        for index in np.ndindex(*field[2]):
            out[field[0]][(..., *index)] = values[member_field(field[0], index)]
    return out


SEQUENCE_ATTR = "hdf5_sequence"
"""A dataset of variable-length sequences of numbers (a ragged array): each element
stored as variable-length bytes, the sequence's values in this attribute's type (a
NumPy type string, ``"<i4"``), C order; :func:`sequences`."""


TEXT_SEQUENCE_ATTR = "hdf5_text_sequence"
"""A dataset of variable-length sequences of variable-length strings: each element
stored as text, the JSON array of its strings (``["ab", "Zoë"]``; the empty sequence, and
the fill value, the empty text); this attribute is ``"json"``. :func:`text_sequences`."""


def text_sequences(values: Any) -> Any:
    """Elements stored as JSON text (:data:`TEXT_SEQUENCE_ATTR`) as the sequences they
    hold: an object array of one-dimensional object arrays of text."""
    import json

    import numpy as np

    out = np.empty(np.shape(values), dtype=object)
    flat, stored = out.reshape(-1), np.asarray(values, dtype=object).reshape(-1)
    for i, text in enumerate(stored):
        items = json.loads(text) if text else []
        flat[i] = np.empty(len(items), dtype=object)
        flat[i][:] = items
    return out


def sequences(values: Any, dtype: str) -> Any:
    """Elements stored as bytes (:data:`SEQUENCE_ATTR`) as the sequences they hold: an
    object array of one-dimensional arrays of ``dtype``, as h5py reads them."""
    import numpy as np

    out = np.empty(np.shape(values), dtype=object)
    flat, stored = out.reshape(-1), np.asarray(values, dtype=object).reshape(-1)
    for i, raw in enumerate(stored):
        flat[i] = np.frombuffer(raw or b"", dtype=dtype).copy()
    return out


SEQUENCE_MEMBERS_ATTR = "hdf5_sequence_members"
"""A compound with variable-length sequence members (jhdf's ``one``: a sequence of
uint8; Zarr's structured types hold fixed sizes only): each such member is stored as two
fields in its place, the member's name holding its values' bytes as fixed-length bytes
(``S<n>``, C order, ``n`` the longest sequence's bytes) and :func:`sequence_length_field`
holding how many values it has (``uint64``); this attribute maps each such member to its
values' type (a NumPy type string, ``"|u1"``)."""


SEQUENCE_LENGTHS_ATTR = "hdf5_sequence_lengths"
"""Where the compound has a member named as a sequence member's lengths field
(``<name>.length``), that sequence member mapped to the field its lengths are in
instead: the first of ``<name>.length.1``, ``<name>.length.2``, ... no member is named
(:func:`sequence_length_field`); absent when every sequence member's is ``<name>.length``."""


def sequence_length_field(name: str, names: Iterable[str] = ()) -> str:
    """The field holding how many values a sequence member's sequence has
    (:data:`SEQUENCE_MEMBERS_ATTR`): ``<name>.length``, or where the compound has a member
    of that name (``names``, its members'), the first of ``<name>.length.1``, ... it has none of."""
    taken, field, k = set(names), f"{name}.length", 0
    while field in taken:
        k += 1
        field = f"{name}.length.{k}"
    return field


def members_under(by_path: dict[str, Any] | None, name: str) -> dict[str, Any]:
    """The entries of a dict keyed by member path (``n/v``: member ``v`` of member ``n``)
    that are inside the member ``name``, keyed by their paths in it."""
    return {k[len(name) + 1:]: v for k, v in (by_path or {}).items() if k.startswith(name + "/")}


def moved_sequence_lengths(dtype: Any, members: Iterable[str]) -> dict[str, str]:
    """The :data:`SEQUENCE_LENGTHS_ATTR` of a compound ``dtype`` (the source's, or as
    stored) whose sequence members are ``members`` (by path): each whose lengths' field
    is not ``<name>.length``, with the field it is (named among its own compound's members)."""
    out = {}
    for path in members:
        *parents, leaf = path.split("/")
        owner = dtype
        for part in parents:
            owner = owner[part]
        if (field := sequence_length_field(leaf, owner.names or ())) != f"{leaf}.length":
            out[path] = field
    return out


def joined_sequences(values: Any, members: dict[str, str], lengths: dict[str, str] | None = None) -> Any:
    """Values read from a store, their sequence members two fields each
    (:data:`SEQUENCE_MEMBERS_ATTR`, by path: a nested member's ``n/v``), in the compound
    type they were written from: each member an object field again, each element an array
    of its values, as h5py reads the source. A sequence's bytes are cut at its last
    non-NUL byte when read as ``S<n>`` (NumPy's fixed-length bytes): its length gives them
    back. ``lengths``: the :data:`SEQUENCE_LENGTHS_ATTR` of the store, where it has one."""
    import numpy as np

    nested = {}  # a nested member holding sequence members: joined in its own compound
    for name in values.dtype.names or ():
        if (inner := members_under(members, name)) and values.dtype[name].names:
            nested[name] = joined_sequences(values[name], inner, members_under(lengths, name))
    members = {m: k for m, k in members.items() if "/" not in m}
    length_of = {m: (lengths or {}).get(m) or sequence_length_field(m) for m in members}
    fields = [(n, object if n in members else nested[n].dtype if n in nested else values.dtype[n])
              for n in values.dtype.names or () if n not in length_of.values()]
    out = np.empty(values.shape, np.dtype(fields))
    for name, _ in fields:
        if name not in members:
            out[name] = nested[name] if name in nested else values[name]
            continue
        kind = np.dtype(members[name])
        held, counts, flat = values[name].reshape(-1), values[length_of[name]].reshape(-1), out[name].reshape(-1)
        for i, (raw, count) in enumerate(zip(held, counts)):
            size = int(count) * kind.itemsize
            flat[i] = np.frombuffer(bytes(raw).ljust(size, b"\0")[:size], dtype=kind).copy()
    return out


def region_text(path: str, selection: str, coords: Any = None) -> str:
    """A region reference as text: JSON of the referenced dataset's ``path`` and its
    selection: ``{"path": P, "all": true}``, ``{"path": P, "none": true}``, ``{"path": P,
    "points": [[i, j, ...], ...]}`` (in the reference's order) or ``{"path": P, "blocks":
    [[[start...], [end...]], ...]}`` (boxes, both corners inclusive, as HDF5 lists a
    hyperslab selection). ``selection`` is ``all``, ``none``, ``points`` or ``blocks``,
    ``coords`` the points or the blocks (nested lists of integers)."""
    import json

    doc: dict[str, Any] = {"path": path}
    doc[selection] = True if selection in ("all", "none") else coords
    return json.dumps(doc, separators=(",", ":"))


def region_of_text(text: str) -> tuple[str, str, Any] | None:
    """The ``(path, selection, coords)`` of :func:`region_text`'s text; None for the empty
    string (an unset reference)."""
    import json

    if not text:
        return None
    doc = json.loads(text)
    (selection,) = (k for k in ("all", "none", "points", "blocks") if k in doc)
    return doc["path"], selection, None if selection in ("all", "none") else doc[selection]


TEXT_MEMBERS_ATTR = "hdf5_text_members"
"""A compound with variable-length string members: their names. Each is stored as
fixed-length bytes (``S<n>``), the UTF-8 of its text, ``n`` the longest value's length;
h5py reads the source's as those bytes."""

LONG_DOUBLE_ATTR = "hdf5_long_double"
"""A dataset of long doubles (floats wider than 64 bits, which Zarr has not): each value
stored as text, the shortest decimal that reads back as the same long double (NumPy's
``format_float_scientific(v, unique=True)``: ``"3.3333333333333333334e-01"``; ``"nan"``,
``"inf"``, ``"-inf"``), the fill value so too; a complex long double's value its real and
imaginary parts so, a space between (``"3.3333333333333333334e-01 -1e+00"``); this attribute
is the NumPy type the text reads back as (``"<f16"``, ``"<c32"``): :func:`long_doubles`."""


LONG_DOUBLE_ATTRS_ATTR = "hdf5_long_double_attributes"
"""A node's attributes of long doubles (JSON numbers are 64-bit floats): each such
attribute holds the text of its values as :data:`LONG_DOUBLE_ATTR` writes them (a list of
texts for an array), and this attribute maps its name to the NumPy type the text reads
back as (``{"third": "<f16"}``)."""


def long_double_text(values: Any) -> Any:
    """Long doubles as the text :data:`LONG_DOUBLE_ATTR` stores (an object array of str);
    a complex one's real and imaginary parts so, a space between."""
    import numpy as np

    values = np.asarray(values)
    out = np.empty(values.shape, dtype=object)
    flat, held = out.reshape(-1), values.reshape(-1)
    text = np.format_float_scientific
    for i, v in enumerate(held):
        flat[i] = f"{text(v.real, unique=True)} {text(v.imag, unique=True)}" if held.dtype.kind == "c" \
            else text(v, unique=True)
    return out


def long_doubles(values: Any, dtype: str) -> Any:
    """Text stored by :data:`LONG_DOUBLE_ATTR` as the long doubles it writes (the empty
    text, never written, as 0)."""
    import warnings

    import numpy as np

    held, kind = np.asarray(values, dtype=object), np.dtype(dtype)
    with warnings.catch_warnings():  # ("overflow encountered in conversion from string": infinities read back exactly)
        warnings.simplefilter("ignore", RuntimeWarning)
        if kind.kind != "c":
            return np.array([t or "0" for t in held.reshape(-1)], dtype=object).astype(kind).reshape(held.shape)
        parts = np.array([(t or "0 0").split(" ") for t in held.reshape(-1)] + [["0", "0"]], dtype=object)[:-1]
        out = np.empty(len(parts), kind)
        out.real, out.imag = parts[:, 0].astype(out.real.dtype), parts[:, 1].astype(out.real.dtype)
        return out.reshape(held.shape)


REFERENCE_MEMBERS_ATTR = "hdf5_reference_members"
"""A compound with object-reference members: their names. Each is stored as
fixed-length bytes (``S<n>``), the UTF-8 of the path the reference points at (an unset
reference the empty path), ``n`` the longest path's length; :func:`joined_references`."""


REGION_MEMBERS_ATTR = "hdf5_region_members"
"""A compound with region-reference members: their names (by path, as
:data:`REFERENCE_MEMBERS_ATTR`). Each is stored as fixed-length bytes (``S<n>``), the
UTF-8 of the region's text (:func:`region_text`; an unset one the empty text), ``n`` the
longest; :func:`joined_references` reads them back as that text."""


def joined_references(values: Any, names: list[str]) -> Any:
    """Values read from a store with their reference members (:data:`REFERENCE_MEMBERS_ATTR`,
    stored as bytes; a nested member's by its path, ``n/r``) as text: the paths, as
    object fields."""
    import numpy as np

    if not values.dtype.names or not names:
        return values
    inner = {n: joined_references(values[n], [p[len(n) + 1:] for p in names if p.startswith(n + "/")])
             for n in values.dtype.names if values.dtype[n].names and any(p.startswith(n + "/") for p in names)}
    dtype = np.dtype([(n, (object, values.dtype[n].shape) if n in names  # (an array member's: each element)
                       else inner[n].dtype if n in inner else values.dtype[n]) for n in values.dtype.names])
    out = np.empty(values.shape, dtype)
    for n in values.dtype.names:
        if n in inner:
            out[n] = inner[n]
        elif n in names:
            held = values[n].reshape(-1)
            out[n] = np.array([bytes(b).decode("utf-8", "surrogateescape") for b in held] + [None],
                              dtype=object)[:-1].reshape(values[n].shape)
        else:
            out[n] = values[n]
    return out


TYPE_RULE_ATTRS = frozenset({DIMENSIONS_ATTR, ENUM_ATTR, REFERENCE_ATTR, REGION_ATTR, NULL_SPACE_ATTR, ARRAY_TYPE_ATTR,
                             TEXT_MEMBERS_ATTR, ARRAY_MEMBERS_ATTR, SEQUENCE_ATTR, SEQUENCE_MEMBERS_ATTR, SEQUENCE_LENGTHS_ATTR,
                             TEXT_SEQUENCE_ATTR, REFERENCE_MEMBERS_ATTR, REGION_MEMBERS_ATTR, LONG_DOUBLE_ATTR,
                             LONG_DOUBLE_ATTRS_ATTR})
"""Attributes that carry structure in Zarr, not source attributes."""

HDF5_SUFFIXES = (".h5", ".hdf5", ".he5", ".hdf", ".nc", ".nc4", ".h5ad")
"""Names that say an HDF5 (or netCDF-4) file: in a bucket such an object is read as a file
first, and such a prefix is not asked whether it holds an Icechunk repository."""

NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
"""JSON has no NaN or infinities: attributes and fill values hold them as these strings."""



def scale_by_name(path: str, name: str, is_array: Callable[[str], bool], children: Callable[[str], Iterable[str]],
                  top: str | None = None) -> str | None:
    """The dimension scale a Zarr store's array at ``path`` has for the dimension
    ``name``, found by name where ``layoutkit.json`` lists none: the first array called
    ``name`` in the array's group or one of its subgroups, then in each ancestor group or
    one of its subgroups (nearest first, subgroups in name order; the root's level is not
    searched), up to the group ``top`` when given. ``convert`` lists in ``dimension_scales``
    every array stored at its own path for which this rule, searched up to the array's
    shot group, does not give its HDF5 dimension scales (or gives one where it has none),
    so that a reader that knows one shot's nodes finds its scales."""
    group = path.rsplit("/", 1)[0]
    while group:
        for candidate in [f"{group}/{name}"] + [f"{group}/{c}/{name}" for c in sorted(children(group))]:
            if candidate != path and is_array(candidate):
                return candidate
        if group == top:
            break
        group = group.rsplit("/", 1)[0]
    return None


RULES = {
    "array": "HDF5 array types",
    "region": "region references",
    "reference": "object references",
    "enum": "enums",
    "long double": "long doubles",
    "sequence": "variable-length sequences",
    "compound": "compounds with text, sequence, array or reference members",
}
"""The type rules (the documentation's "Types") by which a dataset of a type Zarr has no
spelling for is stored, as ``inspect`` names them, one rule a dataset (the first that
applies, in this order: an array type of compounds is an array type)."""


def rule_of_attrs(attrs: dict[str, Any]) -> str | None:
    """The rule (:data:`RULES`) a stored Zarr array was written by, from the attributes
    that name it; None for an array of a type Zarr holds as it is."""
    if ARRAY_TYPE_ATTR in attrs:
        return RULES["array"]
    kinds = ((REGION_ATTR, "region"), (REFERENCE_ATTR, "reference"), (ENUM_ATTR, "enum"),
             (LONG_DOUBLE_ATTR, "long double"), (SEQUENCE_ATTR, "sequence"), (TEXT_SEQUENCE_ATTR, "sequence"))
    for name, kind in kinds:
        if name in attrs:
            return RULES[kind]
    members = (TEXT_MEMBERS_ATTR, REFERENCE_MEMBERS_ATTR, REGION_MEMBERS_ATTR, SEQUENCE_MEMBERS_ATTR, ARRAY_MEMBERS_ATTR)
    return RULES["compound"] if any(m in attrs for m in members) else None


def json_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes as strict JSON: NaN and infinities as the strings of :data:`NON_FINITE`
    (zarr writes strict JSON for v2, and uses these strings for fill values)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    return {k: clean(v) for k, v in attrs.items()}


__all__ = [
    "HDF5_SUFFIXES",
    "RULES",
    "rule_of_attrs",
    "ARRAY_MEMBERS_ATTR",
    "ARRAY_TYPE_ATTR",
    "element_dims",
    "joined_members",
    "joined_references",
    "joined_sequences",
    "members_under",
    "moved_sequence_lengths",
    "member_field",
    "sequence_length_field",
    "sequences",
    "text_sequences",
    "DIMENSIONS_ATTR",
    "ENUM_ATTR",
    "LAYOUT_ATTR",
    "LONG_DOUBLE_ATTR",
    "LONG_DOUBLE_ATTRS_ATTR",
    "long_double_text",
    "long_doubles",
    "NODES_ATTR",
    "NON_FINITE",
    "NULL_SPACE_ATTR",
    "PROVENANCE_ATTR",
    "REFERENCE_ATTR",
    "REFERENCE_MEMBERS_ATTR",
    "REGION_MEMBERS_ATTR",
    "REGION_ATTR",
    "region_of_text",
    "region_text",
    "SIDECAR",
    "SEQUENCE_ATTR",
    "SEQUENCE_LENGTHS_ATTR",
    "SEQUENCE_MEMBERS_ATTR",
    "TEXT_MEMBERS_ATTR",
    "TEXT_SEQUENCE_ATTR",
    "TYPE_RULE_ATTRS",
    "json_attrs",
    "scale_by_name",
]
