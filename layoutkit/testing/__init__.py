"""Test tools for layoutkit and for third-party layouts, as zarr-python ships
``zarr.testing`` and xarray its backend test bases.

- :mod:`layoutkit.testing.conformance`: :class:`LayoutTests`, the conformance suite every
  layout runs (ours, generated per registered layout, and a third party's by subclassing),
  with the archives it builds in code. Needs pytest.
- :mod:`layoutkit.testing.s3`: real S3 endpoints on loopback, started by the test or the
  benchmark itself (:class:`S3Endpoint`: moto's server; :class:`SeaweedFS`: a faster one for
  benchmarks), and :class:`DelayProxy`, which adds a round trip's latency to every request.
- :mod:`layoutkit.testing.faults`: :class:`FaultyBucket`, a proxy that answers chosen
  requests with the faults object stores give (500, 503 SlowDown, resets, stalls).
- :mod:`layoutkit.testing.strategies`: hypothesis strategies of HDF5 files (every type,
  layout, filter, chunk index and attribute the fuzz tests draw). Needs hypothesis.

Each name below is imported on first use, so ``import layoutkit.testing`` needs neither
pytest nor hypothesis, and the S3 and fault tools work in a plain script.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "LayoutTests": "conformance",
    "Place": "conformance",
    "assert_same_reads": "conformance",
    "assert_same_values": "conformance",
    "build_edge_archive": "conformance",
    "BUCKET": "s3",
    "CREDENTIALS": "s3",
    "DelayProxy": "s3",
    "S3Endpoint": "s3",
    "SeaweedFS": "s3",
    "FAULTS": "faults",
    "FaultyBucket": "faults",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"layoutkit.testing.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'layoutkit.testing' has no attribute {name!r}")


__all__ = sorted(_WHERE)
