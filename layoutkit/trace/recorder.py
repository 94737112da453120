"""The recorder ``layoutkit trace`` installs in every Python process of a traced command.

It wraps the readers' selection calls, h5py's ``Dataset.__getitem__`` and
``read_direct``, zarr's array selections (``Array[...]``, ``get_*_selection``: every
sync read reaches ``AsyncArray._get_selection``) and ``layoutkit.open``'s
``Archive.get`` and ``read_block``, as each module is first imported (an import hook:
nothing is imported that the program does not import itself), and appends one JSON line
per call to ``<dir>/<pid>.jsonl``: the file or store, the array, its shape, the selection
(:mod:`layoutkit.trace.workload`'s form), the process and thread. A read one of these
makes inside another (``layoutkit.open`` reading through zarr or h5py) is the outer
read's, not recorded again. Processes the program starts record too: they inherit the
environment that installs this (``sitecustomize`` on ``PYTHONPATH``), spawned or forked.

This module imports the standard library alone: it runs in the traced program.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

DIR_ENV = "LAYOUTKIT_TRACE_DIR"
START_ENV = "LAYOUTKIT_TRACE_START"

_inside = threading.local()
_lock = threading.Lock()
_files: dict[int, Any] = {}


def _after_fork() -> None:  # a lock held by another thread at the fork stays held in the child
    global _lock
    _lock = threading.Lock()


def _write(record: dict[str, Any]) -> None:
    pid = os.getpid()
    line = json.dumps(record) + "\n"
    with _lock:
        out = _files.get(pid)
        if out is None:  # a forked child writes a file of its own
            out = _files[pid] = open(os.path.join(os.environ[DIR_ENV], f"{pid}.jsonl"), "a", buffering=1)  # noqa: SIM115
        out.write(line)


def _record(api: str, source: str, array: str, shape: tuple[int, ...], selection: list[Any]) -> None:
    _write({"t": time.time() - float(os.environ.get(START_ENV, "0")), "api": api, "source": source,
            "array": "/" + array.strip("/"), "shape": [int(n) for n in shape], "selection": selection,
            "pid": os.getpid(), "thread": threading.current_thread().name})


def _points(values: Any, length: int) -> dict[str, int]:
    import numpy as np

    a = np.asarray(values)
    idx = np.flatnonzero(a) if a.dtype == bool else a.astype(np.int64).ravel() % max(length, 1)
    return {"points": int(idx.size), "min": int(idx.min()) if idx.size else 0, "max": int(idx.max()) if idx.size else 0}


def _mask_axes(k: Any) -> int:
    """The axes a key takes: a boolean mask as many as it has dimensions, anything else one."""
    dtype, ndim = getattr(k, "dtype", None), getattr(k, "ndim", 1)
    return int(ndim) if dtype is not None and dtype == bool and ndim > 1 else 1


def _mask_points(mask: Any, shape: tuple[int, ...]) -> list[dict[str, int]]:
    """A boolean mask over several axes: the first holds the points it selects, the others
    one each (the elements are the points, not their product), each with its range."""
    import numpy as np

    where = np.nonzero(np.asarray(mask))
    count = int(where[0].size)
    return [{"points": count if axis == 0 else min(count, 1), "min": int(w.min()) if count else 0,
             "max": int(w.max()) if count else 0} for axis, w in enumerate(where[: len(shape)])]


def selection_of(key: Any, shape: tuple[int, ...]) -> list[Any]:
    """A numpy-style selection (integers, slices, ``...``, integer or boolean arrays,
    field names) as one entry per axis of ``shape``: a boolean mask over several axes
    gives each of them an entry (:func:`_mask_points`)."""
    key = key if isinstance(key, tuple) else (key,)
    key = tuple(k for k in key if not isinstance(k, (str, bytes)) and k is not None)  # fields, new axes
    taken = sum(_mask_axes(k) for k in key if k is not Ellipsis)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - taken) + key[i + 1 :]
        taken = len(shape)
    key = key + (slice(None),) * (len(shape) - taken)
    axes: list[Any] = []
    for k in key:
        if len(axes) >= len(shape):
            break
        n = shape[len(axes)]
        if _mask_axes(k) > 1:
            axes.extend(_mask_points(k, shape[len(axes):]))
        elif isinstance(k, slice):
            axes.append(list(k.indices(n)))
        elif isinstance(k, (int,)) or type(k).__name__.startswith(("int", "uint")) and hasattr(k, "__index__"):
            i = int(k) % n if n else 0
            axes.append([i, i + 1, 1])
        elif hasattr(k, "__len__") or hasattr(k, "shape"):
            axes.append(_points(k, n))
        else:  # a selection object of h5py's own: the axis whole
            axes.append([0, n, 1])
    return axes


def _guarded(api: str, describe: Callable[..., tuple[str, str, tuple[int, ...], list[Any]] | None],
             fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "depth", 0) == 0:
            try:
                found = describe(*args, **kwargs)
            except Exception:  # noqa: BLE001 - a read the recorder cannot describe is the program's, untouched
                found = None
            if found is not None:
                _record(api, *found)
        _inside.depth = getattr(_inside, "depth", 0) + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _inside.depth -= 1

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    wrapper.recorded = True  # type: ignore[attr-defined]  # (a reader's own wrappers have __wrapped__ too)
    return wrapper


def _h5py_file(ds: Any) -> str:
    return os.path.abspath(ds.file.filename) if "://" not in ds.file.filename else ds.file.filename


def _patch_h5py(module: Any) -> None:
    cls = module.Dataset
    cls.__getitem__ = _guarded("h5py", lambda ds, args, *a, **k: (
        _h5py_file(ds), ds.name, ds.shape, selection_of(args, ds.shape) if ds.shape is not None else []), cls.__getitem__)
    cls.read_direct = _guarded("h5py", lambda ds, dest, source_sel=None, *a, **k: (
        _h5py_file(ds), ds.name, ds.shape, selection_of(() if source_sel is None else source_sel, ds.shape)),
        cls.read_direct)


def _zarr_axes(indexer: Any, shape: tuple[int, ...]) -> list[Any]:
    dims = getattr(indexer, "dim_indexers", None)
    if dims is None:  # coordinates or a mask: an array of points per axis
        points = getattr(indexer, "selection", None)
        return [_points(p, n) for p, n in zip(points, shape)] if points is not None else [[0, n, 1] for n in shape]
    axes: list[Any] = []
    for d, n in zip(dims, shape):
        if hasattr(d, "start") and hasattr(d, "stop"):
            axes.append([int(d.start), int(d.stop), int(getattr(d, "step", 1) or 1)])
        elif isinstance(getattr(d, "dim_sel", None), int):
            axes.append([d.dim_sel, d.dim_sel + 1, 1])
        elif getattr(d, "dim_sel", None) is not None:
            axes.append(_points(d.dim_sel, n))
        else:
            axes.append([0, n, 1])
    return axes


def _zarr_store(array: Any) -> str:
    store = array.store_path.store
    root = getattr(store, "root", None) or getattr(store, "path", None)
    return os.path.abspath(str(root)) if root is not None and "://" not in str(root) else str(store)


def _patch_zarr(module: Any) -> None:
    cls = module.AsyncArray
    # a plain function returning the coroutine: it runs, and records, in the caller's thread
    cls._get_selection = _guarded("zarr", lambda arr, indexer, *a, **k: (
        _zarr_store(arr), arr.store_path.path, arr.shape, _zarr_axes(indexer, arr.shape)), cls._get_selection)


_shapes: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _archive_read(archive: Any, path: str, selection: Any = ()) -> tuple[str, str, tuple[int, ...], list[Any]]:
    # an archive's listing walks its whole hierarchy (every dataset of an HDF5 file): once per
    # archive opened, not once per read recorded
    arrays = _shapes.get(archive)
    if arrays is None:
        arrays = _shapes[archive] = archive.arrays()
    shape = arrays[path][0]
    where = str(archive.path)
    return (where if "://" in where else os.path.abspath(where)), path, shape, selection_of(selection, shape)


def _wrap_reads(cls: type) -> None:
    for name in ("get", "read_block"):
        fn = cls.__dict__.get(name)
        if fn is not None and not getattr(fn, "recorded", False):
            setattr(cls, name, _guarded("layoutkit", _archive_read, fn))


def _patch_layoutkit(module: Any) -> None:
    """``Archive.get`` and ``read_block``, and every reader's own (each layout's reader
    overrides them, in modules imported later: wrapped as each class is made)."""
    cls = module.Archive
    _wrap_reads(cls)
    before = cls.__dict__["__init_subclass__"].__func__

    def init_subclass(sub: type, **kwargs: Any) -> None:
        before(sub, **kwargs)
        _wrap_reads(sub)

    cls.__init_subclass__ = classmethod(init_subclass)


PATCHES: dict[str, Callable[[Any], None]] = {
    "h5py._hl.dataset": _patch_h5py,
    "zarr.core.array": _patch_zarr,
    "layoutkit.readers.base": _patch_layoutkit,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any, patch: Callable[[Any], None]) -> None:
        self._loader, self._patch = loader, patch

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        self._patch(module)


class _Hook(importlib.abc.MetaPathFinder):
    """Finds the modules to wrap with the finders after it, and wraps them once loaded."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1 :]:
            spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, patch)
                return spec
        return None


def install(directory: str) -> None:
    """Record this process's reads into ``directory`` (what ``sitecustomize`` calls)."""
    os.environ[DIR_ENV] = directory
    os.environ.setdefault(START_ENV, str(time.time()))
    for name, patch in PATCHES.items():
        if name in sys.modules:  # already imported (the recorder installed late): wrap it now
            patch(sys.modules[name])
    if not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
        os.register_at_fork(after_in_child=_after_fork)


__all__ = ["DIR_ENV", "START_ENV", "install", "selection_of"]
