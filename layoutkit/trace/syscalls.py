"""Reads of programs that do not read through Python: from the offsets their system calls read.

``layoutkit trace --syscalls -- COMMAND`` runs the command under ``strace -f`` (every
process and thread it starts) and keeps the byte ranges read from each file (``pread64``,
``preadv``, and ``read`` at the position ``lseek`` and earlier reads left). Each range
read from an HDF5 file is mapped back to the arrays whose stored bytes it covers, through
the file's own chunk index as the HDF5 library reports it (``H5Dget_chunk_info``; a
contiguous array's offset and size): a chunk read is a read of that chunk's box of the
array, a part of a contiguous array the elements it holds. What lies in no array's
bytes (object headers, B-trees, heaps: the library's metadata) is counted per file as
unmapped; files that are not HDF5 (the program's libraries, its own inputs) are left out.
"""

from __future__ import annotations

import bisect
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from layoutkit.errors import LayoutkitError

SYSCALLS = "openat,open,pread64,preadv,read,lseek,close"
_LINE = re.compile(r"^(?P<pid>\d+)\s+(?P<t>\d+\.\d+)\s+(?P<call>\w+)\((?P<args>.*)\)\s+=\s+(?P<ret>-?\d+)")


class StraceMissingError(LayoutkitError, FileNotFoundError):
    """``--syscalls`` needs strace."""


@dataclass(frozen=True)
class FileRead:
    path: str
    offset: int
    size: int
    pid: int
    t: float


def run_traced(command: Sequence[str], log: Path, env: dict[str, str]) -> int:
    """Run ``command`` under ``strace -f``, its system calls of file reads into ``log``;
    the command's exit code."""
    strace = shutil.which("strace")
    if strace is None:
        raise StraceMissingError("--syscalls needs strace, which is not installed (apt-get install strace).")
    return subprocess.run([strace, "-f", "-qq", "-ttt", "-e", f"trace={SYSCALLS}", "-o", str(log), "--", *command],
                          env=env, check=False).returncode


def _joined(lines: list[str]) -> list[str]:
    """strace's lines with each call interrupted by another thread's joined again."""
    pending: dict[str, str] = {}
    out = []
    for line in lines:
        if line.endswith("<unfinished ...>"):
            pid = line.split(None, 1)[0]
            pending[pid] = line[: -len("<unfinished ...>")].rstrip()
            continue
        m = re.match(r"^(\d+)\s+\d+\.\d+\s+<\.\.\. \w+ resumed>\s?(.*)$", line)
        if m and m.group(1) in pending:
            out.append(pending.pop(m.group(1)) + m.group(2))
            continue
        out.append(line)
    return out


def file_reads(log: Path, start: float) -> list[FileRead]:
    """The byte ranges each process read from each file it opened by name."""
    fds: dict[int, str] = {}
    position: dict[int, int] = {}
    reads = []
    for line in _joined(log.read_text(errors="replace").splitlines()):
        m = _LINE.match(line)
        if m is None:
            continue
        call, args, ret, pid, t = m["call"], m["args"], int(m["ret"]), int(m["pid"]), float(m["t"]) - start
        if call in ("openat", "open") and ret >= 0:
            name = re.search(r'"((?:[^"\\]|\\.)*)"', args)
            if name:
                fds[ret], position[ret] = name.group(1), 0
        elif call == "close":
            fds.pop(int(args.split(",")[0]), None)
        elif call == "lseek" and ret >= 0:
            position[int(args.split(",")[0])] = ret
        elif call in ("pread64", "preadv", "read") and ret > 0:
            fd = int(args.split(",")[0])
            if fd not in fds:
                continue
            offset = int(args.rsplit(",", 1)[1]) if call != "read" else position.get(fd, 0)
            if call == "read":
                position[fd] = offset + ret
            reads.append(FileRead(fds[fd], offset, ret, pid, t))
    return reads


