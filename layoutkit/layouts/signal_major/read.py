"""The reader of signal-major Zarr: every shot of a signal packed into one array, with an
index of rows (:mod:`layoutkit.layouts.signal_major.spec`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import xarray as xr

from layoutkit.formats import LAYOUT_ATTR
from layoutkit.layouts.signal_major.spec import (
    ATTRS,
    DATA,
    INDEX_CHUNK,
    LAYOUT_NAME,
    LAYOUT_VERSION,
    LENGTH,
    MIRRORED_ARRAY,
    SAME_AS,
    SAME_AS_SHOT,
    SERIES_ATTR,
    SHOT,
    SHOT_ATTR,
    SHOTS_ARRAY,
    SIGNALS_GROUP,
    START,
    same_as_parts,
    series_rows,
    series_same_as,
)
from layoutkit.readers.base import (
    NotAnArchiveError,
    Selection,
    bytes_back,
    packed_dataset,
    plain_attrs,
)
from layoutkit.readers.packed import PackedArchive
from layoutkit.readers.zarr_ import tree_of
from layoutkit.templates import compile_template, match_template, natural_key


@dataclass(frozen=True)
class _Row:
    """Where one shot's dataset lies in a packed array."""

    data: str  # the packed array
    start: int
    length: int
    attrs: dict[str, Any]  # the attributes of this shot's dataset beyond the array's own
    dims: tuple[tuple[str, ...], ...]  # per axis, the scales (paths relative to the shot)


@dataclass
class _Series:
    group: str  # "/signals/ip", "/scales/timebases/t_1khz"
    rows: dict[str, _Row]  # shot -> row
    same_as: dict[str, str]  # shot -> the source path (relative to the shot) of an equal scale
    doc: dict[str, Any] | None = None  # version 2: the series attribute (its rows in the index arrays)
    loaded: set[tuple[str, int]] = field(default_factory=set)  # version 2: index chunks read
    complete: bool = True  # every row known (version 1 always; version 2 once every chunk is read)

    @property
    def index(self) -> dict[str, Any]:
        """Version 2's series attribute (:attr:`doc`), which version 1 does not have."""
        if self.doc is None:
            raise KeyError(f"{self.group}: a version-1 series has no index document")
        return self.doc


