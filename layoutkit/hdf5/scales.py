"""Dimension scales: which ones hold the same content, so a layout can store them once.

MDSplus exports and many archive writers give every signal its own copy of its time
base. :func:`read_scale_digests` reads each dimension scale inside a shot once and
fingerprints it (dtype, shape, SHA-256 of the values, attributes); this is the only
step that reads data, and the pipeline runs it before planning. :func:`duplicate_scales`
is pure: from the fingerprints it maps every scale that repeats an earlier one of the
same shot to that earlier one. The paged HDF5 and signal-major layouts both use it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from layoutkit.hdf5.inventory import ArrayInfo, Inventory
from layoutkit.hdf5.source import SourceReader, can_read_raw, open_reader
from layoutkit.plan import compile_template

ScaleDigest = tuple[Any, ...]


def scale_digest(data: np.ndarray, attrs: dict[str, Any]) -> ScaleDigest:
    """A scale's fingerprint: dtype, shape, SHA-256 of its values and its attributes
    (what ``reorder`` and signal-major compare, and ``inspect`` counts)."""
    content = data.tobytes() if data.dtype.kind != "O" else repr(data.tolist()).encode()
    return (data.dtype.str, tuple(data.shape), hashlib.sha256(content).hexdigest(),
            tuple(sorted((k, repr(v)) for k, v in attrs.items())))


def _candidates(inventory: Inventory, template: str) -> list[ArrayInfo]:
    _, prefix = compile_template(template)
    return [
        a for a in inventory.arrays
        if a.is_scale and not a.null_space and a.shape and can_read_raw(a) and prefix.match(a.path)
    ]


def read_scale_digests(
    source: str | os.PathLike, inventory: Inventory, template: str, reader: SourceReader | None = None
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


def duplicate_scales(arrays: Iterable[ArrayInfo], digests: dict[str, ScaleDigest], template: str) -> dict[str, str]:
    """Within each shot, map every scale among ``arrays`` whose fingerprint equals an
    earlier one's to that earlier one (in the order of ``arrays``)."""
    _, prefix = compile_template(template)
    seen: dict[tuple[str, ScaleDigest], str] = {}
    dupes: dict[str, str] = {}
    for info in arrays:
        digest = digests.get(info.path)
        m = prefix.match(info.path)
        if digest is None or m is None:
            continue
        key = (m.group("shot"), digest)
        if key in seen:
            dupes[info.path] = seen[key]
        else:
            seen[key] = info.path
    return dupes


def find_duplicate_scales(source: str | os.PathLike, inventory: Inventory, template: str) -> dict[str, str]:
    """:func:`read_scale_digests` then :func:`duplicate_scales` over the whole inventory."""
    return duplicate_scales(inventory.arrays, read_scale_digests(source, inventory, template), template)


__all__ = ["ScaleDigest", "scale_digest", "duplicate_scales", "find_duplicate_scales", "read_scale_digests"]
