"""Dimension scales: which ones hold the same content, so a layout can store them once.

MDSplus exports and many archive writers give every signal its own copy of its time
base. :func:`~layoutkit.hdf5.scale_reads.read_scale_digests` reads each dimension scale
inside a shot once and fingerprints it (dtype, shape, SHA-256 of the values, attributes,
:func:`scale_digest`); that is the only step that reads data, and the pipeline runs it
before planning. :func:`duplicate_scales` is pure: from the fingerprints it maps every
scale that repeats an earlier one of the same shot to that earlier one. The paged HDF5
and signal-major layouts plan with it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from layoutkit.hdf5.model import ArrayInfo
from layoutkit.templates import compile_template

ScaleDigest = tuple[Any, ...]


def scale_digest(data: np.ndarray, attrs: dict[str, Any]) -> ScaleDigest:
    """A scale's fingerprint: dtype, shape, SHA-256 of its values and its attributes
    (what ``reorder`` and signal-major compare, and ``inspect`` counts)."""
    content = data.tobytes() if data.dtype.kind != "O" else repr(data.tolist()).encode()
    return (data.dtype.str, tuple(data.shape), hashlib.sha256(content).hexdigest(),
            tuple(sorted((k, repr(v)) for k, v in attrs.items())))


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


__all__ = ["ScaleDigest", "duplicate_scales", "scale_digest"]
