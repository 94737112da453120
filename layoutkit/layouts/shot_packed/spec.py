"""The shot-packed Zarr layout (``convert --layout shot-packed``): one shot's signals in one object.

For every shot group (``/shots/<SHOT>``, the part of the template up to ``{shot}``),
the bytes of every dataset of fixed-size numbers inside it (signals and their time bases
alike, each flattened in C order, in its own dtype and byte order) are packed end to end
into one byte array, ``/shots/<SHOT>/_packed`` (uint8). With Zarr v3 that array is one
shard (a few when a shot holds more than one task's budget), so a whole shot is one GET,
and one signal a ranged read inside the shard.

**Version 3** (Zarr v3 stores): the root holds what does not grow with the shots. The
root's ``layoutkit_layout`` attribute is ``{"name": "shot-packed", "version": 3,
"template": ..., "packed": "_packed", "shots": "_shots", "signals": [every signal name]}``;
the root-level text array ``/_shots`` lists every shot (natural order); and each shot's
index is the attribute ``layoutkit_shot_packed`` of its own packed array
(``/shots/<SHOT>/_packed/zarr.json``), with its rows' attributes and scales inline, the
attributes of the shot's groups and the paths of its unpacked arrays (:func:`index_doc_v3`).
The consolidated metadata in the root document lists only the nodes outside shot groups,
so its size does not depend on the number of shots; a reader finds a shot's nodes by
their paths. Reading a whole shot: its packed array's ``zarr.json``, then its shard(s).

**Version 2** (Zarr v2 stores, and stores written before): the shot group's attribute
``layoutkit_shot_packed`` is the index, a column per field:

    {"version": 2, "names": ["signals/ip", ...], "start": [0, ...], "dtype": ["<f4", ...],
     "shape": [[20110], ...], "fill_value": [0.0, ...], "attrs": [3, ...], "scales": [1, ...]}

``start`` is the dataset's first byte in ``_packed``; it spans ``prod(shape) x itemsize``
bytes. ``attrs`` and ``scales`` are rows of two tables in the root's ``layoutkit_layout``
attribute, ``"attrs"`` (attribute dicts) and ``"scales"`` (per axis, the dimension scales:
relative to the shot when inside it, absolute otherwise), each distinct row written once,
as the shots of an archive repeat their signals' attributes. Version 1 (still read) kept
a dict per dataset with its attributes in every shot's index (``{"version": 1,
"members": {"signals/ip": {"start": 0, "dtype": "<f4", "shape": [20110], "fill_value":
0.0, "attrs": {...}, "scales": [["timebases/t_10khz"]]}, ...}}``): 2.7 MB of JSON for
100 shots of 70 signals, parsed on every open. The index rides in the consolidated
metadata, so opening the store is the one request that reads it. Everything else
(datasets outside shot groups, text, compounds, scalars) is mirrored at its own path as
a shot-major store holds it.

This module is the layout's specification, imported by its writer, its reader and its
comparator alike: the names, the version, the index's encoding (:func:`index_doc`) and
decoding (:func:`index_rows`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

LAYOUT_NAME = "shot-packed"
ALIASES = ("zarr-shot-packed",)  # the former registry key (and recipe name)
LAYOUT_VERSION = 3
"""The version written to Zarr v3 stores; Zarr v2 stores are written as version 2 (their
consolidated metadata cannot leave nodes out), and versions 1 and 2 are still read."""
ROOT_INDEX_VERSION = 2  # the last version whose index rides in the consolidated metadata
INDEX_ATTR = "layoutkit_shot_packed"
PACKED_ARRAY = "_packed"
SHOTS_ARRAY = "_shots"
"""Version 3: the root-level array of every shot's name, in natural order (text)."""


@dataclass(frozen=True)
class Segment:
    """One source dataset's bytes in its shot's packed array."""

    source: str
    start: int  # first byte
    size: int  # bytes


