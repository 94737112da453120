"""The shot-packed Zarr layout (``convert --order shot-packed``): one shot's signals in one object.

For every shot group (``/shots/<SHOT>``, the part of the template up to ``{shot}``),
every dataset of fixed-size numbers inside it (signals and their time bases alike) is
flattened in C order and appended to one 1-D array per dtype,
``/shots/<SHOT>/_packed/<DTYPE>`` (``f4``, ``f8``, ``i2``, ``f4_be`` for big-endian...).
With Zarr v3 each such array is one shard (a few when a shot holds more than one task's
budget of one dtype), so a shot costs one GET per dtype, and one signal a ranged read
inside the shard. The shot group's attribute ``layoutkit_shot_packed`` is the index:

    {"version": 1, "members": {"signals/ip": {"array": "f4", "start": 0, "shape": [20110],
     "fill_value": 0.0, "attrs": {...}, "scales": [["timebases/t_10khz"]]}, ...}}

``start`` counts elements of the packed array; ``scales`` are the dimension scales of
each axis, relative to the shot when inside it, absolute otherwise. The index rides in
the consolidated metadata, so opening the store is the one request that reads it.
Everything else (datasets outside shot groups, text, compounds, scalars) is mirrored
at its own path as ``convert --order shot`` writes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

LAYOUT_NAME = "shot-packed"
LAYOUT_VERSION = 1
INDEX_ATTR = "layoutkit_shot_packed"
PACKED_GROUP = "_packed"


def packed_name(dtype: np.dtype) -> str:
    """The packed array's name for a dtype: ``f4``, ``i2``, ``b1``, ``f8_be``..."""
    text = np.dtype(dtype).str
    return text[1:] + ("_be" if text[0] == ">" else "")


@dataclass(frozen=True)
class Segment:
    """One source dataset's place in a packed array (in elements)."""

    source: str
    start: int
    size: int


def assemble_flat(reader: Any, segments: tuple[Segment, ...], dtype: np.dtype, region: Any) -> np.ndarray:
    """The block ``region`` (``((lo, hi),)``) of a packed array: the flattened parts of the
    source datasets that fall in it, each read as whole rows of its first axis."""
    (lo, hi), = region
    out = np.empty(hi - lo, dtype=dtype)
    reads = []
    for seg in segments:
        a, b = max(lo, seg.start), min(hi, seg.start + seg.size)
        if a >= b:
            continue
        info = reader.arrays[seg.source]
        row = math.prod(info.shape[1:])
        first, last = (a - seg.start) // row, -(-(b - seg.start) // row)
        reads.append((seg, a, b, first, ((first, last), *((0, n) for n in info.shape[1:]))))
    reader.prefetch([(seg.source, rows) for seg, _, _, _, rows in reads])
    for seg, a, b, first, rows in reads:
        row = math.prod(reader.arrays[seg.source].shape[1:])
        flat = np.asarray(reader.read(seg.source, rows)).reshape(-1)
        skip = a - seg.start - first * row
        out[a - lo : b - lo] = flat[skip : skip + (b - a)]
    return out


__all__ = ["INDEX_ATTR", "LAYOUT_NAME", "LAYOUT_VERSION", "PACKED_GROUP", "Segment", "assemble_flat", "packed_name"]
