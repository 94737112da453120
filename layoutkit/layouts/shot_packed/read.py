"""The reader of shot-packed Zarr: every signal of a shot packed into one array, with an
index of segments (:mod:`layoutkit.layouts.shot_packed.spec`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import xarray as xr

from layoutkit.formats import LAYOUT_ATTR
from layoutkit.layouts.shot_packed.spec import INDEX_ATTR as SHOT_INDEX_ATTR
from layoutkit.layouts.shot_packed.spec import LAYOUT_NAME, PACKED_ARRAY, SHOTS_ARRAY, index_names, index_rows
from layoutkit.layouts.shot_packed.spec import LAYOUT_VERSION as SHOT_PACKED_VERSION
from layoutkit.readers.base import NotAnArchiveError, Selection, bytes_back, plain_attrs, selections
from layoutkit.readers.packed import PackedArchive
from layoutkit.readers.zarr_ import AHEAD_SHOTS, tree_of
from layoutkit.templates import compile_template, match_template, natural_key

WHOLE_READ_BYTES = 4 * 1024**2  # a shot's packed array this small is read whole: one GET, not two
INDEX_AHEAD = 64  # version 3: shots whose indexes iter_shots fetches at once
VIEW_SHARE = 0.9  # rows that use this much of a decoded packed array are views of it, not copies


def _values(raw: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Packed bytes as the dataset's values (a copy: aligned, and the caller's to keep)."""
    return raw.copy().view(dtype).reshape(shape)


def _view(raw: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Packed bytes as the dataset's values without a copy when they are aligned for the
    dtype (a copy otherwise, as :func:`_values`)."""
    if raw.ctypes.data % dtype.alignment:
        return _values(raw, dtype, shape)
    return raw.view(dtype).reshape(shape)


@dataclass(frozen=True)
class _Segment:
    """Where one shot's dataset lies in its shot's packed array (its bytes, flattened)."""

    data: str  # the packed array
    start: int  # first byte
    length: int  # bytes
    attrs: dict[str, Any]
    dims: tuple[tuple[str, ...], ...]  # per axis, the scales (relative to the shot, or absolute)
    shape: tuple[int, ...]
    fill_value: Any
    dtype: np.dtype


class _ShotIndex(Mapping):
    """Shot -> path relative to the shot -> :class:`_Segment`; a shot's entries are parsed
    when it is first read, so opening a store of thousands of shots does not parse them
    all (0.05 s for 7,000, measured).

    Versions 1 and 2: the shot groups' index attributes, which came with the consolidated
    metadata (``docs``), and the root layout attribute's tables. Version 3 (``archive``
    given): the shots listed by the root-level ``_shots`` array, each shot's index the
    attribute of its packed array, fetched with that array's metadata when the shot is
    first read (:meth:`load` fetches several at once)."""

    def __init__(self, docs: dict[str, tuple[str, dict[str, Any]]], layout: dict[str, Any],
                 archive: Any = None) -> None:
        self._docs = docs  # shot -> (its group, its index attribute)
        self._layout = layout  # the root's layout attribute: the tables of version 2
        self._parsed: dict[str, dict[str, _Segment]] = {}
        self._archive = archive  # version 3: where the shots' indexes are fetched from
        self._shots: list[str] | None = None
        self._absent: set[str] = set()  # version 3: shots looked for and not found

    @property
    def shots(self) -> list[str]:
        if self._shots is None:
            if self._archive is None:
                self._shots = list(self._docs)
            else:
                listed = self._archive.get(f"/{self._layout.get('shots', SHOTS_ARRAY)}")
                self._shots = [str(s) for s in listed]
        return self._shots

    def load(self, shots: list[str]) -> None:
        """Fetch the indexes of ``shots`` not read yet, at once (version 3), with the
        metadata of the arrays each shot keeps unpacked. A shot is found by its path, not
        looked up in the shot list first: reading one shot costs no read of that list."""
        if self._archive is None:
            return
        archive, packed = self._archive, self._layout.get("packed", PACKED_ARRAY)
        wanted = [s for s in dict.fromkeys(shots) if s not in self._docs and s not in self._absent]
        if not wanted:
            return
        paths = {s: f"{archive.shot_path(s)}/{packed}" for s in wanted}
        archive.load_nodes(list(paths.values()))
        unpacked: dict[str, dict[str, Any]] = {}
        for shot, path in paths.items():
            node = archive.node(path)
            doc = dict(node.attributes).get(SHOT_INDEX_ATTR) if node is not None else None
            if doc is None:
                self._absent.add(shot)
                continue
            self._docs[shot] = (archive.shot_path(shot), doc)
            unpacked |= {f"{archive.shot_path(shot)}/{rel}": node for rel, node in (doc.get("mirrored") or {}).items()}
        archive.adopt_nodes(unpacked)

    def doc(self, shot: str) -> dict[str, Any] | None:
        """A shot's index document, fetched if need be (None: no such shot)."""
        self.load([shot])
        found = self._docs.get(shot)
        return found[1] if found else None

    def __getitem__(self, shot: str) -> dict[str, _Segment]:
        if shot not in self._parsed:
            self.load([shot])
            group, doc = self._docs[shot]
            data = f"{group}/{self._layout.get('packed', PACKED_ARRAY)}"
            segments = {}
            for rel, start, dtype, shape, fill, attrs, scales in index_rows(doc, self._layout):
                dt = np.dtype(dtype)
                segments[rel] = _Segment(data, int(start), math.prod(shape) * dt.itemsize, dict(attrs),
                                         tuple(tuple(axis) for axis in scales), tuple(shape), fill, dt)
            self._parsed[shot] = segments
        return self._parsed[shot]

    def __contains__(self, shot: object) -> bool:
        if self._archive is None or not isinstance(shot, str):
            return shot in self._docs
        return self.doc(shot) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.shots)

    def __len__(self) -> int:
        return len(self.shots)

    def members(self) -> Iterator[tuple[str, str]]:
        """(shot, path relative to the shot) of every packed dataset, without parsing
        (every shot's index fetched first, in version 3)."""
        self.load(self.shots)
        return ((shot, rel) for shot, (_, doc) in self._docs.items() for rel in index_names(doc))


