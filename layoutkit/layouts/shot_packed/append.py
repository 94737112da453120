"""Appending shots to a shot-packed store (version 3): each new shot's packed array (its
shards and its index) is added at its path; the root-level list of shots is written
again under a new name (``/_shots_aN``), which the new root document names, so that a
reader holding the old root still reads the old list."""

from __future__ import annotations

import json
from typing import Any

from layoutkit.formats import LAYOUT_ATTR, SIDECAR
from layoutkit.layouts.shot_packed.spec import SHOTS_ARRAY
from layoutkit.merging import Merge, StoreDocs, join_list, merged_sidecar, natural, shot_keys, shots_in


def merge(old: StoreDocs, new: StoreDocs, options: Any) -> Merge:
    keys = new.keys()
    root, staged = old.json("zarr.json"), new.json("zarr.json")
    out = Merge(moves={k: k for k in shot_keys(keys, options.template, shots_in(keys, options.template))}, root=root)
    join_list(old, new, root, staged, "shots", SHOTS_ARRAY, out)
    layout = root["attributes"][LAYOUT_ATTR]
    layout["signals"] = natural([*layout.get("signals", []), *staged["attributes"][LAYOUT_ATTR].get("signals", [])])
    out.documents[SIDECAR] = json.dumps(merged_sidecar(old.json(SIDECAR), new.json(SIDECAR)), indent=2).encode()
    return out


__all__ = ["merge"]
