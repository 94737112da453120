"""Planning signal-major Zarr (pure): which datasets are packed into which series and parts.

Every dataset that matches the template and holds fixed-size numbers is packed with the
same signal of every other shot (:mod:`layoutkit.layouts.signal_major.write` describes the
layout); so is every dimension scale inside a shot, once per content within the shot
(:mod:`layoutkit.hdf5.scales`). Everything else (arrays outside the template, text or
compound signals, groups with attributes) is mirrored at its own path, as the
``zarr-mirror`` layout writes it, so nothing of the source is lost. Each task writes
whole shards (or chunks) of a packed array, assembled from the parts of the shots'
datasets that fall in them, so memory stays within the budget however large a signal is.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from layoutkit.errors import InvalidOptionError, UnsupportedFeatureError
from layoutkit.formats import LAYOUT_ATTR, json_attrs
from layoutkit.hdf5.model import ArrayInfo, GroupInfo, Inventory
from layoutkit.hdf5.scales import ScaleDigest, duplicate_scales
from layoutkit.layouts.signal_major.spec import (
    ATTRS,
    DATA,
    INDEX_CHUNK,
    LAYOUT_NAME,
    LAYOUT_VERSION,
    LENGTH,
    MIRRORED_ARRAY,
    PER_SHOT_ONLY_ATTRS,
    ROOT_INDEX_VERSION,
    SAME_AS,
    SAME_AS_SHOT,
    SAMPLE_DIM,
    SCALES_GROUP,
    SHOT,
    SHOTS_ARRAY,
    SIGNALS_GROUP,
    START,
    PackedPart,
    PackedRow,
    PackedSeries,
    same_as_rows,
)
from layoutkit.options import ChunkSpec, ShardSpec
from layoutkit.plan import (
    ArrayPlan,
    CopyTask,
    contiguous_base,
    names_plan,
    plan_chunks,
    plan_grid,
    plan_shards,
    plan_tasks,
    task_budget,
)
from layoutkit.templates import compile_template, match_template, natural_key
from layoutkit.zarr_options import ConvertOptions

# the shots of one signal end to end along the first axis


def packed_pieces(
    starts: Sequence[int], lengths: Sequence[int], lo: int, hi: int
) -> list[tuple[int, int, int, int]]:
    """The parts of rows ``[lo, hi)`` of a packed array that each shot supplies.

    Shot ``k`` occupies rows ``starts[k] : starts[k] + lengths[k]`` (``starts`` sorted,
    ranges disjoint). Returns ``(k, first, stop, at)``: rows ``first:stop`` of shot
    ``k``'s own array go to row ``at`` of the block that begins at ``lo``. Shots with
    no rows in the range, zero-length shots included, supply nothing.
    """
    out = []
    k = max(0, bisect.bisect_right(starts, lo) - 1)
    while k < len(starts) and starts[k] < hi:
        first = max(lo, starts[k])
        stop = min(hi, starts[k] + lengths[k])
        if stop > first:
            out.append((k, first - starts[k], stop - starts[k], first - lo))
        k += 1
    return out


PACKED_MIN_CHUNK_BYTES = 64 * 1024


def plan_packed_chunks(
    shape: Sequence[int],
    itemsize: int,
    lengths: Sequence[int],
    spec: ChunkSpec,
    target_bytes: int,
    sharded: bool,
) -> tuple[int, ...]:
    """Chunks of a packed array (all shots of one signal along the first axis).

    An explicit ``spec`` shape of the array's rank is applied as given. Otherwise, when
    sharding, a chunk holds about one shot's rows (the median), at least 64 KiB and at
    most ``target_bytes``: a shot's slice is then one or two chunks, read as one
    coalesced range of its shard. Unsharded, chunks grow to ``target_bytes`` so that
    a signal of every shot is a few objects.
    """
    shape = tuple(int(s) for s in shape)
    if spec.mode == "shape":
        return plan_chunks(shape, itemsize, None, spec, target_bytes)
    base = contiguous_base(shape, itemsize, target_bytes)
    if not sharded or base[1:] != shape[1:]:
        return plan_grid(shape, base, itemsize, target_bytes)
    row = max(1, math.prod(shape[1:]) * itemsize)
    median = int(sorted(lengths)[len(lengths) // 2]) if lengths else 1
    rows = max(median, -(-PACKED_MIN_CHUNK_BYTES // row))
    rows = min(rows, max(1, target_bytes // row), max(1, shape[0]))
    return (max(1, rows),) + shape[1:]
from layoutkit.zarr_plan import packable, plan_arrays

# -- the arrays of a series, described as source datasets (the writer creates them so)


def shot_ids(shots: list[str]) -> np.ndarray:
    """The ``shot`` index array: integers when every shot name is one, else text."""
    if all(s.isdigit() and str(int(s)) == s and int(s) < 2**63 for s in shots):
        return np.array([int(s) for s in shots], dtype="i8")
    return np.array(shots, dtype=object)


def _dim_names(part: PackedPart) -> tuple[str, ...]:
    names = [f"{SAMPLE_DIM}{part.suffix}"]
    for axis in range(1, 1 + len(part.trailing)):
        refs = part.dims[axis] if axis < len(part.dims) else ()
        base = (refs[0].rsplit("/", 1)[-1] if refs else f"dim_{axis}") + part.suffix
        name = base
        while name in names or name == f"{SHOT}{part.suffix}":
            name = f"{base}_{axis}"
        names.append(name)
    return tuple(names)


def _synthetic(path: str, shape: tuple[int, ...], dtype: np.dtype, kind: str, fill: Any,
               attrs: dict[str, Any], dims: tuple[str, ...]) -> ArrayInfo:
    return ArrayInfo(
        path=path, shape=shape, dtype=dtype, kind=kind, layout="contiguous", chunks=None, filters=(),
        fill_value=fill, attrs=attrs, dims=dims, dim_scales=((),) * len(shape), is_scale=False,
        storage_bytes=0,
    )


def packed_arrays(series: PackedSeries, version: int = LAYOUT_VERSION) -> list[ArrayInfo]:
    """The arrays of one series, described as if they were source datasets (so that
    :class:`ZarrWriter` creates them like any other); version 2 adds the per-shot
    attributes and the scales' ``same_as`` arrays."""
    out = []
    text = np.dtype("O")
    for part in series.parts:
        n = len(part.rows)
        instance = (f"{SHOT}{part.suffix}",)
        ids = shot_ids([r.shot for r in part.rows])
        out += [
            _synthetic(series.array(part, DATA), part.shape, part.dtype, part.kind, part.fill_value,
                       part.attrs, _dim_names(part)),
            _synthetic(series.array(part, SHOT), (n,), ids.dtype if ids.dtype != object else text,
                       "numeric" if ids.dtype != object else "string", None, {}, instance),
            _synthetic(series.array(part, START), (n,), np.dtype("i8"), "numeric", None, {}, instance),
            _synthetic(series.array(part, LENGTH), (n,), np.dtype("i8"), "numeric", None,
                       {"sample_dimension": f"{SAMPLE_DIM}{part.suffix}"}, instance),
        ]
        if version >= 2 and part.shot_attrs:
            out.append(_synthetic(series.array(part, ATTRS), (n,), text, "string", None, {}, instance))
    same = same_as_rows(series)
    if version >= 2 and same:
        ids = shot_ids([shot for shot, _ in same])
        out += [
            _synthetic(f"/{series.group}/{SAME_AS_SHOT}", (len(same),), ids.dtype if ids.dtype != object else text,
                       "numeric" if ids.dtype != object else "string", None, {}, (SAME_AS_SHOT,)),
            _synthetic(f"/{series.group}/{SAME_AS}", (len(same),), text, "string", None, {}, (SAME_AS_SHOT,)),
        ]
    return out