@dataclass
class IndexTables:
    """The rows the shots' indexes share (attribute dicts, scale references), each once."""

    attrs: list[dict[str, Any]] = field(default_factory=list)
    scales: list[list[list[str]]] = field(default_factory=list)
    _rows: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)

    def row(self, table: str, value: Any) -> int:
        """The row of ``table`` ("attrs" or "scales") that holds ``value``, added if new."""
        key = (table, json.dumps(value, sort_keys=True))
        if key not in self._rows:
            rows = getattr(self, table)
            self._rows[key] = len(rows)
            rows.append(value)
        return self._rows[key]

    LAYOUT_KEYS = ("attrs", "scales")  # their keys in the root's layout attribute

    def as_layout(self) -> dict[str, Any]:
        """The tables as they go into the root's layout attribute."""
        return {key: getattr(self, key) for key in self.LAYOUT_KEYS}


@dataclass(frozen=True)
class IndexEntry:
    """One dataset of a shot's index, as the writer plans it."""

    name: str  # path relative to the shot group
    start: int
    dtype: str
    shape: list[int]
    fill_value: Any  # as JSON
    attrs: dict[str, Any]  # as JSON
    scales: list[list[str]]


def _rows(version: int, entries: list[IndexEntry]) -> dict[str, Any]:
    """The fields every index version writes alike, a list each, a row per dataset."""
    return {
        "version": version,
        "names": [e.name for e in entries],
        "start": [e.start for e in entries],
        "dtype": [e.dtype for e in entries],
        "shape": [e.shape for e in entries],
        "fill_value": [e.fill_value for e in entries],
    }


def index_doc(entries: list[IndexEntry], tables: IndexTables) -> dict[str, Any]:
    """A shot group's index attribute (version 2), its shared rows added to ``tables``."""
    return {
        **_rows(ROOT_INDEX_VERSION, entries),
        "attrs": [tables.row("attrs", e.attrs) for e in entries],
        "scales": [tables.row("scales", e.scales) for e in entries],
    }


def index_doc_v3(entries: list[IndexEntry], groups: dict[str, dict[str, Any]], mirrored: list[str]) -> dict[str, Any]:
    """A shot's index, version 3: the attribute ``layoutkit_shot_packed`` of the shot's
    packed array (fetched with the array's own metadata, not with the store's root), its
    rows' attributes and scales inline, the attributes of the shot's groups (``""``: the
    shot group itself) and the paths of the shot's arrays the packing does not carry
    (each a Zarr array at its own path)."""
    return {
        **_rows(LAYOUT_VERSION, entries),
        "attrs": [e.attrs for e in entries],
        "scales": [e.scales for e in entries],
        "groups": groups,
        "mirrored": mirrored,
    }


def index_names(doc: dict[str, Any]) -> list[str]:
    """The paths (relative to the shot) a shot's index holds, of either version."""
    return list(doc["names"]) if "names" in doc else list(doc.get("members", {}))


IndexRow = tuple[str, int, str, list[int], Any, dict[str, Any], list[list[str]]]


def index_rows(doc: dict[str, Any], layout: dict[str, Any]) -> Iterator[IndexRow]:
    """(name, start, dtype, shape, fill value, attrs, scales) of every dataset in a shot's
    index of either version; ``layout`` is the root's layout attribute (its tables). The
    attribute dicts are shared between rows: copy one before changing it."""
    if "names" not in doc:  # version 1: a dict per dataset
        for name, e in doc.get("members", {}).items():
            yield (name, e["start"], e["dtype"], e["shape"], e.get("fill_value"), e.get("attrs") or {},
                   e.get("scales") or [])
        return
    if doc.get("version", 2) >= 3:  # rows' attributes and scales inline
        yield from zip(doc["names"], doc["start"], doc["dtype"], doc["shape"], doc["fill_value"], doc["attrs"],
                       doc["scales"], strict=True)
        return
    attrs, scales = layout.get("attrs", []), layout.get("scales", [])
    yield from zip(doc["names"], doc["start"], doc["dtype"], doc["shape"], doc["fill_value"],
                   (attrs[i] for i in doc["attrs"]), (scales[i] for i in doc["scales"]), strict=True)


__all__ = ["ALIASES", "INDEX_ATTR", "LAYOUT_NAME", "LAYOUT_VERSION", "PACKED_ARRAY", "ROOT_INDEX_VERSION", "SHOTS_ARRAY",
           "IndexEntry", "IndexRow", "IndexTables", "Segment", "index_doc", "index_doc_v3", "index_names", "index_rows"]
