"""Appending shots to a shot-packed store (version 3): each new shot's packed array (its
shards and its index) is added at its path; the root-level list of shots is written
again under a new name (``/_shots_aN``), which the new root document names, so that a
reader holding the old root still reads the old list."""

from __future__ import annotations

import json
from typing import Any

from layoutkit.append import (
    Merge,
    StoreDocs,
    array_keys,
    merged_sidecar,
    natural,
    next_name,
    read_list,
    shot_keys,
    shots_in,
    text_list,
)
from layoutkit.formats import LAYOUT_ATTR, NODES_ATTR, SIDECAR
from layoutkit.layouts.shot_packed.spec import SHOTS_ARRAY


def merge(old: StoreDocs, new: StoreDocs, options: Any) -> Merge:
    keys = new.keys()
    shots = shots_in(keys, options.template)
    root, staged = old.json("zarr.json"), new.json("zarr.json")
    attrs, added = root["attributes"], staged["attributes"]
    layout, nodes = attrs[LAYOUT_ATTR], attrs[NODES_ATTR]
    listed = layout.get("shots", SHOTS_ARRAY)
    name = next_name(SHOTS_ARRAY, set(nodes))
    before = nodes.pop(listed)
    meta, objects = text_list(name, natural([*read_list(old, listed, before), *shots]), before)
    nodes[name] = meta
    layout["shots"] = name
    layout["signals"] = natural([*layout.get("signals", []), *added[LAYOUT_ATTR].get("signals", [])])
    sidecar = merged_sidecar(old.json(SIDECAR), new.json(SIDECAR))
    return Merge(moves={k: k for k in shot_keys(keys, options.template, shots)},
                 documents={**objects, SIDECAR: json.dumps(sidecar, indent=2).encode()}, root=root,
                 garbage=array_keys(listed, before))


__all__ = ["merge"]