class _FileMap:
    """Where each array's stored bytes lie in one HDF5 file: sorted (start, end, array, box)."""

    def __init__(self, path: str) -> None:
        import h5py

        # (start, end, array, its shape, the chunk's box (none: contiguous), item size)
        self.spans: list[tuple[int, int, str, tuple[int, ...], tuple[tuple[int, int], ...], int]] = []
        with h5py.File(path, "r") as f:
            f.visititems(lambda name, obj: self._add(obj) if isinstance(obj, h5py.Dataset) else None)
        self.spans.sort()
        self.starts = [s[0] for s in self.spans]

    def _add(self, ds: Any) -> None:
        shape = tuple(ds.shape or ())
        if not shape or ds.id.get_storage_size() == 0:
            return
        if ds.chunks is None:
            offset = ds.id.get_offset()
            if offset is not None:
                self.spans.append((offset, offset + ds.id.get_storage_size(), ds.name, shape, (), ds.dtype.itemsize))
            return
        for i in range(ds.id.get_num_chunks()):
            info = ds.id.get_chunk_info(i)
            box = tuple((o, min(o + c, n)) for o, c, n in zip(info.chunk_offset, ds.chunks, shape))
            self.spans.append((info.byte_offset, info.byte_offset + info.size, ds.name, shape, box, 0))

    def arrays_in(self, offset: int, size: int) -> list[tuple[str, tuple[int, ...], list[Any]]]:
        """The (array, shape, selection) each part of ``[offset, offset + size)`` belongs
        to; none when any of its bytes is in no array's: a read of the library's metadata
        (its cache reads whole blocks, which may run into the data beside the headers;
        a read of data never runs outside it: chunks are read whole and alone, and the
        sieve buffer of a contiguous array stops at its end)."""
        out = []
        covered = 0
        i = max(0, bisect.bisect_right(self.starts, offset) - 1)
        while i < len(self.spans) and self.spans[i][0] < offset + size:
            start, end, name, shape, box, itemsize = self.spans[i]
            lo, hi = max(start, offset), min(end, offset + size)
            if hi > lo:
                covered += hi - lo
                out.append((name, shape, [list(b) + [1] for b in box] if box else
                            _contiguous(shape, itemsize, lo - start, hi - start)))
            i += 1
        return out if covered == size else []


def _contiguous(shape: tuple[int, ...], itemsize: int, lo: int, hi: int) -> list[Any]:
    """The selection a byte range of a contiguous array holds: its elements on the first
    axis, the rest whole (the box around it, when it starts or ends inside a row)."""
    row = itemsize
    for n in shape[1:]:
        row *= n
    first, last = lo // row, -(-hi // row)
    return [[first, last, 1], *([0, n, 1] for n in shape[1:])]


def map_reads(reads: list[FileRead]) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """The recorder's records (:func:`layoutkit.trace.workload.merge`'s input) for the reads
    that fall in arrays' stored bytes, and per HDF5 file the reads and bytes that do not."""
    import h5py

    records: list[dict[str, Any]] = []
    unmapped: dict[str, dict[str, int]] = {}
    maps: dict[str, _FileMap | None] = {}
    resolved: dict[str, str] = {}  # a path as the program opened it -> the file (once each, not once a read)
    for r in reads:
        path = resolved.get(r.path) or resolved.setdefault(r.path, str(Path(r.path).resolve()))
        if path not in maps:
            maps[path] = _FileMap(path) if Path(path).is_file() and h5py.is_hdf5(path) else None
        fmap = maps[path]
        if fmap is None:
            continue
        found = fmap.arrays_in(r.offset, r.size)
        if not found:
            u = unmapped.setdefault(path, {"reads": 0, "bytes": 0})
            u["reads"], u["bytes"] = u["reads"] + 1, u["bytes"] + r.size
        for name, shape, selection in found:
            records.append({"t": r.t, "api": "syscalls", "source": path, "array": name, "shape": list(shape),
                            "selection": selection, "pid": r.pid, "thread": str(r.pid)})
    return records, unmapped


__all__ = ["FileRead", "StraceMissingError", "file_reads", "map_reads", "run_traced"]