def index_values(series: PackedSeries, version: int = LAYOUT_VERSION) -> list[tuple[str, np.ndarray]]:
    """The values of every index array of a series: (store path, values)."""
    out = []
    for part in series.parts:
        out += [
            (series.array(part, SHOT), shot_ids([r.shot for r in part.rows])),
            (series.array(part, START), np.array(part.starts, dtype="i8")),
            (series.array(part, LENGTH), np.array(part.lengths, dtype="i8")),
        ]
        if version >= 2 and part.shot_attrs:
            rows = [json.dumps(json_attrs(part.shot_attrs[r.shot]), sort_keys=True) if r.shot in part.shot_attrs
                    else "" for r in part.rows]
            out.append((series.array(part, ATTRS), np.array(rows, dtype=object)))
    same = same_as_rows(series)
    if version >= 2 and same:
        out += [
            (f"/{series.group}/{SAME_AS_SHOT}", shot_ids([shot for shot, _ in same])),
            (f"/{series.group}/{SAME_AS}", np.array([other for _, other in same], dtype=object)),
        ]
    return out


@dataclass(frozen=True)
class SignalMajorPlan:
    """The whole signal-major conversion; ``arrays`` and ``tasks`` as in a ConvertPlan."""

    source: str
    dest: str
    options: ConvertOptions
    arrays: tuple[ArrayPlan, ...]  # mirrored arrays (source paths), then packed ones (store paths)
    skipped: tuple[tuple[str, str], ...]
    tasks: tuple[CopyTask, ...]
    task_bytes: int
    series: tuple[PackedSeries, ...]
    groups: tuple[GroupInfo, ...]  # source groups written (the root, and groups with attributes)
    layout: dict[str, Any]
    merged_scales: int
    shot_names: tuple[str, ...] = ()  # version 2: every shot, for /_shots
    in_shots: tuple[str, ...] = ()  # version 2: the mirrored arrays inside shots, for /_mirrored

    @property
    def version(self) -> int:
        return int(self.layout["version"])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)


