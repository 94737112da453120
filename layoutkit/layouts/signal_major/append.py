"""Appending shots to a signal-major store (version 2): every series grows in place.

The new shots are packed by a run of their own (a staged store). Each of its parts whose
shots are alike a part of the store's series (the same scales, type, shape past the
first axis, fill value and common attributes: what makes a run put shots in one part)
joins that part: the part's data array and its index arrays grow (:mod:`layoutkit.appending.grow`).
The data's new rows start at its next chunk (shard) boundary, so no object of it is
written again (the rows before the boundary stay unwritten, no shot's: the spec's
appended stores), the new starts shifted to it; the index arrays take their rows right
after their last (their last chunk written again, a few kB). A staged
part alike none (a dtype the store never had) joins as a new part under a suffix the
series does not use yet (``data_3``, ``shot_3``...), its objects renamed into place, its
metadata's dimension names given the new suffix; a series the store lacked is added
whole; the scales a new shot repeats are a new ``same_as`` pair
(:func:`~layoutkit.layouts.signal_major.spec.same_as_parts`). Each new shot's own
document points at its rows. The root-level lists (``/_shots``, ``/_mirrored``) are
written again under new names, and the root document names them and gives the grown
arrays' shapes: it is written last, so a reader sees the old store or the new one (rows
past an array's old shape are no part of it). The series groups' and grown arrays' own
documents (copies of what the root lists) follow it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from layoutkit.errors import StoreReadError
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
from layoutkit.merging import (
    Merge,
    StoreDocs,
    copy_rows,
    grown,
    join_list,
    merged_sidecar,
    natural,
    new_chunk_keys,
    next_boundary,
    shot_keys,
    shots_in,
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
    grows: list[_Growth] = []
    renames = _join_series(nodes, new_nodes, out, grows)  # series group -> {"rows" | "same_as": {staged suffix: suffix}}
    skipped = {(g.group, g.kind, g.staged) for g in grows}
    for key in keys:
        if "/" not in key or key.split("/", 1)[0] in {SHOTS_ARRAY, MIRRORED_ARRAY}:
            continue  # the root's documents and lists: merged below
        group = next((g for g in renames if key.startswith(g + "/")), None)
        if group is not None:
            _move_array_object(key, group, renames[group], new, nodes, out, skipped)
    sources = {series["source"]: g for g, node in nodes.items() if (series := _series(node)) is not None}
    offsets = {(g.group, g.staged): g.rows_before for g in grows if g.kind == "rows"}
    for key in shot_keys(keys, options.template, shots):
        if key.endswith("/zarr.json") and SHOT_ATTR in (shot_doc := new.json(key)).get("attributes", {}):
            rows = shot_doc["attributes"][SHOT_ATTR].get("rows", {})
            for source, row in rows.items():
                group = sources[source]
                row[1] += offsets.get((group, row[0]), 0)
                row[0] = renames[group]["rows"][row[0]]
            out.documents[key] = json.dumps(shot_doc).encode()
        else:
            out.moves[key] = key
    if grows:
        _grow_parts(grows, nodes, new_nodes, new, old, out)
    for group, node in new_nodes.items():  # groups the store lacked (a new series' parents)
        if _series(node) is None and group not in nodes and node.get("node_type") == "group":
            nodes[group] = node
            out.documents[f"{group}/zarr.json"] = json.dumps(node).encode()
    _join_lists(old, new, root, staged, out)
    out.documents[SIDECAR] = json.dumps(merged_sidecar(old.json(SIDECAR), new.json(SIDECAR)), indent=2).encode()
    return out


def _series(node: dict[str, Any]) -> dict[str, Any] | None:
    return (node.get("attributes") or {}).get(SERIES_ATTR)


@dataclass(frozen=True)
class _Growth:
    """A staged part whose shots join a part of the store (same type, shape past the
    first axis, fill value, scales and attributes): its arrays grow, no part is added."""

    group: str
    staged: str  # the staged part's suffix
    suffix: str  # the store's part's suffix
    rows_before: int  # the new rows' first: the store's data rows, up to the next chunk (or shard) boundary
    arrays: tuple[str, ...]  # the part's arrays, by their names less the suffix (DATA first, when a data part)

    @property
    def kind(self) -> str:
        return "same_as" if SAME_AS in self.arrays else "rows"


def _join_series(nodes: dict[str, Any], new_nodes: dict[str, Any], out: Merge,
                 grows: list[_Growth]) -> dict[str, dict[str, dict[str, str]]]:
    """Add the staged store's series to the store's: a new series whole; the parts of a
    known one grown into the part they are alike (``grows``), or added under new
    suffixes. Returns each series' suffix renames."""
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
        if have is None:
            raise StoreReadError(f"{group} in the store is not a signal-major series, and the new shots' is: "
                                 "the store was changed by something else than layoutkit.")
        same = have["same_as"]
        taken = {p["suffix"] for p in have["parts"]} | {p["suffix"] for p in same_as_parts(same)}
        rows: dict[str, str] = {}
        for part in doc["parts"]:
            alike = _alike(group, part, have["parts"], nodes, new_nodes)
            if alike is not None:
                rows[part["suffix"]] = alike["suffix"]
                grows.append(_Growth(group, part["suffix"], alike["suffix"],
                                     next_boundary(nodes[f"{group}/{DATA}{alike['suffix']}"]),
                                     (DATA, SHOT, START, LENGTH, *((ATTRS,) if alike.get("attrs") else ()))))
                alike["shots"] = int(alike["shots"]) + int(part["shots"])
                continue
            rows[part["suffix"]] = suffix = _free(taken)
            have["parts"].append({**part, "suffix": suffix})
        same_rows: dict[str, str] = {}
        if doc["same_as"].get("shots"):
            added = int(doc["same_as"]["shots"])
            kept = [p for p in same_as_parts(same) if p["shots"]]
            last = kept[-1]["suffix"] if kept else None
            if last is not None and all(
                    nodes.get(f"{group}/{a}{last}", {}).get("data_type") == new_nodes[f"{group}/{a}"]["data_type"]
                    for a in (SAME_AS_SHOT, SAME_AS)):  # the last pair grows
                same_rows[""] = last
                grows.append(_Growth(group, "", last, 0, (SAME_AS_SHOT, SAME_AS)))
                kept[-1] = {**kept[-1], "shots": int(kept[-1]["shots"]) + added}
            else:
                same_rows[""] = suffix = _free(taken)
                kept.append({"suffix": suffix, "shots": added})
            if len(kept) > 1 or kept[0]["suffix"]:
                same["parts"] = kept
            same["shots"] = int(same.get("shots", 0)) + added
            same["sources"] = natural([*same.get("sources", []), *doc["same_as"].get("sources", [])])
        renames[group] = {"rows": rows, "same_as": same_rows}
        out.after[f"{group}/zarr.json"] = json.dumps(mine).encode()
    return renames


