"""Planning shot-packed Zarr (pure): each shot's packed array, its segments and its index.

The bytes of every dataset of fixed-size numbers inside a shot group go, end to end,
into the shot's one packed byte array (:mod:`layoutkit.layouts.shot_packed.spec`
describes the layout and the index); everything else is mirrored at its own path, as
a shot-major store holds it. Each task writes whole shards (or chunks) of a packed
array, assembled from whole rows of the datasets that fall in them, so memory stays
within the budget however large a shot is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from layoutkit.errors import InvalidOptionError, UnsupportedFeatureError
from layoutkit.formats import LAYOUT_ATTR, json_attrs
from layoutkit.hdf5.model import ArrayInfo, GroupInfo, Inventory
from layoutkit.layouts.shot_packed.spec import (
    INDEX_ATTR,
    LAYOUT_NAME,
    LAYOUT_VERSION,
    PACKED_ARRAY,
    ROOT_INDEX_VERSION,
    SHOTS_ARRAY,
    IndexEntry,
    IndexTables,
    Segment,
    index_doc,
    index_doc_v3,
)
from layoutkit.plan import ArrayPlan, CopyTask, names_plan, plan_tasks, task_budget
from layoutkit.templates import compile_template, natural_key
from layoutkit.zarr_options import ConvertOptions
from layoutkit.zarr_plan import packable, plan_arrays

# inner chunks of a packed array: small enough that one signal's ranged read fetches
# little more than the signal, large enough that a shot is a few hundred of them at most
PACKED_CHUNK_MAX = 256 * 1024


@dataclass(frozen=True)
class PackedShot:
    """One shot's packed byte array (its store path) and the datasets in it, in order."""

    shot: str
    group: str
    array: str
    segments: tuple[Segment, ...]
    index: dict[str, Any] | None = None  # version 3: the index, an attribute of the packed array


@dataclass(frozen=True)
class ShotPackedPlan:
    """The whole shot-packed conversion; ``arrays`` and ``tasks`` as in a ConvertPlan."""

    source: str
    dest: str
    options: ConvertOptions
    arrays: tuple[ArrayPlan, ...]  # mirrored arrays (source paths), then packed ones (store paths)
    skipped: tuple[tuple[str, str], ...]
    tasks: tuple[CopyTask, ...]
    task_bytes: int
    shots: tuple[PackedShot, ...]
    groups: tuple[GroupInfo, ...]  # every group written (version 2: the shot groups carrying their index)
    layout: dict[str, Any]
    shot_names: tuple[str, ...] = ()  # version 3: every shot, for the root-level shot list

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)


def _fill_json(info: ArrayInfo) -> Any:
    if info.fill_value is None:
        return None
    value = np.asarray(info.fill_value, dtype=info.dtype).reshape(-1)[0].item()
    # JSON: NaN and infinities as strings, a complex value as [real, imaginary]
    return json_attrs({"v": [value.real, value.imag] if isinstance(value, complex) else value})["v"]


