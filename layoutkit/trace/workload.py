"""The workload file: what a traced program read, in a documented JSON form.

``layoutkit trace`` writes it (:func:`layoutkit.trace.run.trace`); ``layoutkit trace
--show`` summarises it. Its format is on docs/formats/workload.md. A read is one call
into a reader (h5py's ``Dataset[...]``, zarr's array selection, ``layoutkit.open``'s
``get``): which file or store, which array, which selection, from which process and
thread, first seen when; a read made again with the same selection by the same thread
is counted, not listed. No data values are recorded.

A selection is one entry per axis: ``[start, stop, step]`` for a slice or an integer
(``[i, i + 1, 1]``), or ``{"points": n, "min": a, "max": b}`` for integer or boolean
arrays (fancy indexing), whose points are counted, not listed.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from layoutkit.errors import LayoutkitError

FORMAT = "layoutkit-workload"
VERSION = 1

Axis = tuple[int, int, int] | dict[str, int]


class WorkloadError(LayoutkitError):
    """A file that is not a workload this version reads."""


@dataclass(frozen=True)
class Read:
    """One distinct read: the same selection of the same array by the same thread."""

    source: str  # the file or store, as the program named it, made absolute
    array: str  # the array's path inside it, with a leading "/"
    shape: tuple[int, ...]  # the array's shape
    selection: tuple[Axis, ...]  # per axis, see the module's docstring
    api: str  # h5py | zarr | layoutkit
    process: int
    thread: str
    first: float  # seconds since the trace started, at its first occurrence
    count: int = 1

    @property
    def elements(self) -> int:
        """Elements the selection covers (one occurrence)."""
        return math.prod(axis_length(a) for a in self.selection) if self.selection else 1


def axis_length(axis: Axis) -> int:
    if isinstance(axis, dict):
        return int(axis["points"])
    start, stop, step = axis
    return max(0, -(-(stop - start) // step)) if step > 0 else 0


@dataclass
class Workload:
    """What one traced command read (:class:`Read`, in order of first occurrence)."""

    command: list[str]
    seconds: float
    reads: list[Read] = field(default_factory=list)
    exit_code: int = 0
    unmapped: dict[str, dict[str, int]] = field(default_factory=dict)
    """Traced from system calls: per HDF5 file, the reads (and bytes) that fell in no
    array's stored bytes (the library's metadata)."""

    @property
    def processes(self) -> int:
        return len({r.process for r in self.reads})

    @property
    def threads(self) -> int:
        return len({(r.process, r.thread) for r in self.reads})

    def arrays(self) -> dict[tuple[str, str], list[Read]]:
        """The reads of each (source, array), in order."""
        out: dict[tuple[str, str], list[Read]] = {}
        for r in self.reads:
            out.setdefault((r.source, r.array), []).append(r)
        return out

    def to_json(self) -> str:
        doc = {"format": FORMAT, "version": VERSION, "command": self.command, "seconds": round(self.seconds, 6),
               "exit_code": self.exit_code, "unmapped": self.unmapped,
               "reads": [dict(asdict(r), selection=[_axis_json(a) for a in r.selection], shape=list(r.shape),
                              first=round(r.first, 6)) for r in self.reads]}
        return json.dumps(doc, indent=1)

    def write(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.write_text(self.to_json() + "\n")
        return path


def _axis_json(axis: Axis) -> Any:
    return dict(axis) if isinstance(axis, dict) else list(axis)


def _axis(value: Any) -> Axis:
    if isinstance(value, dict):
        return {k: int(v) for k, v in value.items()}
    start, stop, step = value
    return int(start), int(stop), int(step)


def load(path: str | os.PathLike) -> Workload:
    """A workload file, as :meth:`Workload.write` wrote it.

    Raises
    ------
    WorkloadError
        When the file is not JSON, or not a workload of this version.
    """
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise WorkloadError(f"{path} is not a workload file ({exc.__class__.__name__}: {exc}).") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise WorkloadError(f"{path} is not a workload file: it has no \"format\": \"{FORMAT}\".")
    if doc.get("version") != VERSION:
        raise WorkloadError(f"{path} is a workload of version {doc.get('version')}; this layoutkit reads {VERSION}.")
    reads = [Read(r["source"], r["array"], tuple(r["shape"]), tuple(_axis(a) for a in r["selection"]), r["api"],
                  int(r["process"]), str(r["thread"]), float(r["first"]), int(r["count"])) for r in doc["reads"]]
    return Workload(list(doc["command"]), float(doc["seconds"]), reads, int(doc.get("exit_code", 0)),
                    {k: {"reads": int(v["reads"]), "bytes": int(v["bytes"])} for k, v in doc.get("unmapped", {}).items()})


def merge(records: Iterable[dict[str, Any]]) -> list[Read]:
    """The recorder's lines (one per call, every process's) as distinct reads: the same
    selection of the same array by the same thread counted, ordered by first occurrence."""
    seen: dict[tuple[Any, ...], Read] = {}
    for rec in sorted(records, key=lambda r: r["t"]):
        selection = tuple(_axis(a) for a in rec["selection"])
        hashable = tuple(tuple(sorted(a.items())) if isinstance(a, dict) else a for a in selection)
        key = (rec["source"], rec["array"], hashable, rec["pid"], rec["thread"], rec["api"])
        if key in seen:
            old = seen[key]
            seen[key] = replace(old, count=old.count + 1)
        else:
            seen[key] = Read(rec["source"], rec["array"], tuple(rec["shape"]), selection, rec["api"], int(rec["pid"]),
                             str(rec["thread"]), float(rec["t"]))
    return list(seen.values())


def access_order(reads: Sequence[Read], template: str) -> str:
    """How a shot archive was walked, from the order of its reads: ``by shot`` (a shot's
    signals one after another), ``by signal`` (one signal across shots), ``by time``
    (parts of one array in turn), ``random``, or ``one read``."""
    from layoutkit.templates import match_template

    if len(reads) < 2:
        return "one read"
    matched = match_template([r.array for r in reads], template)
    pairs = list(zip(reads, reads[1:]))
    same_array = sum(a.source == b.source and a.array == b.array for a, b in pairs)
    if same_array >= len(pairs) / 2:
        return "by time"
    if all(r.array in matched for r in reads):
        keys = [matched[r.array] for r in reads]
        same_shot = sum(a[0] == b[0] for a, b in zip(keys, keys[1:]))
        same_signal = sum(a[1] == b[1] for a, b in zip(keys, keys[1:]))
        if max(same_shot, same_signal) >= len(pairs) / 2:
            return "by shot" if same_shot >= same_signal else "by signal"
    return "random"




def replay_items(workload: Workload, source: str | os.PathLike, arrays: Iterable[str]) -> tuple[tuple[str, tuple[slice, ...]], ...]:
    """The reads of ``workload`` to make again on ``source``'s variants, as ``(array,
    selection)`` pairs in order, each as many times as it was made (what ``verify
    --workload`` times): the reads of ``source`` itself, or, when the workload read one
    other file or store only (the program ran on a copy), that one's. A selection of
    points is replayed as the box around them.

    Raises
    ------
    WorkloadError
        When the workload read several other sources and none is ``source``, or names
        an array ``source`` does not hold.
    """
    here = os.path.abspath(os.fspath(source)) if "://" not in os.fspath(source) else os.fspath(source)
    sources = list(dict.fromkeys(r.source for r in workload.reads))
    if here in sources:
        chosen = [r for r in workload.reads if r.source == here]
    elif len(sources) == 1:
        chosen = list(workload.reads)
    else:
        raise WorkloadError(f"The workload read {len(sources)} files or stores and {here} is none of them: "
                            f"{', '.join(sources[:4])}{', ...' if len(sources) > 4 else ''}.")
    known = set(arrays)
    missing = sorted({r.array for r in chosen} - known)
    if missing:
        raise WorkloadError(f"The workload reads {missing[0]}, which {here} does not hold"
                            f"{f' (and {len(missing) - 1} more)' if len(missing) > 1 else ''}.")
    items = []
    for r in chosen:
        box = tuple(slice(a["min"], a["max"] + 1) if isinstance(a, dict) else slice(*a) for a in r.selection)
        items += [(r.array, box)] * r.count
    return tuple(items)


__all__ = ["FORMAT", "VERSION", "Read", "Workload", "WorkloadError", "access_order", "load", "merge", "replay_items"]
