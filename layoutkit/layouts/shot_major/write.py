"""Writing a shot-major store: the hierarchy's skeleton, then tasks that copy whole write
blocks (chunks, or shards) from the source, read raw and decoded outside h5py's lock,
encoded on the worker (:mod:`layoutkit.writers.zarr_convert`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from layoutkit.hdf5.inventory import Inventory
from layoutkit.layout import Work
from layoutkit.storage import Destination, portable, portable_target
from layoutkit.writers.zarr_ import ZarrWriter
from layoutkit.writers.zarr_convert import (
    ConvertSummary,
    CopyJob,
    adopt_job,
    close_open_files,
    copy_task,
    not_writable,
    sidecar,
)
from layoutkit.zarr_plan import ConvertPlan


def begin(staged: Path, source: Path, inventory: Inventory, plan: ConvertPlan,
          attrs: dict[str, Any]) -> Work:
    writer = ZarrWriter(staged, plan.options.zarr_format)
    dest = Path(plan.dest or staged)
    try:
        try:
            writer.create(inventory, list(plan.arrays), sidecar(inventory, plan), attrs, background=True)
        except OSError as exc:
            raise not_writable(dest, exc) from None
        infos = {a.path: a for a in inventory.arrays}
        planned = {a.path: infos[a.path] for a in plan.arrays}
        job = CopyJob(
            portable(source), portable_target(staged), plan.options.zarr_format, planned,
            frozenset(writer.fill_matches_source(planned)),
            frozenset(a.path for a in plan.arrays if a.source_encoding is not None),
        )
        adopt_job(job, writer)
    except BaseException:
        writer.stop()  # whatever stopped it (an interrupt after the skeleton's writing began): before the pipeline discards the staged store
        raise
    return Work(copy_task, job, plan.tasks, cleanup=close_open_files, close=partial(_close, writer),
                ready=partial(_written, writer, dest), complete=writer.finish)


def _written(writer: ZarrWriter, dest: Path) -> None:
    """Wait for the skeleton the writer writes in the background."""
    try:
        writer.written()
    except OSError as exc:
        raise not_writable(dest, exc) from None


def _close(writer: ZarrWriter) -> None:
    writer.stop()
    close_open_files()


def summarize(source: Path, dest: Destination, inventory: Inventory, plan: ConvertPlan, work: Work,
              seconds: float) -> ConvertSummary:
    return ConvertSummary(
        source=str(source), dest=str(dest), arrays=len(plan.arrays), groups=len(inventory.groups),
        links=len(inventory.links), skipped=plan.skipped, logical_bytes=plan.nbytes,
        source_bytes=source.stat().st_size, dest_bytes=dest.size(), seconds=seconds,
        sharded=sum(1 for a in plan.arrays if a.shards), shards_requested=plan.options.shards.mode != "none",
        copied=(sum(1 for a in plan.arrays if a.source_encoding) if plan.options.compressor.name == "source"
                else None),
        reencoded=plan.reencoded,
    )


__all__ = ["begin", "summarize"]
