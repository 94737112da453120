"""The dimension scales' fingerprints, read from the source (the one step before
planning that reads data): each scale inside a shot once, through the raw reader.
What they decide is pure (:func:`~layoutkit.hdf5.scales.duplicate_scales`)."""

from __future__ import annotations

import numpy as np

from layoutkit.hdf5.filters import can_read_raw
from layoutkit.hdf5.model import ArrayInfo, Inventory
from layoutkit.hdf5.raw import RawReader, SetReader, open_reader
from layoutkit.hdf5.scales import ScaleDigest, duplicate_scales, scale_digest
from layoutkit.storage import AnySource
from layoutkit.templates import compile_template


def _candidates(inventory: Inventory, template: str) -> list[ArrayInfo]:
    _, prefix = compile_template(template)
    return [
        a for a in inventory.arrays
        if a.is_scale and not a.null_space and a.shape and can_read_raw(a) and prefix.match(a.path)
    ]


def read_scale_digests(
    source: AnySource, inventory: Inventory, template: str, reader: RawReader | SetReader | None = None
) -> dict[str, ScaleDigest]:
    """Fingerprint every dimension scale that lies inside a shot of ``template``.

    Returns
    -------
    dict
        Scale path -> (dtype, shape, SHA-256 of the values, attributes).
    """
    scales = _candidates(inventory, template)
    if not scales:
        return {}
    own = reader is None
    reader = reader or open_reader(source, {a.path: a for a in scales})
    try:
        out = {}
        for info in scales:
            data = np.ascontiguousarray(reader.read(info.path, tuple((0, s) for s in info.shape)))
            out[info.path] = scale_digest(data, dict(info.attrs))
        return out
    finally:
        if own:
            reader.close()


def find_duplicate_scales(source: AnySource, inventory: Inventory, template: str) -> dict[str, str]:
    """:func:`read_scale_digests` then :func:`duplicate_scales` over the whole inventory."""
    return duplicate_scales(inventory.arrays, read_scale_digests(source, inventory, template), template)


__all__ = ["find_duplicate_scales", "read_scale_digests"]