def _refuse_non_archive(src: str, template: str, inventory: Inventory) -> None:
    paths = [a.path for a in inventory.arrays]
    examples = ", ".join(paths[:6]) or "(no datasets)"
    raise InvalidOptionError(
        f"--layout signal-major needs a shot archive, and the template {template!r} matches no dataset "
        f"in {src!r}; it has {len(paths)} datasets, e.g. {examples}. Signals must sit at paths "
        "that match the template; convert other files with --layout shot-major."
    )


def _common_attrs(rows: list[ArrayInfo]) -> dict[str, Any]:
    first = rows[0].attrs
    return {
        k: v for k, v in first.items()
        if k not in PER_SHOT_ONLY_ATTRS and all(k in r.attrs and _same(r.attrs[k], v) for r in rows[1:])
    }


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b  # NaN differs from itself: kept per shot, still exact


def _part_key(info: ArrayInfo, dims: tuple[tuple[str, ...], ...]) -> tuple[Any, ...]:
    fill = None if info.fill_value is None else np.asarray(info.fill_value, info.dtype).tobytes()
    return (info.dtype.str, info.shape[1:], fill, dims)


def _build_series(
    group: str, source: str, members: list[tuple[str, ArrayInfo, tuple[tuple[str, ...], ...]]],
    same_as: dict[str, tuple[str, ...]],
) -> PackedSeries:
    """Split a series' shots into parts of alike datasets and pack each part."""
    by_key: dict[tuple[Any, ...], list[tuple[str, ArrayInfo, tuple[tuple[str, ...], ...]]]] = {}
    for member in sorted(members, key=lambda m: natural_key(m[0])):
        by_key.setdefault(_part_key(member[1], member[2]), []).append(member)
    parts = []
    for n, rows in enumerate(by_key.values()):
        infos = [info for _, info, _ in rows]
        common = _common_attrs(infos)
        packed, start = [], 0
        for shot, info, _ in rows:
            packed.append(PackedRow(shot, info.path, start, info.shape[0]))
            start += info.shape[0]
        first = infos[0]
        parts.append(
            PackedPart(
                suffix=f"_{n}" if n else "",
                dtype=first.dtype,
                kind=first.kind,
                trailing=first.shape[1:],
                fill_value=first.fill_value,
                dims=rows[0][2],
                attrs=common,
                shot_attrs={
                    shot: extra for shot, info, _ in rows
                    if (extra := {k: v for k, v in info.attrs.items() if k not in common})
                },
                rows=tuple(packed),
            )
        )
    return PackedSeries(group, source, tuple(parts), same_as)


