"""The shot-packed Zarr layout (``convert --order shot-packed``): one shot's signals in one object.

For every shot group (``/shots/<SHOT>``, the part of the template up to ``{shot}``),
the bytes of every dataset of fixed-size numbers inside it (signals and their time bases
alike, each flattened in C order, in its own dtype and byte order) are packed end to end
into one byte array, ``/shots/<SHOT>/_packed`` (uint8). With Zarr v3 that array is one
shard (a few when a shot holds more than one task's budget), so a whole shot is one GET,
and one signal a ranged read inside the shard. The shot group's attribute
``layoutkit_shot_packed`` is the index:

    {"version": 1, "members": {"signals/ip": {"start": 0, "dtype": "<f4", "shape": [20110],
     "fill_value": 0.0, "attrs": {...}, "scales": [["timebases/t_10khz"]]}, ...}}

``start`` is the dataset's first byte in ``_packed``; it spans ``prod(shape) x itemsize``
bytes. ``scales`` are the dimension scales of each axis, relative to the shot when inside
it, absolute otherwise. The index rides in the consolidated metadata, so opening the
store is the one request that reads it. Everything else (datasets outside shot groups,
text, compounds, scalars) is mirrored at its own path as ``convert --order shot`` writes
it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

LAYOUT_NAME = "shot-packed"
LAYOUT_VERSION = 1
INDEX_ATTR = "layoutkit_shot_packed"
PACKED_ARRAY = "_packed"


@dataclass(frozen=True)
class Segment:
    """One source dataset's bytes in its shot's packed array."""

    source: str
    start: int  # first byte
    size: int  # bytes


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


__all__ = ["INDEX_ATTR", "LAYOUT_NAME", "LAYOUT_VERSION", "PACKED_ARRAY", "Segment", "assemble_bytes"]