class SignalMajorArchive(PackedArchive):
    """A signal-major Zarr store from ``convert --layout signal-major``: every shot of a
    signal packed in one array (:mod:`layoutkit.layouts.signal_major.write` has the layout).

    Version 1: the per-shot index comes with the metadata (the series groups'
    attributes), so finding a shot costs no request. Version 2: the root holds no per-shot
    list; a signal's rows are its index arrays, read (with its time bases') in one round
    before its data, and a shot's rows are one chunk of each series' index arrays, read
    with the shot group's own document. ``signal`` reads each packed array once and slices
    it per shot, ``shot`` reads one slice of each signal's array (a partial shard read).
    Source paths (``/shots/<SHOT>/signals/<SIGNAL>``, or a scale's) work in ``get``
    as well as the stored arrays' paths; arrays the packing does not carry are mirrored
    at their source paths and read as in a shot-major store.
    """

    layout = LAYOUT_NAME
    hidden_attrs = PackedArchive.hidden_attrs | {SHOT_ATTR}
    element_rows = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # the parameters of ZarrArchive
        super().__init__(*args, **kwargs)
        meta = self.root.attrs.get(LAYOUT_ATTR) or {}
        if int(meta.get("version", 0)) > LAYOUT_VERSION:
            raise NotAnArchiveError(
                f"{self.path} holds version {meta.get('version')} of the signal-major layout; this layoutkit "
                f"reads version {LAYOUT_VERSION} and older."
            )
        self._meta = dict(meta)
        self._v2 = int(meta.get("version", 1)) >= 2
        self._set_template(meta.get("template", self.template))  # the store is packed by its own template
        _, self._prefix = compile_template(self.template)
        self._series: dict[str, _Series] = {}  # by source path relative to the shot
        self._signal_series: dict[str, _Series] = {}  # by signal name
        self._shot_docs: set[str] = set()  # version 2: shots whose own document was read
        for group, node in self._nodes.items():
            doc = None if hasattr(node, "shape") else dict(node.attributes).get(SERIES_ATTR)
            if not doc:
                continue
            series = _Series(group, {}, {}, doc, complete=False) if self._v2 else self._read_series(group, doc)
            self._series[doc["source"]] = series
            if group.startswith(f"/{SIGNALS_GROUP}/"):
                self._signal_series[group.rsplit("/", 1)[-1]] = series
        self._tree: dict[str, set[str]] | None = None
        self._lists: dict[str, list[str]] = {}  # version 2: the root-level lists read
        self._common: dict[str, tuple[dict[str, Any], tuple[tuple[str, ...], ...]]] = {}  # packed array -> attrs, dims
        self._shot_rows: dict[str, dict[str, list[Any]]] = {}  # version 2: each shot's own rows, as its document has them

    def _read_series(self, group: str, doc: dict[str, Any]) -> _Series:
        rows, common = {}, {}
        for row in series_rows(group, doc):
            if row.data not in common:
                common[row.data] = plain_attrs(dict(self._nodes[row.data].attributes), self.hidden_attrs)
            rows[row.shot] = _Row(row.data, row.start, row.length, {**common[row.data], **row.shot_attrs}, row.dims)
        return _Series(group, rows, series_same_as(doc))

    # -- version 2: the index read on demand -----------------------------------------

    def _list(self, name: str) -> list[str]:
        """A root-level list (``/_shots``, ``/_mirrored``): one read, then kept."""
        if name not in self._lists:
            self._lists[name] = [str(v) for v in super().get(f"/{name}")] if f"/{name}" in self._nodes else []
        return self._lists[name]

    def _index_reads(self, series: _Series) -> list[tuple[str, str, int, int, list[str]]]:
        """The index arrays of ``series`` not read yet, an :data:`INDEX_CHUNK` of rows at
        a time: ``(suffix, "rows" | "same_as", first row, end, [array paths])``."""
        chunk = int(self._meta.get("index_chunk", INDEX_CHUNK))
        doc, out = series.doc or {}, []
        groups = [(p["suffix"], "rows", int(p["shots"]), p.get("attrs")) for p in doc.get("parts", ())]
        groups += [(p["suffix"], "same_as", int(p["shots"]), False) for p in same_as_parts(doc.get("same_as", {}))]
        for suffix, kind, n, attrs in groups:
            if kind == "rows":
                names = [f"{SHOT}{suffix}", f"{START}{suffix}", f"{LENGTH}{suffix}"] + ([f"{ATTRS}{suffix}"] * bool(attrs))
            else:
                names = [f"{SAME_AS_SHOT}{suffix}", f"{SAME_AS}{suffix}"]
            for k in range(-(-n // chunk)):
                if (f"{kind}{suffix}", k) not in series.loaded:
                    out.append((suffix, kind, k * chunk, min(n, (k + 1) * chunk), [f"{series.group}/{a}" for a in names]))
        return out

    def _load_index(self, series: list[_Series]) -> None:
        """Read the whole index of ``series``, of every series at once: one round of
        requests (a GET per index array per :data:`INDEX_CHUNK` rows)."""
        todo = [(s, read) for s in series if not s.complete for read in self._index_reads(s)]
        reads = [(path, (slice(lo, hi),)) for _, (_, _, lo, hi, paths) in todo for path in paths]
        values = iter(self._read_many(reads) if reads else [])
        chunk = int(self._meta.get("index_chunk", INDEX_CHUNK))
        for s in {id(s): s for s, _ in todo}.values():  # the rows of shots read one by one: again, in index order
            s.rows.clear()
            s.same_as.clear()
        for s, (suffix, kind, lo, _, paths) in todo:
            got = [next(values) for _ in paths]
            ids = [str(v) for v in got[0]]
            if kind == "same_as":
                s.same_as.update(zip(ids, (str(v) for v in got[1])))
            else:
                extra = [json.loads(str(a)) if a else {} for a in got[3]] if len(got) > 3 else [{}] * len(ids)
                for i, shot_id in enumerate(ids):
                    s.rows[shot_id] = self._row(s, suffix, int(got[1][i]), int(got[2][i]), extra[i])
            s.loaded.add((f"{kind}{suffix}", lo // chunk))
        for s in series:
            s.complete = True

    def _row(self, series: _Series, suffix: str, start: int, length: int, extra: dict[str, Any]) -> _Row:
        """A version-2 row: the part's dims, its array's attributes and the shot's own."""
        data = f"{series.group}/{DATA}{suffix}"
        if data not in self._common:
            part = next(p for p in series.index["parts"] if p["suffix"] == suffix)
            self._common[data] = (plain_attrs(dict(self._nodes[data].attributes), self.hidden_attrs),
                                  tuple(tuple(axis) for axis in part["dims"]))
        common, dims = self._common[data]
        return _Row(data, start, length, {**common, **extra}, dims)

    def _load_shot_docs(self, shots: list[str], listed: bool = False) -> None:
        """Version 2: the shots' own documents (their groups and unpacked arrays), all at
        once; with ``listed``, only of the shots ``/_mirrored`` says have one (for many
        shots; for one, asking costs less than reading the list first)."""
        wanted = [s for s in dict.fromkeys(shots) if s not in self._shot_docs]
        if listed:
            having = {m.group("shot") for p in self._list(self._meta.get("mirrored", MIRRORED_ARRAY)) if (m := self._prefix.match(p))}
            wanted = [s for s in wanted if s in having]
        self._shot_docs |= set(wanted)
        if not wanted:
            return
        paths = {self.shot_path(s): s for s in wanted}
        docs = self.load_nodes(list(paths))
        # a shot group listed already (a store opened node by node): its attributes are its document
        docs |= {p: {"attributes": dict(self._nodes[p].attributes)} for p in paths
                 if p not in docs and p in self._nodes and not hasattr(self._nodes[p], "shape")}
        for path, doc in docs.items():
            inside = (doc.get("attributes") or {}).get(SHOT_ATTR) or {}
            nodes = {f"{path}/{rel}": {"node_type": "group", "attributes": attrs}
                     for rel, attrs in inside.get("groups", {}).items()}
            nodes |= {f"{path}/{rel}": node for rel, node in inside.get("mirrored", {}).items()}
            self.adopt_nodes(nodes)
            shot = paths.get(path) or paths["/" + path.strip("/")]
            self._shot_rows[shot] = inside.get("rows", {})
            for source, (suffix, start, length) in inside.get("rows", {}).items():
                if (series := self._series.get(source)) is not None and not series.complete:
                    extra = inside.get("attrs", {}).get(source, {})
                    series.rows[shot] = self._row(series, suffix, int(start), int(length), extra)
            for source, other in inside.get("same_as", {}).items():
                if (series := self._series.get(source)) is not None:
                    series.same_as[shot] = other

    def _prepare_shot(self, shot: str) -> None:
        """Version 2: a shot's own document (its row in every series): one GET."""
        if self._v2:
            self._load_shot_docs([shot])

    def _every_shot(self) -> None:
        """Version 2: the whole index and every shot's document, for what needs the whole
        archive (listing every array, a full scan, the comparison with the source)."""
        if self._v2:
            self._load_index(list(self._series.values()))
            self._load_shot_docs(self.shots, listed=True)

    # -- source paths -> packed rows -----------------------------------------------

    def locate(self, path: str) -> _Row | None:
        """The packed row holding the source dataset at ``path``, or None."""
        m = self._prefix.match(path)
        if m is None:
            return None
        shot, rel = m.group("shot"), path[m.end() :]
        series = self._series.get(rel)
        if series is None:
            return None
        if not series.complete:  # version 2: the shot's own document has its rows
            self._prepare_shot(shot)
        if shot in series.rows:
            return series.rows[shot]
        kept = self._series.get(series.same_as.get(shot, ""))  # a scale stored once per shot
        return kept.rows.get(shot) if kept else None

    def virtual_tree(self) -> dict[str, set[str]]:
        """Group -> member names of the source hierarchy the packed rows stand for."""
        if self._tree is None:
            self._every_shot()
            self._tree = tree_of(f"{self.shot_path(shot)}/{rel}" for rel, series in self._series.items()
                                  for shot in {*series.rows, *series.same_as})
        return self._tree

    @cached_property
    def _mirrored_signals(self) -> dict[str, tuple[str, str]]:
        if self._v2:  # the arrays inside shots, listed at the root (read only if a signal is among them)
            if not self._meta.get("unpacked_signals"):
                return {}
            return match_template([p for p in self._list(self._meta.get("mirrored", MIRRORED_ARRAY)) if not p.endswith("/")], self.template)
        return super()._mirrored_signals

    @property
    def signals(self) -> list[str]:
        if self._v2:  # listed in the root: no read of the shot list
            return list(self._meta.get("signal_names", []))
        return super().signals

    def group_attrs(self, path: str) -> dict[str, Any]:
        m = self._prefix.match(path.rstrip("/") + "/")
        if self._v2 and m is not None:
            self._load_shot_docs([m.group("shot")])
        return super().group_attrs(path)

    def exists(self, path: str) -> bool:
        m = self._prefix.match(path.rstrip("/") + "/")
        if not self._v2 or m is None:
            return super().exists(path)
        shot = m.group("shot")  # version 2: this shot's rows and document, not the whole archive
        self._load_shot_docs([shot])
        if path in self._nodes or self.locate(path) is not None:
            return True
        rel = path.rstrip("/")[len(self.shot_path(shot)) + 1:]
        inside = [src for src in self._series if not rel or src.startswith(rel + "/")]
        return any(self.locate(f"{self.shot_path(shot)}/{src}") is not None for src in inside) or (
            not rel and shot in self.shots)

    def shot(self, shot: str | int) -> xr.DataTree:
        self._prepare_shot(str(shot))
        return super().shot(shot)

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        self._every_shot()
        return super().arrays()

    @cached_property
    def _listing(self) -> tuple[list[str], list[str]]:
        if self._v2:  # one read of the shot list
            return self._list(self._meta.get("shots", SHOTS_ARRAY)), self.signals
        shots = {shot for s in self._signal_series.values() for shot in s.rows}
        signals = {name for name, s in self._signal_series.items() if s.rows}
        shots |= {shot for shot, _ in self._mirrored_signals.values()}
        signals |= {sig for _, sig in self._mirrored_signals.values()}
        return sorted(shots, key=natural_key), sorted(signals, key=natural_key)

    # -- reading ---------------------------------------------------------------------

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        if self._v2 and not self._is_stored_array(path) and (m := self._prefix.match(path)):
            self._load_shot_docs([m.group("shot")])  # an array inside a shot: its document lists it
        if self._is_stored_array(path):
            return super().get(path, selection)
        row = self.locate(path)
        if row is None:
            raise KeyError(f"{path} is not in {self.path}")
        a = self.zarr_array(row.data)
        if not selection:
            return np.asarray(a[row.start : row.start + row.length])
        first, rest = selection[0], tuple(selection[1:])
        if isinstance(first, slice):
            lo, hi, step = first.indices(row.length)
            if step == 1:
                return np.asarray(a[(slice(row.start + lo, row.start + max(lo, hi)), *rest)])
            return np.asarray(a[(slice(row.start, row.start + row.length), *rest)])[first]
        index = int(first) + (row.length if int(first) < 0 else 0)
        if not 0 <= index < row.length:
            raise IndexError(f"index {first} is out of bounds for axis 0 of {path}, of length {row.length}")
        return np.asarray(a[(row.start + index, *rest)])

    def _read_rows(self, rows: list[_Row]) -> list[np.ndarray]:
        """The data of several rows, reading each packed array once (the range that
        covers its rows)."""
        spans: dict[str, tuple[int, int]] = {}
        for r in rows:
            lo, hi = spans.get(r.data, (r.start, r.start + r.length))
            spans[r.data] = (min(lo, r.start), max(hi, r.start + r.length))
        values = self._read_many([(p, (slice(lo, hi),)) for p, (lo, hi) in spans.items()])
        blocks = {p: (lo, v) for (p, (lo, _)), v in zip(spans.items(), values)}
        return [blocks[r.data][1][r.start - blocks[r.data][0] : r.start - blocks[r.data][0] + r.length] for r in rows]

    def _with_scales(self, series: _Series) -> list[_Series]:
        """A signal's series, and the series of every scale its parts name (and of the
        scales those repeat)."""
        scales = {axis[0] for part in series.index["parts"] for axis in part["dims"] if axis}
        wanted = [series, *(self._series[s] for s in sorted(scales) if s in self._series)]
        return wanted + [self._series[o] for s in wanted[1:] for o in s.index["same_as"].get("sources", ())
                         if o in self._series]

    def _prepare_signal(self, series: _Series | None, mirrored: list[str]) -> None:
        """Version 2: the index of a signal's series and of its scales' series
        (:meth:`_with_scales`), in one round; the documents of the shots where the
        signal is stored unpacked."""
        if series is not None:
            self._load_index(self._with_scales(series))
        self._load_shot_docs(mirrored)

    def _whole_series(self, series: _Series | None) -> list[str]:
        """The packed arrays of a signal's series and of its scales' (version 2): what a
        read of the signal in every shot reads whole, known before the index is read, so
        fetched in the index's round (:meth:`~ZarrArchive._fetch_with_next_read`)."""
        if not self._v2 or series is None or series.complete:
            return []
        return [f"{s.group}/{DATA}{part['suffix']}" for s in self._with_scales(series) for part in s.index["parts"]]

    def signal(self, signal: str) -> dict[str, xr.DataArray]:
        series = self._signal_series.get(signal)
        unpacked = not self._v2 or signal in self._meta.get("unpacked_signals", ())
        mirrored = [shot for shot, sig in self._mirrored_signals.values() if sig == signal] if unpacked else []
        with self._fetch_with_next_read(self._whole_series(series)):  # the data with the index: one round
            if self._v2:
                self._prepare_signal(series, mirrored)
            shots = (set(series.rows) if series else set()) | set(mirrored)
            ordered = sorted(shots, key=natural_key)
            arrays = self._variables([self.path_of(shot, signal) for shot in ordered])
        return {shot: a.rename(signal) for shot, a in zip(ordered, arrays)}


    def signal_packed(self, signal: str) -> xr.Dataset:
        """One signal of every shot from its packed arrays (:meth:`Archive.signal_packed`):
        each packed array and each time base's read once, the rows gathered with numpy,
        no array built per shot. A signal some shots store unpacked is built the general
        way."""
        series = self._signal_series.get(signal)
        unpacked = not self._v2 or signal in self._meta.get("unpacked_signals", ())
        if series is None or (unpacked and any(sig == signal for _, sig in self._mirrored_signals.values())):
            return super().signal_packed(signal)
        with self._fetch_with_next_read(self._whole_series(series)):  # the data with the index: one round
            if self._v2:
                self._prepare_signal(series, [])
            shots = sorted(series.rows, key=natural_key)
            rows = [series.rows[shot] for shot in shots]
            refs = [r.dims[0][0] if r.dims and r.dims[0] else None for r in rows]
            scale_rows = [self.locate(self.scale_source(shot, ref)) if ref else None for shot, ref in zip(shots, refs)]
            if any(ref and row is None for ref, row in zip(refs, scale_rows)):  # a scale stored at its own path
                return super().signal_packed(signal)
            values = self._read_rows([*rows, *(r for r in scale_rows if r is not None)])
        found = iter(values[len(rows):])
        times = [next(found) if r is not None else None for r in scale_rows]
        bases = [ref.rsplit("/", 1)[-1] if ref else "" for ref in refs]
        attrs = bytes_back(plain_attrs(dict(rows[0].attrs), self.hidden_attrs)) if rows else {}
        return packed_dataset(signal, shots, values[: len(rows)], times, bases, attrs)


def open_archive(location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int | None = None,
                 root: Any = None) -> SignalMajorArchive:
    """The reader of a store of this layout (:meth:`layoutkit.layout.Layout.open`)."""
    return SignalMajorArchive(location, template, model, sleep, root=root)


__all__ = ["open_archive", "SignalMajorArchive"]