def plan_shot_packed(inventory: Inventory, options: ConvertOptions, dest: str = "") -> ShotPackedPlan:
    """Plan the shot-packed store from the inventory (pure).

    Raises
    ------
    InvalidOptionError
        The file is not a shot archive under ``options.template``, or the options cannot
        make this layout.
    UnsupportedFeatureError
        A dataset cannot be carried (as in ``convert``), a shot holds a group the layout
        reserves (``_packed``), or a dataset's dimension scale lies in another shot.
    """
    if options.compressor.name == "source":
        raise InvalidOptionError(
            "Expected a compressor for --layout shot-packed, which packs many datasets into one array and so "
            "re-encodes them; --compressor source copies chunks and needs --layout shot-major. Got --compressor source."
        )
    template = "/" + options.template.strip("/")
    full, prefix = compile_template(template)
    arrays = [a for a in inventory.arrays if not a.dim_only]
    if not any(full.match(a.path) for a in arrays):
        examples = ", ".join(a.path for a in arrays[:6]) or "(no datasets)"
        raise InvalidOptionError(
            f"--layout shot-packed needs a shot archive, and the template {template!r} matches no dataset in "
            f"{inventory.path!r}; it has {len(arrays)} datasets, e.g. {examples}. Convert other files with "
            "--order shot."
        )
    budget = task_budget(options.memory_limit, options.workers)
    plans, skipped = plan_arrays(arrays, options, budget)
    mirrored: list[ArrayPlan] = []
    by_shot: dict[str, list[tuple[str, ArrayInfo]]] = {}
    for info, plan in zip(arrays, plans):
        if plan is None:
            continue
        m = prefix.match(info.path)
        if m is not None and info.path[m.end():].split("/")[0] == PACKED_ARRAY:
            raise UnsupportedFeatureError(info.path, f"a path named {PACKED_ARRAY!r} in a shot, where the "
                                          "shot-packed layout keeps its packed bytes", "convert it with --layout shot-major.")
        if m is not None and packable(info):
            by_shot.setdefault(m.group("shot"), []).append((info.path[m.end():], info))
        else:
            mirrored.append(plan)
    groups = {g.path: g for g in inventory.groups}
    if SHOTS_ARRAY in {p.path.strip("/") for p in mirrored} | {g.path.strip("/") for g in inventory.groups}:
        raise UnsupportedFeatureError(f"/{SHOTS_ARRAY}", "a path the shot-packed layout keeps its list of shots at",
                                      "convert it with --layout shot-major.")
    v3 = options.zarr_format == 3
    in_shot = _in_shot(prefix, groups.values(), mirrored) if v3 else {}
    shots, packed_plans, tables = _plan_shots(by_shot, in_shot, groups, prefix, options, budget)
    root = groups.get("/")
    if root is not None and LAYOUT_ATTR in root.attrs:
        raise UnsupportedFeatureError("/", f"a root attribute named {LAYOUT_ATTR!r}, which the layout uses")
    layout = {"name": LAYOUT_NAME, "version": LAYOUT_VERSION if v3 else ROOT_INDEX_VERSION, "order": "shot-packed",
              "template": template, "packed": PACKED_ARRAY}
    names = [s.shot for s in shots]
    if v3:
        layout |= {"shots": SHOTS_ARRAY, "signals": _signal_names(full, shots, mirrored)}
        packed_plans.append(names_plan(f"/{SHOTS_ARRAY}", len(names), options.compressor))
    else:
        layout |= tables.as_layout()
    tasks = plan_tasks([*mirrored, *(p for p in packed_plans if p.read_mode != "index")], budget)
    return ShotPackedPlan(
        source=str(inventory.path), dest=dest, options=options, arrays=(*mirrored, *packed_plans),
        skipped=tuple(skipped), tasks=tasks, task_bytes=budget, shots=tuple(shots),
        groups=_written_groups(groups, shots, mirrored) if v3 else tuple(groups.values()), layout=layout,
        shot_names=tuple(names) if v3 else (),
    )


def _written_groups(groups: dict[str, GroupInfo], shots: list[PackedShot], mirrored: list[ArrayPlan]) -> tuple[GroupInfo, ...]:
    """Version 3: the groups written as Zarr nodes. A group inside a shot without
    attributes that holds packed datasets only (``signals``, ``timebases``) is implied by
    the shot's index, as in signal-major: not written, one object per shot fewer (a
    quarter of a small shot's objects and of the PUTs writing it)."""
    def parents(path: str) -> set[str]:
        return {path.rsplit("/", i)[0] for i in range(1, path.count("/"))}

    kept = {q for a in mirrored for q in parents(a.path)}
    implied = {q for s in shots for seg in s.segments for q in parents(seg.source) if q.startswith(s.group + "/")}
    implied -= kept
    return tuple(g for path, g in groups.items() if g.attrs or path not in implied)


def _plan_shots(by_shot: dict[str, list[tuple[str, ArrayInfo]]], in_shot: dict[str, Any], groups: dict[str, GroupInfo],
                prefix: Any, options: ConvertOptions, budget: int) -> tuple[list[PackedShot], list[ArrayPlan], IndexTables]:
    """Each shot's packed array and index (version 2: the index an attribute of the shot
    group, its rows' attributes and scales rows of ``tables``; ``groups`` updated)."""
    v3 = options.zarr_format == 3
    shots, packed_plans, tables = [], [], IndexTables()
    # version 3: every shot has its packed array, which carries its index (empty when the
    # shot's datasets are all unpacked), so a reader finds any shot at its path
    for shot in sorted(by_shot.keys() | in_shot.keys(), key=natural_key):
        members = sorted(by_shot.get(shot, []), key=lambda m: natural_key(m[0]))
        shot_path = members[0][1].path[: -len(members[0][0]) - 1] if members else in_shot[shot][0]
        entries, segments, start = _pack(members, prefix, shot)
        path = f"{shot_path}/{PACKED_ARRAY}"
        packed_plans.append(_packed_plan(path, start, options, budget))
        group = groups.get(shot_path, GroupInfo(shot_path, {}))
        if INDEX_ATTR in group.attrs:
            raise UnsupportedFeatureError(shot_path, f"an attribute named {INDEX_ATTR!r}, which the layout uses")
        if v3:
            _, own_groups, own_arrays = in_shot.get(shot, (shot_path, {}, []))
            index = index_doc_v3(entries, {_rel(g, shot_path): json_attrs(dict(a)) for g, a in own_groups.items()},
                                 [_rel(a, shot_path) for a in own_arrays])
            shots.append(PackedShot(shot, shot_path, path, tuple(segments), index))
        else:
            groups[shot_path] = replace(group, attrs={**group.attrs, INDEX_ATTR: index_doc(entries, tables)})
            shots.append(PackedShot(shot, shot_path, path, tuple(segments)))
    return shots, packed_plans, tables