def _packed_plans(series: PackedSeries, options: ConvertOptions, budget: int, version: int) -> list[ArrayPlan]:
    target = min(options.chunk_bytes, budget)
    sharded = options.zarr_format == 3 and options.shards.mode != "none"
    plans = []
    for info in packed_arrays(series, version):
        is_data = info.path.rsplit("/", 1)[-1].startswith(DATA)
        itemsize = info.dtype.itemsize if info.kind != "string" else 16
        if is_data:
            part = next(p for p in series.parts if series.array(p, DATA) == info.path)
            chunks = plan_packed_chunks(info.shape, itemsize, part.lengths, options.chunks, target, sharded)
            shards = None
            if sharded:
                spec = ShardSpec(options.shards.mode, min(options.shards.target_bytes, budget))
                shards = plan_shards(info.shape, chunks, itemsize, spec)
        else:  # an index array: version 2 in chunks of INDEX_CHUNK rows (the series' bounds), however few its
            # rows: an append then writes its last chunk again and adds one only every INDEX_CHUNK shots
            chunks, shards = ((INDEX_CHUNK,) if version >= 2 else (max(1, info.shape[0]),)), None
        plans.append(
            ArrayPlan(
                path=info.path,
                shape=info.shape,
                dtype=str(info.dtype) if info.kind != "string" else "str",
                itemsize=itemsize,
                chunks=chunks,
                shards=shards,
                compressor=options.compressor,
                read_mode="pack" if is_data else "index",
                nbytes=math.prod(info.shape) * itemsize,
            )
        )
    return plans


def plan_signal_major(
    inventory: Inventory, options: ConvertOptions, scale_digests: dict[str, ScaleDigest], dest: str = ""
) -> SignalMajorPlan:
    """Plan the signal-major store from the inventory and the scales' fingerprints (pure).

    Raises
    ------
    InvalidOptionError
        The file is not a shot archive under ``options.template``, or it has paths the
        layout reserves (``/signals``, ``/scales``).
    UnsupportedFeatureError
        A dataset cannot be carried (as in ``convert``), or a signal's dimension scale
        lives in another shot.
    """
    template = _check_options(options)
    _, prefix = compile_template(template)
    src = inventory.path
    arrays = [a for a in inventory.arrays if not a.dim_only]
    signals = match_template([a.path for a in arrays], template)
    if not signals:
        _refuse_non_archive(str(src), template, inventory)
    budget = task_budget(options.memory_limit, options.workers)
    plans, skipped = plan_arrays(arrays, options, budget)
    packed_signals: dict[str, ArrayInfo] = {}
    packed_scales: dict[str, ArrayInfo] = {}
    mirrored: list[ArrayPlan] = []
    for info, plan in zip(arrays, plans):
        if plan is None:
            continue
        if info.path in signals and packable(info):
            packed_signals[info.path] = info
        elif info.is_scale and prefix.match(info.path) and packable(info):
            packed_scales[info.path] = info
        else:
            mirrored.append(plan)
    _check_reserved(mirrored, inventory)
    members, uses = _signal_members(signals, packed_signals, prefix)
    dupes = _keep_most_used(
        duplicate_scales(packed_scales.values(), scale_digests, template), packed_scales,
        lambda p: uses.get(_shot_and_rel(prefix, p)[1], 0),
    )
    same_as = _scale_members(packed_scales, dupes, prefix, members)
    series = [
        _build_series(group, rel, rows, {k: tuple(sorted(v, key=natural_key)) for k, v in same_as.get(rel, {}).items()})
        for (group, rel), rows in sorted(members.items())
        if group.startswith(SIGNALS_GROUP + "/") or rel in same_as or rows
    ]
    version = LAYOUT_VERSION if options.zarr_format == 3 else ROOT_INDEX_VERSION
    packed_plans = [p for s in series for p in _packed_plans(s, options, budget, version)]
    packed_sources = set(packed_signals) | set(packed_scales)
    implied = {p.rsplit("/", i)[0] or "/" for p in packed_sources for i in range(1, p.count("/") + 1)}
    groups = tuple(g for g in inventory.groups if g.path == "/" or g.attrs or g.path not in implied)
    _check_reserved_groups(groups)
    if "/" in {g.path for g in groups} and LAYOUT_ATTR in next(g for g in groups if g.path == "/").attrs:
        raise UnsupportedFeatureError("/", f"a root attribute named {LAYOUT_ATTR!r}, which the layout uses")
    tasks = plan_tasks([*mirrored, *(p for p in packed_plans if p.read_mode == "pack")], budget)
    layout = {"name": LAYOUT_NAME, "version": version, "order": "signal", "template": template,
              "signals": SIGNALS_GROUP, "scales": SCALES_GROUP}
    shot_names: list[str] = []
    in_shots: list[str] = []
    if version >= 2:  # the shot list and the arrays inside shots: root-level arrays, not the root's document
        shot_names, in_shots, more = _bounded_root(prefix, inventory, series, mirrored, groups, signals)
        layout |= more
        listed = [(SHOTS_ARRAY, shot_names)] + ([(MIRRORED_ARRAY, in_shots)] if in_shots else [])
        packed_plans += [names_plan(f"/{name}", len(values), options.compressor) for name, values in listed]
    return SignalMajorPlan(
        source=str(src), dest=dest, options=options, arrays=(*mirrored, *packed_plans),
        skipped=tuple(skipped), tasks=tasks, task_bytes=budget, series=tuple(series), groups=groups,
        layout=layout, merged_scales=len(dupes), shot_names=tuple(shot_names), in_shots=tuple(in_shots),
    )