def _alike(group: str, part: dict[str, Any], parts: list[dict[str, Any]], nodes: dict[str, Any],
           new_nodes: dict[str, Any]) -> dict[str, Any] | None:
    """The store's part that the staged ``part``'s shots can join: the same scales, type,
    shape past the first axis, fill value, common attributes and index types."""
    def kind(meta: dict[str, Any]) -> tuple[Any, ...]:
        return meta["data_type"], meta["shape"][1:], meta.get("fill_value"), meta.get("attributes")

    theirs = new_nodes[f"{group}/{DATA}{part['suffix']}"], new_nodes[f"{group}/{SHOT}{part['suffix']}"]
    for p in parts:
        mine = nodes.get(f"{group}/{DATA}{p['suffix']}"), nodes.get(f"{group}/{SHOT}{p['suffix']}")
        if (mine[0] is not None and mine[1] is not None and p["dims"] == part["dims"]
                and bool(p.get("attrs")) == bool(part.get("attrs")) and kind(mine[0]) == kind(theirs[0])
                and mine[1]["data_type"] == theirs[1]["data_type"]):
            return p
    return None


def _grow_parts(grows: list[_Growth], nodes: dict[str, Any], new_nodes: dict[str, Any], new: StoreDocs,
                old: StoreDocs, out: Merge) -> None:
    """The grown parts: their arrays' new shapes in the root (and after it in their own
    documents), the chunks they gain, and the writing of the new rows (the staged data
    and index rows, starts shifted past the store's rows), run before the root."""
    arrays = []
    for g in grows:
        for base in g.arrays:
            key, staged = f"{g.group}/{base}{g.suffix}", f"{g.group}/{base}{g.staged}"
            meta = nodes[key]
            rows = int(new_nodes[staged]["shape"][0])  # the staged root lists the series' arrays
            at = g.rows_before if base == DATA else None  # the data from a boundary: no shard of it written again
            nodes[key] = grown(meta, rows, at)
            out.after[f"{key}/zarr.json"] = json.dumps(nodes[key]).encode()
            out.added += new_chunk_keys(key, meta, rows, at)
            arrays.append((key, meta, staged, g.rows_before if base == START else None, at))

    def write() -> int:
        items = [(staged, key, meta, (lambda v, shift=shift: v + shift) if shift else None, at)
                 for key, meta, staged, shift, at in arrays]
        return copy_rows(new.zarr_store(), old.zarr_store(), items)

    out.write = write


def _free(taken: set[str]) -> str:
    n = 1
    while f"_{n}" in taken:
        n += 1
    taken.add(f"_{n}")
    return f"_{n}"


def _move_array_object(key: str, group: str, renames: dict[str, dict[str, str]], new: StoreDocs,
                       nodes: dict[str, Any], out: Merge, grown_parts: set[tuple[str, str, str]]) -> None:
    """One object of a staged series array, under its array's new name (metadata with
    the new suffix in its dimension names; chunks as they are); none of a part whose
    rows join a part of the store (written by :func:`_grow_parts`)."""
    name, _, rest = key[len(group) + 1:].partition("/")
    if not rest:
        return  # the series group's own document: joined already
    base = next(b for b in _ARRAYS if name.startswith(b) and _SUFFIX.match(name[len(b):]))
    old_suffix = name[len(base):]
    if (group, "same_as" if base in (SAME_AS, SAME_AS_SHOT) else "rows", old_suffix) in grown_parts:
        return
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
