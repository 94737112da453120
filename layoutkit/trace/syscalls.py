"""Reads of programs that do not read through Python: from the offsets their system calls read.

``layoutkit trace --syscalls -- COMMAND`` runs the command under ``strace -f`` (every
process and thread it starts) and keeps the byte ranges read from each file (``pread64``,
``preadv``, and ``read`` at the position ``lseek`` and earlier reads left). Each range
read from an HDF5 file is mapped back to the arrays whose stored bytes it covers, through
the file's own chunk index as the HDF5 library reports it (``H5Dget_chunk_info``; a
contiguous array's offset and size): a chunk read is a read of that chunk's box of the
array, a part of a contiguous array the elements it holds. What lies in no array's
bytes (object headers, B-trees, heaps: the library's metadata) is counted per file as
unmapped. A file inside a local Zarr store (v3 or v2) is a chunk, or a shard, of the array
whose folder holds it, named by its key: a chunk read is a read of its box; a range read
from a shard is a read of the inner chunks whose bytes it covers, found in the shard's own
index; the metadata documents (and a shard's index) are counted per store as unmapped.
Other files (the program's libraries, its own inputs) are left out.
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


_ZARR_DOCUMENTS = ("zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata")


def _documented(folder: Path) -> bool:
    return any((folder / name).is_file() for name in _ZARR_DOCUMENTS)


def _store_root(folder: Path, roots: dict[Path, Path | None]) -> Path | None:
    """The local Zarr store a folder lies in, or None: above a chunk key's folders (none
    holds a document), the nearest folder that holds one, then the outermost of those
    above it that hold one without a gap."""
    if folder in roots:
        return roots[folder]
    here: Path | None = folder
    while here is not None and not _documented(here):
        here = here.parent if here.parent != here else None
    root = None
    while here is not None and _documented(here):
        root = here
        here = here.parent if here.parent != here else None
    roots[folder] = root
    return root


class _StoreMap:
    """The arrays of a local Zarr store, read from their documents once each: which array a
    file under the store is a chunk or shard of, and which part of the array its bytes hold."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.arrays: dict[Path, dict[str, Any] | None] = {}
        self.indexes: dict[Path, list[tuple[int, int]]] = {}
        self.partial: dict[tuple[int, Path, int], int] = {}  # bytes of an inner chunk a process has read so far

    def _array(self, folder: Path) -> dict[str, Any] | None:
        if folder not in self.arrays:
            self.arrays[folder] = _array_meta(folder)
        return self.arrays[folder]

    def arrays_in(self, file: Path, offset: int, size: int, pid: int = 0) -> list[tuple[str, tuple[int, ...], list[Any]]] | None:
        """The (array, shape, selection) a read of ``file`` holds; None for a document, a
        shard's index, or a file of no array. In a shard, an inner chunk counts once the
        process has read all its bytes, in one read or several (a buffered reader splits a
        read, and runs past its end into the next chunk's bytes, which are not read)."""
        rel = file.relative_to(self.root).parts
        for cut in range(len(rel) - 1, -1, -1):  # the array's folder: the nearest above the key that is one
            meta = self._array(self.root.joinpath(*rel[:cut]))
            if meta is not None:
                break
        else:
            return None
        index = _chunk_index("/".join(rel[cut:]), meta)
        if index is None:
            return None
        name = "/" + "/".join(rel[:cut])
        outer = meta["chunks"] if meta["inner"] is None else meta["shard"]
        origin = [i * c for i, c in zip(index, outer)]
        if meta["inner"] is None or (offset == 0 and size >= file.stat().st_size):
            return [(name, meta["shape"], _box(origin, outer, meta["shape"]))]
        spans = self.indexes.get(file)
        if spans is None:
            spans = self.indexes[file] = _shard_index(file, meta)
        inner, out, covered = meta["inner"], [], 0
        per = [s // c for s, c in zip(outer, inner)]
        for k, (start, nbytes) in enumerate(spans):
            if nbytes and start < offset + size and offset < start + nbytes:
                part = min(start + nbytes, offset + size) - max(start, offset)
                covered += part
                held = self.partial.pop((pid, file, k), 0) + part
                if held < nbytes:
                    self.partial[(pid, file, k)] = held
                    continue
                at = [origin[d] + _unravel(k, per)[d] * inner[d] for d in range(len(per))]
                out.append((name, meta["shape"], _box(at, inner, meta["shape"])))
        return out if covered == size else None  # a read into the index (a buffered read of it runs into the chunks)


def _array_meta(folder: Path) -> dict[str, Any] | None:
    """What a folder's array document says of its chunks (None: not an array)."""
    import json

    try:
        if (folder / "zarr.json").is_file():
            doc = json.loads((folder / "zarr.json").read_text())
            if doc.get("node_type") != "array":
                return None
            encoding = doc.get("chunk_key_encoding", {})
            separator = encoding.get("configuration", {}).get("separator", "/" if encoding.get("name") != "v2" else ".")
            chunks = tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])
            meta = {"shape": tuple(doc["shape"]), "chunks": chunks, "shard": None, "inner": None,
                    "prefix": "c" if encoding.get("name", "default") == "default" else None, "separator": separator}
            codec = (doc.get("codecs") or [{}])[0]
            if codec.get("name") == "sharding_indexed":
                config = codec["configuration"]
                meta.update(shard=chunks, inner=tuple(config["chunk_shape"]), location=config.get("index_location", "end"),
                            crc=any(c.get("name") == "crc32c" for c in config.get("index_codecs", [])))
            return meta
        if (folder / ".zarray").is_file():
            doc = json.loads((folder / ".zarray").read_text())
            return {"shape": tuple(doc["shape"]), "chunks": tuple(doc["chunks"]), "shard": None, "inner": None,
                    "prefix": None, "separator": doc.get("dimension_separator") or "."}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None