def _bounded_root(prefix: Any, inventory: Inventory, series: list[PackedSeries], mirrored: list[ArrayPlan],
                  groups: tuple[GroupInfo, ...], signals: dict[str, tuple[str, str]],
                  ) -> tuple[list[str], list[str], dict[str, Any]]:
    """Version 2: every shot, the nodes inside shots (arrays, and groups with a trailing
    slash) and what the root's layout attribute adds: where the lists are, the index
    chunk, every signal's name and those stored unpacked in some shot."""
    shot_names = _every_shot(prefix, inventory, series)
    in_shots = sorted([a.path for a in mirrored if prefix.match(a.path)]
                      + [g.path + "/" for g in groups if prefix.match(g.path + "/")], key=natural_key)
    names = {s.group.rsplit("/", 1)[-1] for s in series
             if s.group.startswith(SIGNALS_GROUP + "/") and any(p.rows for p in s.parts)}
    unpacked = {sig for path, (_, sig) in signals.items() if path in {a.path for a in mirrored}}
    layout = {"shots": SHOTS_ARRAY, "index_chunk": INDEX_CHUNK, "signal_names": sorted(names | unpacked, key=natural_key),
              "unpacked_signals": sorted(unpacked, key=natural_key)}
    if in_shots:
        layout["mirrored"] = MIRRORED_ARRAY
    return shot_names, in_shots, layout


def _every_shot(prefix: Any, inventory: Inventory, series: list[PackedSeries]) -> list[str]:
    """Every shot of the archive, natural order: the shots of the packed rows, and those
    of the source's groups and arrays under the template's shot level."""
    shots = {r.shot for s in series for p in s.parts for r in p.rows}
    for path in [g.path + "/" for g in inventory.groups] + [a.path for a in inventory.arrays]:
        m = prefix.match(path)
        if m is not None:
            shots.add(m.group("shot"))
    return sorted(shots, key=natural_key)


def _check_options(options: ConvertOptions) -> str:
    """The template, once the options can make this layout."""
    if options.compressor.name == "source":
        raise InvalidOptionError(
            "Expected a compressor for --layout signal-major, which packs signals of many shots into one "
            "array and so re-encodes them; --compressor source copies chunks and needs --layout shot-major. "
            "Got --compressor source."
        )
    template = "/" + options.template.strip("/")
    if template.index("{shot}") > template.index("{signal}"):
        raise InvalidOptionError(
            f"--layout signal-major needs {{shot}} before {{signal}} in the template (the signals of a shot "
            f"lie under the shot). Got {template!r}."
        )
    return template


def _shot_and_rel(prefix: Any, path: str) -> tuple[str, str]:
    """(shot, path relative to the shot) of a path inside a shot."""
    m = prefix.match(path)
    assert m is not None
    return m.group("shot"), path[m.end():]


def _scale_refs(prefix: Any, info: ArrayInfo, shot: str) -> tuple[tuple[str, ...], ...]:
    """Per axis, the scales of a signal: relative to its shot, or absolute outside every shot."""
    out = []
    for axis in info.dim_scales:
        axis_refs = []
        for scale in axis:
            m = prefix.match(scale)
            if m is None:
                axis_refs.append(scale)  # outside every shot: mirrored, referenced by path
            elif m.group("shot") != shot:
                raise UnsupportedFeatureError(
                    info.path, f"a dimension scale in another shot ({scale})",
                    "convert it with --layout shot-major.",
                )
            else:
                axis_refs.append(scale[m.end():])
        out.append(tuple(axis_refs))
    return tuple(out)


