"""Appending shots to a signal-major store (version 2): every series grows by a new part.

The new shots are packed by a run of their own (a staged store); each of its parts joins
the store's series under a suffix the series does not use yet (``data_3``, ``shot_3``,
``start_3``, ``length_3``...), the same way a run writes shots that differ in dtype as
parts, so no array of the store is rewritten: its objects are renamed into place, their
metadata's dimension names given the new suffix. A series the store lacked is added
whole; the scales a new shot repeats are a new ``same_as`` pair
(:func:`~layoutkit.layouts.signal_major.spec.same_as_parts`). Each new shot's own
document points at its new parts. The root-level lists (``/_shots``, ``/_mirrored``)
are written again under new names, and the root document names them: it is written
last, with the series' new parts, so a reader sees the old store or the new one. The
series groups' own documents (copies of what the root lists) follow it.

Many appends make many parts: reading one signal of every shot is then a read per part
(cheap: parts are read together), and a ``convert`` of the store's sources into a new
store packs them into one again.
"""

from __future__ import annotations

import json
import re
from typing import Any

from layoutkit.append import Merge, StoreDocs, join_list, merged_sidecar, natural, shot_keys, shots_in
from layoutkit.formats import LAYOUT_ATTR, NODES_ATTR, SIDECAR
from layoutkit.layouts.signal_major.spec import (
    ATTRS,
    DATA,
    LENGTH,
    MIRRORED_ARRAY,
    SAME_AS,
    SAME_AS_SHOT,
    SERIES_ATTR,
    SHOT,
    SHOT_ATTR,
    SHOTS_ARRAY,
    START,
    same_as_parts,
)

# the arrays of a part, longest name first (``same_as_shot`` before ``shot``)
_ARRAYS = sorted((DATA, SHOT, START, LENGTH, ATTRS, SAME_AS, SAME_AS_SHOT), key=len, reverse=True)
_SUFFIX = re.compile(r"^(_\d+)?$")


def merge(old: StoreDocs, new: StoreDocs, options: Any) -> Merge:
    keys = new.keys()
    shots = shots_in(keys, options.template)
    root, staged = old.json("zarr.json"), new.json("zarr.json")
    attrs, added = root["attributes"], staged["attributes"]
    nodes, new_nodes = attrs[NODES_ATTR], added[NODES_ATTR]
    out = Merge(root=root)
    renames = _join_series(nodes, new_nodes, out)  # series group -> {"rows" | "same_as": {staged suffix: suffix}}
    for key in keys:
        if "/" not in key or key.split("/", 1)[0] in {SHOTS_ARRAY, MIRRORED_ARRAY}:
            continue  # the root's documents and lists: merged below
        group = next((g for g in renames if key.startswith(g + "/")), None)
        if group is not None:
            _move_array_object(key, group, renames[group], new, nodes, out)
    sources = {doc["source"]: g for g, node in nodes.items() if (doc := _series(node)) is not None}
    for key in shot_keys(keys, options.template, shots):
        if key.endswith("/zarr.json") and SHOT_ATTR in (doc := new.json(key)).get("attributes", {}):
            rows = doc["attributes"][SHOT_ATTR].get("rows", {})
            for source, row in rows.items():
                row[0] = renames[sources[source]]["rows"][row[0]]
            out.documents[key] = json.dumps(doc).encode()
        else:
            out.moves[key] = key
    for group, node in new_nodes.items():  # groups the store lacked (a new series' parents)
        if _series(node) is None and group not in nodes and node.get("node_type") == "group":
            nodes[group] = node
            out.documents[f"{group}/zarr.json"] = json.dumps(node).encode()
    _join_lists(old, new, root, staged, out)
    out.documents[SIDECAR] = json.dumps(merged_sidecar(old.json(SIDECAR), new.json(SIDECAR)), indent=2).encode()
    return out


def _series(node: dict[str, Any]) -> dict[str, Any] | None:
    return (node.get("attributes") or {}).get(SERIES_ATTR)