class ShotPackedArchive(PackedArchive):
    """A shot-packed Zarr store from ``convert --layout shot-packed``: the bytes of each
    shot's numeric datasets packed into one array (:mod:`layoutkit.layouts.shot_packed.write`
    has the layout).

    The index is the shot groups' attributes, which come with the consolidated metadata,
    so ``shot`` reads the shot's packed array once (one shard) and a single signal is the
    small shard, or a ranged read inside a large one. Source paths work in ``get``; datasets the
    packing does not carry are mirrored at their paths and read as in a shot-major store.
    """

    layout = LAYOUT_NAME
    hidden_attrs = PackedArchive.hidden_attrs | {SHOT_INDEX_ATTR}

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # the parameters of ZarrArchive
        super().__init__(*args, **kwargs)
        meta = self.root.attrs.get(LAYOUT_ATTR) or {}
        if int(meta.get("version", 0)) > SHOT_PACKED_VERSION:
            raise NotAnArchiveError(
                f"{self.path} holds version {meta.get('version')} of the shot-packed layout; this layoutkit "
                f"reads version {SHOT_PACKED_VERSION} and older."
            )
        self._set_template(meta.get("template", self.template))
        self._full, self._prefix = compile_template(self.template)
        self._meta = meta
        if int(meta.get("version", 0)) >= 3:  # each shot's index with its packed array
            self._segments = _ShotIndex({}, meta, archive=self)
        else:  # every shot's index in the consolidated metadata
            docs = {}
            for group, node in self._nodes.items():
                doc = None if hasattr(node, "shape") else node.attributes.get(SHOT_INDEX_ATTR)
                m = self._prefix.match(group + "/") if doc else None
                if doc and m is not None:
                    docs[m.group("shot")] = (group, doc)
            self._segments = _ShotIndex(docs, meta)  # shot -> path relative to the shot -> segment
        self._tree: dict[str, set[str]] | None = None

    def locate(self, path: str) -> _Segment | None:
        m = self._prefix.match(path)
        if m is None or m.group("shot") not in self._segments:
            return None
        return self._segments[m.group("shot")].get(path[m.end():])

    def group_attrs(self, path: str) -> dict[str, Any]:
        m = self._prefix.match(path.rstrip("/") + "/")
        if m is not None and self._meta.get("version", 0) >= 3:  # a shot's groups: in its index
            doc = self._segments.doc(m.group("shot"))
            rel = path.rstrip("/")[len(self.shot_path(m.group("shot"))) + 1:]
            return bytes_back(plain_attrs(dict((doc or {}).get("groups", {}).get(rel, {})), self.hidden_attrs))
        return super().group_attrs(path)

    def virtual_tree(self) -> dict[str, set[str]]:
        if self._tree is None:
            self._tree = tree_of(f"{self.shot_path(shot)}/{rel}" for shot, rel in self._segments.members())
        return self._tree

    def _every_shot(self) -> None:
        """Version 3: every shot's index fetched (a request per shot, all at once), for
        what needs the whole archive (listing every array, a full scan, a signal's every shot)."""
        self._segments.load(self._segments.shots)

    def exists(self, path: str) -> bool:
        m = self._prefix.match(path.rstrip("/") + "/")
        if m is None or self._meta.get("version", 0) < 3:
            return super().exists(path)
        shot = m.group("shot")  # version 3: the shot's own index says, no other shot's
        doc = self._segments.doc(shot)
        if doc is None:
            return False
        rel = path.rstrip("/")[len(self.shot_path(shot)) + 1:]
        names = [*index_names(doc), *doc.get("mirrored", ())]
        return not rel or rel in names or rel in doc.get("groups", {}) or any(n.startswith(rel + "/") for n in names)

    def children(self, group: str) -> list[str]:
        return [c for c in super().children(group) if c != PACKED_ARRAY]

    @cached_property
    def _listing(self) -> tuple[list[str], list[str]]:
        if self._meta.get("version", 0) >= 3:  # one read of the shot list; the signals in the root
            return list(self._segments.shots), list(self._meta.get("signals", []))
        shots = {shot for shot, _ in self._mirrored_signals.values()}
        signals = {sig for _, sig in self._mirrored_signals.values()}
        if self.template.index("{signal}") > self.template.index("{shot}"):
            # the signal is in the path relative to the shot: each relative path is matched
            # once, not once per shot (9,470 paths of 100 shots took 18 ms of every open)
            by_rel: dict[str, str | None] = {}
            for shot, rel in self._segments.members():
                if rel not in by_rel:
                    m = self._full.match(f"{self.shot_path(shot)}/{rel}")
                    by_rel[rel] = m.group("signal") if m else None
                if by_rel[rel] is not None:
                    shots.add(shot)
            signals |= {sig for sig in by_rel.values() if sig is not None}
        else:
            paths = [f"{self.shot_path(shot)}/{rel}" for shot, rel in self._segments.members()]
            packed = match_template(paths, self.template)
            shots |= {shot for shot, _ in packed.values()}
            signals |= {sig for _, sig in packed.values()}
        return sorted(shots, key=natural_key), sorted(signals, key=natural_key)

    @property
    def signals(self) -> list[str]:
        if self._meta.get("version", 0) >= 3:  # the root lists them: no read of the shot list
            return list(self._meta.get("signals", []))
        return super().signals

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The source's datasets: the mirrored ones and the packed ones, by source path."""
        self._every_shot()
        packed = {seg.data for members in self._segments.values() for seg in members.values()}
        out = {p: v for p, v in super().arrays().items() if p not in packed}
        for shot, members in self._segments.items():
            for rel, seg in members.items():
                out[f"{self.shot_path(shot)}/{rel}"] = (seg.shape, seg.dtype)
        return out

    def blocks(self) -> list[tuple[str, Selection]]:
        """Every stored array's shards or chunks (the packed arrays by their own paths)."""
        self._every_shot()
        out: list[tuple[str, Selection]] = []
        for p in sorted(p for p in self._nodes if self._is_stored_array(p)):
            a = self.zarr_array(p)
            out.extend((p, sel) for sel in selections(tuple(a.shape), tuple(a.shards or a.chunks)))
        return out

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        if not self._is_stored_array(path) and (m := self._prefix.match(path)):
            self._segments.load([m.group("shot")])  # version 3: its index lists its stored arrays
        if self._is_stored_array(path):
            return super().get(path, selection)
        seg = self.locate(path)
        if seg is None:
            raise KeyError(f"{path} is not in {self.path}")
        a = self.zarr_array(seg.data)
        row = math.prod(seg.shape[1:]) * seg.dtype.itemsize
        first = selection[0] if selection else slice(None)
        if isinstance(first, slice) and first.indices(seg.shape[0])[2] == 1:
            lo, hi, _ = first.indices(seg.shape[0])
            hi = max(lo, hi)
            raw = np.asarray(a[seg.start + lo * row : seg.start + hi * row])
            return _values(raw, seg.dtype, (hi - lo, *seg.shape[1:]))[(slice(None), *selection[1:])]
        return _values(np.asarray(a[seg.start : seg.start + seg.length]), seg.dtype, seg.shape)[selection]

    def _read_rows(self, rows: list[_Segment]) -> list[np.ndarray]:
        """The values of several datasets, all read at once: a packed array whole (one GET
        of its shard) when it is small or they need half of it, else each dataset's own
        range (the shard index, then the range)."""
        ahead = getattr(self._local, "ahead", {})
        if all((r.data, r.start, r.length) in ahead for r in rows):
            return [ahead[(r.data, r.start, r.length)] for r in rows]
        users = self._spans(rows)
        out: list[Any] = [None] * len(rows)
        # a span's rows are copied out as it arrives, and the span let go: one decoded
        # packed array held at a time, not a signal's hundreds of shots (8 threads reading
        # signals of 100 shots held 0.8 GB). Rows that take most of their span (a whole
        # shot) are views of it instead, where aligned: the span is all theirs anyway.
        blocks = self._iter_many([(p, (slice(lo, hi),)) for p, lo, hi in users])
        for (_, lo, hi), block, wanted in zip(users, blocks, users.values()):
            keep = sum(rows[n].length for n in wanted) >= VIEW_SHARE * (hi - lo)
            for n in wanted:
                r = rows[n]
                part = block[r.start - lo : r.start - lo + r.length]
                out[n] = _view(part, r.dtype, r.shape) if keep else _values(part, r.dtype, r.shape)
        return out

    def _spans(self, rows: list[_Segment]) -> dict[tuple[str, int, int], list[int]]:
        """What reading ``rows`` fetches: span ``(packed array, first byte, end)`` -> the
        rows cut from it. A packed array is read whole when small or half needed."""
        wanted: dict[str, int] = {}
        for r in rows:
            wanted[r.data] = wanted.get(r.data, 0) + r.length
        sizes = {data: self._nodes[data].shape[0] for data in wanted}
        whole = {data for data, size in sizes.items() if size <= WHOLE_READ_BYTES or 2 * wanted[data] >= size}
        users: dict[tuple[str, int, int], list[int]] = {}
        for n, r in enumerate(rows):
            span = (r.data, 0, sizes[r.data]) if r.data in whole else (r.data, r.start, r.start + r.length)
            users.setdefault(span, []).append(n)
        return users

    def _rows_of(self, paths: list[str]) -> dict[tuple[str, int, int], _Segment]:
        """The packed rows that datasets need: their own and their time bases'."""
        rows = {}
        for p in paths:
            seg = self.locate(p)
            if seg is None:
                continue
            rows[(seg.data, seg.start, seg.length)] = seg
            shot = self.shot_of(p)
            for axis in seg.dims:
                if axis and (scale := self.locate(self.scale_source(shot, axis[0]))) is not None:
                    rows[(scale.data, scale.start, scale.length)] = scale
        return rows

    def _shot_reads(self, shot: str) -> list[tuple[str, Any]]:
        """The shot's packed array (or the ranges of it its datasets need)."""
        rows = list(self._rows_of(self._shot_paths(shot)[1]).values())
        return [(p, (slice(lo, hi),)) for p, lo, hi in self._spans(rows)]

    def _variables(self, paths: Iterable[str], lazy: bool = False) -> list[xr.DataArray]:
        """As signal-major's, but the datasets and their time bases, which share the
        shot's packed arrays, are read together: each packed array once (``lazy`` too: a
        row is bytes, its type known only once it is read)."""
        wanted = list(paths)
        rows = self._rows_of(wanted)
        self._local.ahead = dict(zip(rows, self._read_rows(list(rows.values()))))
        try:
            return super()._variables(wanted)
        finally:
            self._local.ahead = {}

    def iter_shots(self, shots: Iterable[str | int]) -> Iterator[tuple[str, xr.DataTree]]:
        """As :meth:`ZarrArchive.iter_shots`; in version 3 the shots' indexes are fetched
        :data:`INDEX_AHEAD` at a time, ahead of the shots fetched ahead."""
        names = [str(s) for s in shots]
        loaded = min(INDEX_AHEAD, len(names))
        self._segments.load(names[:loaded])
        for n, item in enumerate(super().iter_shots(names)):
            if loaded < len(names) and n + 1 + AHEAD_SHOTS >= loaded:
                self._segments.load(names[loaded : loaded + INDEX_AHEAD])
                loaded += INDEX_AHEAD
            yield item

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        self._every_shot()  # a signal of every shot: every shot's index, at once
        shots = [shot for shot in self.shots if self.exists(self.path_of(shot, signal))]
        arrays = self._variables([self.path_of(shot, signal) for shot in shots])
        return {shot: a.rename(signal) for shot, a in zip(shots, arrays)}


def open_archive(location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int | None = None,
                 root: Any = None) -> ShotPackedArchive:
    """The reader of a store of this layout (:meth:`layoutkit.layout.Layout.open`)."""
    return ShotPackedArchive(location, template, model, sleep, root=root)


__all__ = ["open_archive", "INDEX_AHEAD", "VIEW_SHARE", "WHOLE_READ_BYTES", "ShotPackedArchive"]
