"""``advise --workload``: the reads a traced program made (``layoutkit trace``), as one
more pattern, made on every candidate and predicted at the source's full size.

advise measures a candidate on two samples of the source and extends what it measured
to the whole (:mod:`layoutkit.advise.model`). A workload was recorded on the whole
source, so each sample is given the reads that stand for it there
(:func:`sample_workload`), chosen as the standard patterns are: what differs between
the two samples is the archive's size, and the model's line through them then says how
the workload grows with it.

**Shot archives.** The workload read ``W`` of the source's ``N`` shots. When the smaller
sample has ``W`` shots or more, both samples make the reads of all ``W``, each on a
stand-in shot of the smaller sample (which the larger holds): a fixed amount, like the
``shot`` pattern, that spreads over more objects as the archive grows (the line in
``log`` of the size). Otherwise the workload reads a share of the archive (three signals
of every shot), and a sample of ``n`` shots makes the reads of ``W n / N`` of its shots,
spread over the ``W`` as the sample's shots are over the archive: a read that grows with
the archive, like the ``signal`` pattern (the line in the size), which at full size is
the workload's own. Stand-ins keep order: the ``i``-th shot chosen is read on the
``i``-th of the sample's shots spread as many, so a walk by shot stays a walk by shot.

**Other files.** A sample keeps every array, cut along its first axis
(:func:`layoutkit.advise.subset.array_part`); a read keeps its place and extent along
that axis in proportion (a time series over every row reads every row of the sample;
one time step stays one).

A selection that reads an axis whole reads the stand-in's whole; any other keeps its
place and extent, clipped to the stand-in's shape. Reads with no stand-in (a signal the
stand-in shot lacks, an array the sample left out) are counted and named in the result
(``dropped``). Which recorded reads cost a candidate the most (:func:`costliest`): the
larger sample's reads made once more, one after another, the requests and bytes of each
counted to its signal (a shot archive) or array.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py

from layoutkit.advise.subset import spread
from layoutkit.templates import match_template, natural_key

Item = tuple[str, tuple[slice, ...]]
"""A read: an array's path and its selection (a slice per axis)."""


@dataclass(frozen=True)
class SampledWorkload:
    """A workload's reads of the source, and the reads that stand for them on each sample."""

    full: tuple[Item, ...]  # what the program read, in order (repeated reads repeated)
    small: tuple[Item, ...]
    large: tuple[Item, ...]
    grows: bool  # the larger sample's reads cover more than the smaller's: it grows with the archive
    like: str | None  # "shot" or "signal": the standard pattern it resembles (None: neither)
    shots: int  # distinct shots it read (0: not a shot archive)
    dropped: int  # reads of the larger sample's share with no stand-in there
    threads: int = 1  # the threads (of every process) the program read from: the replay's readers

    def to_json(self) -> dict[str, Any]:
        return {"reads": len(self.full), "replayed": {"small": len(self.small), "large": len(self.large)},
                "shots": self.shots, "grows": self.grows, "like": self.like, "dropped": self.dropped,
                "threads": self.threads}


def sample_workload(items: Sequence[Item], source_arrays: Mapping[str, tuple[int, ...]],
                    samples: tuple[str | os.PathLike[str], str | os.PathLike[str]], template: str,
                    shot_archive: bool, threads: int = 1) -> SampledWorkload:
    """The reads ``items`` (the workload's of the source, :func:`layoutkit.trace.workload.replay_items`)
    as each sample makes them (see the module). ``source_arrays``: the source's arrays and
    their shapes; ``samples``: the smaller and the larger sample (HDF5 files)."""
    small_arrays, large_arrays = (_arrays(p) for p in samples)
    if not shot_archive:
        small, _ = _scaled(items, source_arrays, small_arrays)
        large, dropped = _scaled(items, source_arrays, large_arrays)
        return SampledWorkload(tuple(items), small, large, _elements(large) > _elements(small), None, 0, dropped,
                               max(1, threads))
    full = match_template(list(source_arrays), template)
    read = [full[p] for p, _ in items if p in full]
    shots = sorted({shot for shot, _ in read}, key=natural_key)
    all_shots = {shot for shot, _ in full.values()}
    small_shots, large_shots = (_shots(a, template) for a in (small_arrays, large_arrays))
    if len(shots) <= len(small_shots):  # a fixed amount: the same stand-ins on both samples
        standing = _stand_ins(shots, small_shots, len(shots))
        small, _ = _mapped(items, full, standing, small_arrays, source_arrays, template)
        large, dropped = _mapped(items, full, standing, large_arrays, source_arrays, template)
    else:  # a share of the archive: the same share of each sample
        def share(sample_shots: list[str]) -> int:
            return max(1, min(len(sample_shots), round(len(shots) * len(sample_shots) / max(1, len(all_shots)))))

        small, _ = _mapped(items, full, _stand_ins(shots, small_shots, share(small_shots)), small_arrays, source_arrays,
                           template)
        large, dropped = _mapped(items, full, _stand_ins(shots, large_shots, share(large_shots)), large_arrays,
                                 source_arrays, template)
    like = _like(items, full)
    return SampledWorkload(tuple(items), small, large, _elements(large) > _elements(small), like, len(shots), dropped,
                           max(1, threads))


def resembles(items: Sequence[Item], source_arrays: Mapping[str, tuple[int, ...]], template: str) -> str | None:
    """The standard pattern a shot archive's workload is most like: ``signal`` when it reads
    a larger share of the shots than of the signals (three signals of every shot), else
    ``shot``; None when it reads no shot."""
    return _like(items, match_template(list(source_arrays), template))