def _join_series(nodes: dict[str, Any], new_nodes: dict[str, Any], out: Merge) -> dict[str, dict[str, dict[str, str]]]:
    """Add the staged store's series to the store's: a new series whole, the parts of a
    known one under new suffixes. Returns each series' suffix renames."""
    renames: dict[str, dict[str, dict[str, str]]] = {}
    for group, node in new_nodes.items():
        doc = _series(node)
        if doc is None:
            continue
        mine = nodes.get(group)
        if mine is None:  # a series the store did not have: its names stay
            nodes[group] = node
            renames[group] = {"rows": {p["suffix"]: p["suffix"] for p in doc["parts"]},
                              "same_as": {p["suffix"]: p["suffix"] for p in same_as_parts(doc["same_as"])}}
            out.documents[f"{group}/zarr.json"] = json.dumps(node).encode()
            continue
        have = _series(mine)
        same = have["same_as"]
        taken = {p["suffix"] for p in have["parts"]} | {p["suffix"] for p in same_as_parts(same)}
        rows: dict[str, str] = {}
        for part in doc["parts"]:
            rows[part["suffix"]] = suffix = _free(taken)
            have["parts"].append({**part, "suffix": suffix})
        same_rows: dict[str, str] = {}
        if doc["same_as"].get("shots"):
            same_rows[""] = suffix = _free(taken)
            same["parts"] = [p for p in same_as_parts(same) if p["shots"]] + [
                {"suffix": suffix, "shots": int(doc["same_as"]["shots"])}]
            same["shots"] = int(same.get("shots", 0)) + int(doc["same_as"]["shots"])
            same["sources"] = natural([*same.get("sources", []), *doc["same_as"].get("sources", [])])
        renames[group] = {"rows": rows, "same_as": same_rows}
        out.after[f"{group}/zarr.json"] = json.dumps(mine).encode()
    return renames


def _free(taken: set[str]) -> str:
    n = 1
    while f"_{n}" in taken:
        n += 1
    taken.add(f"_{n}")
    return f"_{n}"


def _move_array_object(key: str, group: str, renames: dict[str, dict[str, str]], new: StoreDocs,
                       nodes: dict[str, Any], out: Merge) -> None:
    """One object of a staged series array, under its array's new name (metadata with
    the new suffix in its dimension names; chunks as they are)."""
    name, _, rest = key[len(group) + 1:].partition("/")
    if not rest:
        return  # the series group's own document: joined already
    base = next(b for b in _ARRAYS if name.startswith(b) and _SUFFIX.match(name[len(b):]))
    old_suffix = name[len(base):]
    table = renames["same_as" if base in (SAME_AS, SAME_AS_SHOT) else "rows"]
    suffix = table.get(old_suffix, old_suffix)
    target = f"{group}/{base}{suffix}/{rest}"
    if rest != "zarr.json":
        out.moves[key] = target
        return
    meta = new.json(key)
    if suffix != old_suffix:
        meta["dimension_names"] = [_renamed(d, old_suffix, suffix) for d in meta.get("dimension_names") or []] or None
        if "sample_dimension" in (meta.get("attributes") or {}):
            meta["attributes"]["sample_dimension"] = _renamed(meta["attributes"]["sample_dimension"], old_suffix, suffix)
    nodes[f"{group}/{base}{suffix}"] = meta
    out.documents[target] = json.dumps(meta).encode()


def _renamed(dim: str | None, old: str, new: str) -> str | None:
    """A dimension name of a part, for the part's new suffix."""
    if dim is None:
        return None
    return (dim[: len(dim) - len(old)] if old and dim.endswith(old) else dim) + new


def _join_lists(old: StoreDocs, new: StoreDocs, root: dict[str, Any], staged: dict[str, Any], out: Merge) -> None:
    """The root-level lists (every shot; the nodes inside shots) written again under new
    names, and the root's layout attribute naming them, with the new signals."""
    join_list(old, new, root, staged, "shots", SHOTS_ARRAY, out)
    join_list(old, new, root, staged, "mirrored", MIRRORED_ARRAY, out)
    layout, theirs = root["attributes"][LAYOUT_ATTR], staged["attributes"][LAYOUT_ATTR]
    for field in ("signal_names", "unpacked_signals"):
        layout[field] = natural([*layout.get(field, []), *theirs.get(field, [])])


__all__ = ["merge"]