def _pack(members: list[tuple[str, ArrayInfo]], prefix: Any, shot: str) -> tuple[list[IndexEntry], list[Segment], int]:
    """A shot's datasets end to end: their index entries, their segments, the bytes."""
    entries, segments, start = [], [], 0
    for rel, info in members:
        size = math.prod(info.shape) * info.dtype.itemsize
        segments.append(Segment(info.path, start, size))
        entries.append(IndexEntry(rel, start, info.dtype.str, list(info.shape), _fill_json(info),
                                  json_attrs(dict(info.attrs)), _scale_refs(info, prefix, shot)))
        start += size
    return entries, segments, start


def _rel(path: str, shot_path: str) -> str:
    return "" if path == shot_path else path[len(shot_path) + 1:]


def _in_shot(prefix: Any, groups: Any, mirrored: list[ArrayPlan]) -> dict[str, tuple[str, dict[str, Any], list[str]]]:
    """Per shot: its path, its groups that have attributes (path -> attributes) and the
    paths of its arrays the packing does not carry: what a version-3 index lists."""
    out: dict[str, tuple[str, dict[str, Any], list[str]]] = {}
    for g in groups:
        m = prefix.match(g.path + "/")
        if m is not None:
            entry = out.setdefault(m.group("shot"), (m.group(0).rstrip("/"), {}, []))
            if g.attrs:
                entry[1][g.path] = g.attrs
    for a in mirrored:
        m = prefix.match(a.path)
        if m is not None:
            out.setdefault(m.group("shot"), (m.group(0).rstrip("/"), {}, []))[2].append(a.path)
    return out


def _signal_names(full: Any, shots: list[PackedShot], mirrored: list[ArrayPlan]) -> list[str]:
    """Every signal name of the archive (the template's ``{signal}``), packed or not."""
    names = set()
    for path in [a.path for a in mirrored] + [seg.source for s in shots for seg in s.segments]:
        m = full.match(path)
        if m is not None:
            names.add(m.group("signal"))
    return sorted(names, key=natural_key)


def _scale_refs(info: ArrayInfo, prefix: Any, shot: str) -> list[list[str]]:
    out = []
    for axis in info.dim_scales:
        refs = []
        for scale in axis:
            m = prefix.match(scale)
            if m is None:
                refs.append(scale)  # outside every shot: mirrored, referenced by its path
            elif m.group("shot") != shot:
                raise UnsupportedFeatureError(info.path, f"a dimension scale in another shot ({scale})",
                                              "convert it with --layout shot-major.")
            else:
                refs.append(scale[m.end():])
        out.append(refs)
    return out


def _packed_plan(path: str, size: int, options: ConvertOptions, budget: int) -> ArrayPlan:
    """One shard per shot (a few when the shot is larger than a task may hold), of inner
    chunks of at most 256 KiB; unsharded (Zarr v2), chunks of ``--chunk-size``."""
    if options.zarr_format == 3:
        chunks = (max(1, min(options.chunk_bytes, PACKED_CHUNK_MAX, size)),)
        per_shard = max(1, budget // chunks[0])
        shards = (chunks[0] * min(per_shard, -(-size // chunks[0])),) if size > chunks[0] else None
    else:
        chunks, shards = (max(1, min(size, options.chunk_bytes)),), None
    return ArrayPlan(path=path, shape=(size,), dtype="|u1", itemsize=1, chunks=chunks, shards=shards,
                     compressor=options.compressor, read_mode="pack" if size else "none", nbytes=size)


def plan(inventory: Inventory, options: ConvertOptions, scale_digests: dict[str, Any], dest: str = "") -> ShotPackedPlan:
    """The layout's planner (:meth:`layoutkit.layout.Layout.plan`)."""
    return plan_shot_packed(inventory, options, dest)


__all__ = ["PackedShot", "ShotPackedPlan", "plan", "plan_shot_packed"]