def _like(items: Sequence[Item], full: Mapping[str, tuple[str, str]]) -> str | None:
    """:func:`resembles`, given the source's arrays matched to their shots and signals."""
    read = [full[p] for p, _ in items if p in full]
    if not read:
        return None
    shots = len({shot for shot, _ in full.values()})
    signals = len({signal for _, signal in full.values()})
    read_shots, read_signals = len({s for s, _ in read}), len({s for _, s in read})
    return "signal" if read_shots / shots > read_signals / signals else "shot"


def _arrays(path: str | os.PathLike[str]) -> dict[str, tuple[int, ...]]:
    """Every dataset of an HDF5 file and its shape, as HDF5 reads them."""
    out: dict[str, tuple[int, ...]] = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__("/" + name, obj.shape) if isinstance(obj, h5py.Dataset) else None)
    return out


def _shots(arrays: Mapping[str, tuple[int, ...]], template: str) -> list[str]:
    return sorted({shot for shot, _ in match_template(list(arrays), template).values()}, key=natural_key)


def _stand_ins(shots: list[str], sample_shots: list[str], count: int) -> dict[str, str]:
    """``count`` of the workload's ``shots`` (spread over them), each to a sample shot
    (spread over the sample's), in order."""
    return dict(zip(spread(shots, count), spread(sample_shots, count)))


def _mapped(items: Sequence[Item], full: Mapping[str, tuple[str, str]], standing: Mapping[str, str],
            sample: Mapping[str, tuple[int, ...]], source: Mapping[str, tuple[int, ...]],
            template: str) -> tuple[tuple[Item, ...], int]:
    """The reads of the shots ``standing`` maps, each on its stand-in's array (and the reads
    outside the shots as they are), fitted to the stand-in's shape (:func:`_fitted`); and
    how many had no stand-in."""
    at = {parts: path for path, parts in match_template(list(sample), template).items()}
    out: list[Item] = []
    dropped = 0
    for path, selection in items:
        if path in full:
            shot, signal = full[path]
            if shot not in standing:
                continue  # not in this sample's share of the workload
            target = at.get((standing[shot], signal))
        else:
            target = path if path in sample else None
        if target is None:
            dropped += 1
            continue
        out.append((target, _fitted(selection, source.get(path, sample[target]), sample[target])))
    return tuple(out), dropped


def _fitted(selection: tuple[slice, ...], shape: tuple[int, ...], stand_in: tuple[int, ...]) -> tuple[slice, ...]:
    """A selection of an array of ``shape`` made on its stand-in: an axis read whole is
    read whole (a shot's whole signal, however long the stand-in's); any other keeps its
    place and extent (a window of samples), clipped to the stand-in."""
    whole = tuple(slice(0, m, s.step) if (s.start or 0) == 0 and (s.stop is None or s.stop >= n) else s
                  for s, n, m in zip(selection, shape, stand_in))
    return _clipped(whole, stand_in)


def _scaled(items: Sequence[Item], source: Mapping[str, tuple[int, ...]],
            sample: Mapping[str, tuple[int, ...]]) -> tuple[tuple[Item, ...], int]:
    """Each read on the sample's array, its first axis in proportion to the rows kept."""
    out: list[Item] = []
    dropped = 0
    for path, selection in items:
        shape = sample.get(path)
        if shape is None:
            dropped += 1
            continue
        rows, kept = (source.get(path) or shape)[:1], shape[:1]
        if selection and rows and kept and kept[0] < rows[0]:
            first = selection[0]
            start = first.start * kept[0] // rows[0]
            length = max(1, round((first.stop - first.start) * kept[0] / rows[0]))
            selection = (slice(start, start + length, first.step), *selection[1:])
        out.append((path, _clipped(selection, shape)))
    return tuple(out), dropped


def _clipped(selection: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[slice, ...]:
    """``selection`` inside ``shape``: each axis's start and stop within its length, at
    least one element where the axis has any."""
    out = []
    for s, n in zip(selection, shape):
        if n == 0:
            out.append(slice(0, 0, s.step))
            continue
        start = min(max(0, s.start or 0), n - 1)
        out.append(slice(start, min(max(s.stop if s.stop is not None else n, start + 1), n), s.step))
    return tuple(out)


def _elements(items: Sequence[Item]) -> int:
    return sum(math.prod(len(range(s.start, s.stop, s.step or 1)) for s in selection) for _, selection in items)


def costliest(written: Path | str, items: Sequence[Item], template: str, storage: Mapping[str, str],
              shot_archive: bool, page_buffer: int | None = None) -> list[tuple[str, int, int]]:
    """What each signal (a shot archive) or array of ``items`` costs on ``written``: its
    reads made one after another as recorded, each one's requests and bytes counted to
    it (a read that finds what an earlier one fetched costs nothing). Most requests first."""
    from layoutkit.archive import open_archive

    groups = match_template([p for p, _ in items], template) if shot_archive else {}
    costs: dict[str, tuple[int, int]] = {}
    with open_archive(written, template=template, page_buffer=page_buffer, storage_options=dict(storage)) as archive:
        counter = archive.counter
        for path, selection in items:
            requests, nbytes = counter.requests, counter.bytes
            archive.get(archive.stored_name(path), selection)
            key = groups[path][1] if path in groups else path
            was = costs.get(key, (0, 0))
            costs[key] = (was[0] + counter.requests - requests, was[1] + counter.bytes - nbytes)
    return sorted(((k, r, b) for k, (r, b) in costs.items()), key=lambda c: (-c[1], -c[2], c[0]))


__all__ = ["Item", "SampledWorkload", "costliest", "resembles", "sample_workload"]