Members = dict[tuple[str, str], list[tuple[str, ArrayInfo, tuple[tuple[str, ...], ...]]]]


def _signal_members(signals: dict[str, tuple[str, str]], packed: dict[str, ArrayInfo],
                    prefix: Any) -> tuple[Members, dict[str, int]]:
    """Each signal series' shots ((series group, path in the shot) -> (shot, dataset,
    scales)), and how many signals use each scale (by its path in the shot)."""
    members: Members = {}
    uses: dict[str, int] = {}
    for path, (shot, name) in signals.items():
        if path in packed:
            info = packed[path]
            dims = _scale_refs(prefix, info, shot)
            members.setdefault((f"{SIGNALS_GROUP}/{name}", _shot_and_rel(prefix, path)[1]), []).append((shot, info, dims))
            for rel in {r for axis in dims for r in axis}:
                uses[rel] = uses.get(rel, 0) + 1
    return members, uses


def _scale_members(packed: dict[str, ArrayInfo], dupes: dict[str, str], prefix: Any,
                   members: Members) -> dict[str, dict[str, list[str]]]:
    """Add each scale series' shots to ``members``; return, per scale series, the shots
    in which it repeats another scale of the shot (stored once, there)."""
    same_as: dict[str, dict[str, list[str]]] = {}
    for path, info in packed.items():
        shot, rel = _shot_and_rel(prefix, path)
        members.setdefault((f"{SCALES_GROUP}/{rel}", rel), [])
        if path in dupes:
            same_as.setdefault(rel, {}).setdefault(_shot_and_rel(prefix, dupes[path])[1], []).append(shot)
        else:
            members[(f"{SCALES_GROUP}/{rel}", rel)].append((shot, info, ((),) * len(info.shape)))
    return same_as


def _keep_most_used(dupes: dict[str, str], packed: dict[str, ArrayInfo], uses: Any) -> dict[str, str]:
    """Of each set of equal scales in a shot, keep the one most signals use (the shared
    time base rather than a signal's private copy of it); map the others to it."""
    sets: dict[str, list[str]] = {}
    for dup, kept in dupes.items():
        if dup in packed and kept in packed:
            sets.setdefault(kept, [kept]).append(dup)
    out = {}
    for members in sets.values():
        keep = max(members, key=lambda p: (uses(p), -members.index(p)))
        out.update({p: keep for p in members if p != keep})
    return out


def _reserved(path: str) -> bool:
    top = path.strip("/").split("/", 1)[0]
    return top in (SIGNALS_GROUP, SCALES_GROUP, SHOTS_ARRAY, MIRRORED_ARRAY)


def _check_reserved(mirrored: list[ArrayPlan], inventory: Inventory) -> None:
    for path in [p.path for p in mirrored] + [link.path for link in inventory.links]:
        if _reserved(path):
            raise UnsupportedFeatureError(
                path, f"a path under /{SIGNALS_GROUP}, /{SCALES_GROUP}, /{SHOTS_ARRAY} or /{MIRRORED_ARRAY}, where "
                "the signal-major layout keeps its packed arrays and their index", "convert it with --layout shot-major.",
            )


def _check_reserved_groups(groups: tuple[GroupInfo, ...]) -> None:
    for g in groups:
        if g.path != "/" and _reserved(g.path):
            raise UnsupportedFeatureError(
                g.path, f"a group under /{SIGNALS_GROUP}, /{SCALES_GROUP}, /{SHOTS_ARRAY} or /{MIRRORED_ARRAY}, where "
                "the signal-major layout keeps its packed arrays and their index", "convert it with --layout shot-major.",
            )


def plan(inventory: Inventory, options: ConvertOptions, scale_digests: dict[str, Any], dest: str = "") -> Any:
    """The layout's planner (:meth:`layoutkit.layout.Layout.plan`)."""
    return plan_signal_major(inventory, options, scale_digests, dest)


__all__ = ["SignalMajorPlan", "index_values", "packed_arrays", "plan", "plan_signal_major", "shot_ids"]