def _chunk_index(key: str, meta: dict[str, Any]) -> tuple[int, ...] | None:
    """The grid position a chunk key names (None: not a chunk key of this array)."""
    parts = key.split("/") if meta["separator"] == "/" else key.split("/")[-1].split(meta["separator"])
    if meta["prefix"] is not None:
        if not parts or parts[0] != meta["prefix"]:
            return None
        parts = parts[1:]
    if not meta["shape"]:  # a scalar array's one chunk: "c" (v3) or "0" (v2)
        return () if parts in ([], ["0"]) else None
    if len(parts) != len(meta["shape"]) or not all(p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def _shard_index(file: Path, meta: dict[str, Any]) -> list[tuple[int, int]]:
    """Each inner chunk's (offset, bytes) in a shard file, from the shard's index."""
    import struct

    count = 1
    for s, c in zip(meta["shard"], meta["inner"]):
        count *= s // c
    nbytes = 16 * count + (4 if meta.get("crc") else 0)
    with open(file, "rb") as f:
        if meta.get("location", "end") == "end":
            f.seek(-nbytes, 2)
        raw = f.read(16 * count)
    values = struct.unpack(f"<{2 * count}Q", raw)
    return [(o, n) if o != 2**64 - 1 else (0, 0) for o, n in zip(values[::2], values[1::2])]


def _unravel(k: int, per: list[int]) -> list[int]:
    out = []
    for n in reversed(per):
        out.append(k % n)
        k //= n
    return out[::-1]


def _box(origin: Sequence[int], extent: Sequence[int], shape: Sequence[int]) -> list[Any]:
    return [[o, min(o + e, n), 1] for o, e, n in zip(origin, extent, shape)]


def map_reads(reads: list[FileRead]) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """The recorder's records (:func:`layoutkit.trace.workload.merge`'s input) for the reads
    that fall in arrays' stored bytes, and per HDF5 file (or Zarr store) the reads and
    bytes that do not."""
    import h5py

    records: list[dict[str, Any]] = []
    unmapped: dict[str, dict[str, int]] = {}
    # each file read, once: an HDF5 file's map, the Zarr store it lies in, or None (neither).
    # A store first: its chunk files are told by their folders (cached), not opened one by one
    kinds: dict[str, _FileMap | _StoreMap | None] = {}
    stores: dict[Path, _StoreMap] = {}
    roots: dict[Path, Path | None] = {}
    resolved: dict[str, str] = {}  # a path as the program opened it -> the file (once each, not once a read)
    for r in reads:
        path = resolved.get(r.path) or resolved.setdefault(r.path, str(Path(r.path).resolve()))
        if path not in kinds:
            root = _store_root(Path(path).parent, roots)
            if root is not None:
                kinds[path] = stores.get(root) or stores.setdefault(root, _StoreMap(root))
            else:
                kinds[path] = _FileMap(path) if Path(path).is_file() and h5py.is_hdf5(path) else None
        kind = kinds[path]
        found: list[tuple[str, tuple[int, ...], list[Any]]] | None
        if kind is None:
            continue
        if isinstance(kind, _FileMap):
            source, found = path, kind.arrays_in(r.offset, r.size)
        else:
            source, found = str(kind.root), kind.arrays_in(Path(path), r.offset, r.size, r.pid)
            if found == []:  # part of an inner chunk, not yet all of it
                continue
        if not found:
            u = unmapped.setdefault(source, {"reads": 0, "bytes": 0})
            u["reads"], u["bytes"] = u["reads"] + 1, u["bytes"] + r.size
        for name, shape, selection in found or ():
            records.append({"t": r.t, "api": "syscalls", "source": source, "array": name, "shape": list(shape),
                            "selection": selection, "pid": r.pid, "thread": str(r.pid)})
    return records, unmapped


__all__ = ["FileRead", "StraceMissingError", "file_reads", "map_reads", "run_traced"]
