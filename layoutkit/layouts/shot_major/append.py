"""Appending shots to a shot-major store: the new shots' nodes are objects of their own,
added at their paths; the root document's consolidated metadata lists them too."""

from __future__ import annotations

import json
from typing import Any

from layoutkit.merging import Merge, StoreDocs, merged_sidecar, shot_keys, shots_in
from layoutkit.formats import SIDECAR
from layoutkit.hdf5.combined import shot_of


def merge(old: StoreDocs, new: StoreDocs, options: Any) -> Merge:
    keys = new.keys()
    shots = shots_in(keys, options.template)
    shot = shot_of(options.template)
    root, staged = old.json("zarr.json"), new.json("zarr.json")
    listed = (root.get("consolidated_metadata") or {}).get("metadata")
    if listed is not None:
        added = (staged.get("consolidated_metadata") or {}).get("metadata") or {}
        listed.update({k: v for k, v in added.items() if shot("/" + k) in shots})
    sidecar = merged_sidecar(old.json(SIDECAR), new.json(SIDECAR))
    return Merge(moves={k: k for k in shot_keys(keys, options.template, shots)},
                 documents={SIDECAR: json.dumps(sidecar, indent=2).encode()}, root=root)


__all__ = ["merge"]
