"""``layoutkit convert``: rewrite an HDF5 file as a Zarr store.

The conversion is planned in full first (:func:`plan_convert`, which ``--dry-run``
prints), then run by :func:`convert`: create the hierarchy in a temporary sibling of the
destination, copy whole write blocks on the chosen engine, consolidate, rename. A failure
or Ctrl-C removes the temporary store; the source is only ever opened read-only.
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from layoutkit import __version__
from layoutkit.errors import (
    InvalidOptionError,
    MissingFilterError,
    OutputExistsError,
    OutputNotWritableError,
    UnsupportedFeatureError,
)
from layoutkit.execute import run_tasks
from layoutkit.inventory import ArrayInfo, Inventory, read_inventory
from layoutkit.options import (
    ChunkSpec,
    CompressorSpec,
    ShardSpec,
    parse_chunks,
    parse_compressor,
    parse_shards,
)
from layoutkit.plan import (
    DEFAULT_TEMPLATE,
    ArrayPlan,
    CopyTask,
    plan_chunks,
    plan_shards,
    plan_tasks,
    task_budget,
)
from layoutkit.recipes import provenance_attrs
from layoutkit.source import SourceReader, can_read_raw
from layoutkit.writers.zarr_ import ZarrWriter, target_dtype

DEFAULT_CHUNK_BYTES = 4 * 1024**2
DEFAULT_MEMORY_LIMIT = 1024**3


@dataclass(frozen=True)
class ConvertOptions:
    """Every choice ``convert`` takes (the CLI and recipes build one of these)."""

    zarr_format: int = 3
    chunks: ChunkSpec = field(default_factory=lambda: parse_chunks("auto"))
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    compressor: CompressorSpec = field(default_factory=lambda: parse_compressor("zstd:3"))
    shards: ShardSpec = field(default_factory=lambda: parse_shards("none"))
    consolidate: bool = True
    workers: int = 2
    scheduler: str = "threads"
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    overwrite: bool = False
    skip_unsupported: bool = False
    # "shot": mirror the hierarchy; "signal": pack each signal of every shot (layoutkit.signal_major)
    order: str = "shot"
    template: str = DEFAULT_TEMPLATE  # where shots and signals are, for --order signal


@dataclass(frozen=True)
class ConvertPlan:
    source: str
    dest: str
    options: ConvertOptions
    arrays: tuple[ArrayPlan, ...]
    skipped: tuple[tuple[str, str], ...]
    tasks: tuple[CopyTask, ...]
    task_bytes: int

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays)


@dataclass(frozen=True)
class ConvertSummary:
    source: str
    dest: str
    arrays: int
    groups: int
    links: int
    skipped: tuple[tuple[str, str], ...]
    logical_bytes: int
    source_bytes: int
    dest_bytes: int
    seconds: float

    @property
    def ratio(self) -> float:
        return self.logical_bytes / self.dest_bytes if self.dest_bytes else float("nan")

    @property
    def throughput(self) -> float:
        return self.logical_bytes / self.seconds if self.seconds > 0 else float("nan")


def _check_order(options: ConvertOptions) -> str:
    if options.order not in ("shot", "signal"):
        raise InvalidOptionError(f"Expected --order shot or signal. Got {options.order!r}.")
    return options.order


def _check_filters(info: ArrayInfo) -> None:
    for f in info.filters:
        if not f.available:
            raise MissingFilterError(info.path, f.id, f.name)


def plan_array(info: ArrayInfo, options: ConvertOptions, block_limit: int) -> ArrayPlan:
    """Plan one array: raise :class:`UnsupportedFeatureError` when it cannot be carried."""
    if info.external:
        raise UnsupportedFeatureError(info.path, "external raw storage (data in another file)")
    if info.layout == "virtual":
        raise UnsupportedFeatureError(info.path, "a virtual dataset layout")
    _check_filters(info)
    dtype = target_dtype(info)
    itemsize = info.dtype.itemsize if dtype is not str else 16
    target = min(options.chunk_bytes, block_limit)
    chunks = plan_chunks(info.shape, itemsize, info.chunks, options.chunks, target)
    shards = None
    if options.zarr_format == 3 and dtype is not str:
        spec = options.shards
        if spec.mode != "none":
            spec = ShardSpec(spec.mode, min(spec.target_bytes, block_limit))
        shards = plan_shards(info.shape, chunks, itemsize, spec)
    size = math.prod(info.shape) if info.shape else 1
    return ArrayPlan(
        path=info.path,
        shape=info.shape,
        dtype=str(info.dtype) if dtype is not str else "str",
        itemsize=itemsize,
        chunks=chunks,
        shards=shards,
        compressor=options.compressor,
        read_mode="none" if size == 0 else ("raw" if can_read_raw(info) else "h5py"),
        nbytes=size * itemsize,
    )


def plan_convert(
    src: str | os.PathLike, dst: str | os.PathLike, options: ConvertOptions, inventory: Inventory | None = None
) -> tuple[Inventory, ConvertPlan]:
    """Walk the source and plan the whole conversion (no writing). With
    ``options.order == "signal"`` the plan is a :class:`~layoutkit.signal_major.SignalMajorPlan`."""
    if _check_order(options) == "signal":
        from layoutkit.signal_major import plan_signal_major

        return plan_signal_major(src, dst, options, inventory)  # type: ignore[return-value]
    inventory = inventory or read_inventory(src, workers=options.workers)
    budget = task_budget(options.memory_limit, options.workers)
    plans: list[ArrayPlan] = []
    skipped: list[tuple[str, str]] = []
    for info in inventory.arrays:
        if info.dim_only:
            continue
        try:
            plans.append(plan_array(info, options, budget))
        except (UnsupportedFeatureError, MissingFilterError) as exc:
            if not options.skip_unsupported:
                raise
            skipped.append((info.path, str(exc)))
    tasks = plan_tasks(plans, budget)
    plan = ConvertPlan(str(src), str(dst), options, tuple(plans), tuple(skipped), tasks, budget)
    return inventory, plan


# ---------------------------------------------------------------------------------
# the worker side (module level so dask can pickle it)


@dataclass(frozen=True)
class CopyJob:
    source: str
    dest: str
    zarr_format: int
    arrays: dict[str, ArrayInfo]
    # arrays whose Zarr fill value equals the HDF5 one: never-written regions are skipped
    sparse_ok: frozenset[str] = frozenset()


_OPEN: dict[tuple[str, str], tuple[SourceReader, ZarrWriter]] = {}


_OPEN_LOCK = threading.Lock()


def _open(job: CopyJob) -> tuple[SourceReader, ZarrWriter]:
    # one reader per source and process: threads of a worker share it (and none leaks)
    key = (job.source, job.dest)
    with _OPEN_LOCK:
        if key not in _OPEN:
            _OPEN[key] = (SourceReader(job.source, job.arrays), ZarrWriter(job.dest, job.zarr_format))
        return _OPEN[key]


def close_open_files() -> None:
    """Close the sources this process opened for copy tasks."""
    while _OPEN:
        _, (reader, _writer) = _OPEN.popitem()
        reader.close()


def copy_task(job: CopyJob, task: CopyTask) -> int:
    """Copy every region of ``task`` from the source to the store; return bytes copied."""
    reader, writer = _open(job)
    blocks = [
        (path, region, reader.read(path, region))
        for path, region in task.items
        if path not in job.sparse_ok or reader.allocated(path, region)
    ]
    writer.write_many(blocks)
    return task.nbytes


# ---------------------------------------------------------------------------------


def check_destination(dst: Path, overwrite: bool) -> None:
    if dst.exists() and not overwrite:
        raise OutputExistsError(f"Destination {str(dst)!r} exists; pass --overwrite to replace it.")
    parent = dst.parent if str(dst.parent) else Path(".")
    if not parent.exists():
        raise OutputNotWritableError(f"Destination folder {str(parent)!r} does not exist.")
    if not parent.is_dir():
        raise OutputNotWritableError(f"Destination parent {str(parent)!r} is not a folder.")
    if not os.access(parent, os.W_OK):
        raise OutputNotWritableError(f"Destination folder {str(parent)!r} is not writable.")


def temporary_sibling(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}.layoutkit-{uuid.uuid4().hex[:8]}.tmp")


def replace_path(tmp: Path, dst: Path) -> None:
    """Move ``tmp`` to ``dst``, removing an existing ``dst`` only after ``tmp`` is complete."""
    old = None
    if dst.exists() or dst.is_symlink():
        old = dst.with_name(f".{dst.name}.layoutkit-old-{uuid.uuid4().hex[:8]}")
        os.rename(dst, old)
    os.rename(tmp, dst)
    if old is not None:
        shutil.rmtree(old) if old.is_dir() else old.unlink()


def remove_path(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink()


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def convert(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    options: ConvertOptions | None = None,
    progress: Any = None,
    plan: tuple[Inventory, ConvertPlan] | None = None,
) -> ConvertSummary:
    """Convert an HDF5 file to a Zarr store.

    Parameters
    ----------
    src, dst
        Source HDF5 path and destination store directory.
    options
        A :class:`ConvertOptions`; defaults to Zarr v3, auto chunks of 4 MiB, zstd:3.
    progress
        Optional callable receiving the logical bytes of each finished task.
    plan
        A plan from :func:`plan_convert`, to avoid walking the source twice.

    Returns
    -------
    ConvertSummary

    Raises
    ------
    LayoutkitError
        For every expected failure (bad source, existing destination, unsupported feature).
    """
    options = options or ConvertOptions()
    if _check_order(options) == "signal":
        from layoutkit.signal_major import convert_signal_major

        return convert_signal_major(src, dst, options, progress, plan)  # type: ignore[arg-type]
    src_path, dst_path = Path(src), Path(dst)
    check_destination(dst_path, options.overwrite)
    inventory, cplan = plan or plan_convert(src_path, dst_path, options)
    t0 = time.perf_counter()
    tmp = temporary_sibling(dst_path)
    try:
        writer = ZarrWriter(tmp, options.zarr_format)
        try:
            writer.create(inventory, list(cplan.arrays), _sidecar(inventory, cplan), provenance_attrs("convert", options))
        except OSError as exc:
            raise OutputNotWritableError(
                f"Destination {str(dst_path)!r} cannot be written ({exc.strerror or exc})."
            ) from None
        infos = {a.path: a for a in inventory.arrays}
        planned = {a.path: infos[a.path] for a in cplan.arrays}
        job = CopyJob(
            str(src_path.resolve()),
            str(tmp.resolve()),
            options.zarr_format,
            planned,
            frozenset(writer.fill_matches_source(planned)),
        )
        # local threads share the writer that already holds every array open
        _OPEN[(job.source, job.dest)] = (SourceReader(job.source, job.arrays), writer)
        run_tasks(
            copy_task,
            job,
            cplan.tasks,
            scheduler=options.scheduler,
            workers=options.workers,
            progress=progress,
            cleanup=close_open_files,
        )
        writer.finish(options.consolidate)
        replace_path(tmp, dst_path)
    except BaseException:
        close_open_files()
        remove_path(tmp)
        raise
    seconds = time.perf_counter() - t0
    return ConvertSummary(
        source=str(src_path),
        dest=str(dst_path),
        arrays=len(cplan.arrays),
        groups=len(inventory.groups),
        links=len(inventory.links),
        skipped=cplan.skipped,
        logical_bytes=cplan.nbytes,
        source_bytes=src_path.stat().st_size,
        dest_bytes=du(dst_path),
        seconds=seconds,
    )


def _sidecar(inventory: Inventory, plan: ConvertPlan) -> dict[str, Any]:
    return {
        "layoutkit_version": __version__,
        "command": "convert",
        "source": os.path.basename(plan.source),
        "zarr_format": plan.options.zarr_format,
        "options": {
            f.name: (v if isinstance(v := getattr(plan.options, f.name), (bool, int)) else str(v))
            for f in fields(plan.options)
        },
        "userblock_size": inventory.userblock_size,
        "links": [asdict(link) for link in inventory.links],
        "netcdf_dimensions": {
            a.path: a.shape[0] if a.shape else 0 for a in inventory.arrays if a.dim_only
        },
        "skipped": [{"path": p, "reason": r} for p, r in plan.skipped],
        # where each axis's coordinates live, for readers that are not xarray
        "dimension_scales": {
            a.path: [list(s) for s in a.dim_scales]
            for a in inventory.arrays
            if not a.dim_only and any(a.dim_scales)
        },
        "notes": list(inventory.attr_notes),
    }


__all__ = ["ConvertOptions", "ConvertPlan", "ConvertSummary", "convert", "plan_convert"]
