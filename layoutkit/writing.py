"""``convert`` and ``reorder`` from what their caller names to the written output, once:
:func:`layoutkit.convert` and :func:`layoutkit.reorder` call :func:`write`, and the
command line calls those functions (:mod:`layoutkit.cli` adds its spinner, progress bar
and printing, nothing else).

:func:`write` checks what can be checked before any work (the layout and its options, a
destination named as the other format, the destination itself), parses the sources and
the destination once, walks and plans the sources (:func:`layoutkit.appending.batches.plan`),
and runs the plan (:func:`layoutkit.appending.batches.run`: one run of
:mod:`layoutkit.pipeline`, or batches). Meanwhile the sources' digests, which a new Zarr
store records, are computed in a background thread
(:func:`~layoutkit.storage.sources.digests_ahead`). With ``dry_run`` it returns the
:class:`Planned` write instead, and writes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from layoutkit import pipeline
from layoutkit.appending import batches
from layoutkit.errors import InvalidOptionError
from layoutkit.hdf5.inventory import Inventory
from layoutkit.layout import AnyLayout
from layoutkit.layouts import layout_for
from layoutkit.storage import Destination, Source, SourceSet, as_sources, digests_ahead
from layoutkit.templates import DEFAULT_TEMPLATE
from layoutkit.timings import Stages

ZARR_NAMES = (".zarr", ".zarr/")
HDF5_NAMES = (".h5", ".hdf5", ".he5", ".hdf", ".nc", ".nc4")


@dataclass(frozen=True)
class Planned:
    """A write checked and planned, not run: what ``--dry-run`` prints."""

    command: str
    layout: AnyLayout
    source: Source
    """The sources, parsed (a :class:`~layoutkit.storage.SourceSet` when several, its batch decided)."""
    dest: Destination
    inventory: Inventory
    """What the walk found in the sources (of the first batch, when written in batches)."""
    plan: Any
    """The layout's plan (of the first batch, when written in batches)."""

    @property
    def batches(self) -> list[SourceSet]:
        """The batches the sources are written in, in order; empty when written in one run."""
        return batches.parts(self.source) if batches.in_batches(self.source) else []  # type: ignore[arg-type]

    @property
    def nbytes(self) -> int | None:
        """The bytes of data the run writes, when known ahead (not for a run in batches)."""
        return None if self.batches else int(self.plan.nbytes)


def write(
    command: str,
    src: Any,
    dst: str | os.PathLike[str] | Destination,
    options: Any,
    *,
    storage_options: dict[str, str] | None = None,
    tmpdir: str | os.PathLike[str] | None = None,
    icechunk: bool = False,
    concat_dim: str | None = None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    stages: Stages | None = None,
    on_plan: Callable[[Planned], None] | None = None,
    plan: tuple[Inventory, Any] | None = None,
) -> Any:
    """Write ``src`` at ``dst`` with ``command`` ("convert" or "reorder") and its options:
    the layout's summary, or with ``dry_run`` the :class:`Planned` write (nothing is
    written, the destination is not checked). ``on_plan`` is called with the plan before
    the run starts (the command line turns its spinner into a progress bar there);
    ``progress`` with the bytes of each finished task; ``stages`` gets where the time went;
    ``plan``, an ``(inventory, plan)`` of :func:`layoutkit.plan_convert` or
    :func:`layoutkit.plan_reorder`, saves walking the sources again.

    Raises
    ------
    LayoutkitError
        Every expected failure, before any work where it can be known then; the
        destination is left as it was.
    """
    stages = stages or Stages()
    layout = layout_for(command, options)
    storage = dict(storage_options or {})
    dest: Destination
    if isinstance(dst, (str, os.PathLike)):
        check_name(command, layout.format, os.fspath(dst), icechunk)
        dest = pipeline.destination_for(layout, dst, storage, tmpdir, icechunk)
    else:  # parsed already
        dest = dst
    source = as_sources(src, getattr(options, "template", DEFAULT_TEMPLATE), storage, concat_dim)
    if not dry_run:
        pipeline.check_destination(dest, options, layout)
    with digests_ahead(source, not dry_run and layout.format == "zarr" and layout.rewrites):
        if plan is None:
            source, inventory, the_plan = batches.plan(layout, source, str(dst), options, stages=stages)
        else:
            inventory, the_plan = plan
        planned = Planned(command, layout, source, dest, inventory, the_plan)
        if on_plan is not None:
            on_plan(planned)
        if dry_run:
            return planned
        return batches.run(layout, source, dest, options, progress, (inventory, the_plan), stages, storage, tmpdir)


def check_name(command: str, fmt: str, dst: str, icechunk: bool = False) -> None:
    """Refuse a destination whose name says the other format: ``convert ... out.h5``
    would write a Zarr directory named like a file, ``reorder ... out.zarr`` an HDF5 file
    named like a store."""
    from layoutkit.storage.icechunk_repo import is_icechunk

    name = dst.rstrip("/").lower()
    if icechunk or is_icechunk(dst):
        return
    if fmt == "zarr" and name.endswith(HDF5_NAMES):
        raise InvalidOptionError(f"{command} writes a Zarr store, and {dst!r} is named as an HDF5 file: name it "
                                 f"{dst.rstrip('/').rsplit('.', 1)[0]}.zarr (reorder writes paged HDF5 files).")
    if fmt == "hdf5" and name.endswith(ZARR_NAMES):
        raise InvalidOptionError(f"{command} writes a paged HDF5 file, and {dst!r} is named as a Zarr store: name it "
                                 f"{dst.rstrip('/').rsplit('.', 1)[0]}.h5 (convert writes Zarr stores).")


__all__ = ["HDF5_NAMES", "ZARR_NAMES", "Planned", "check_name", "write"]
