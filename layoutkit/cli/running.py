"""What the commands that write share: options from the command line over a recipe, the
plan and the run with a progress bar, where the time went, and a store's failure said
in one sentence."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from layoutkit.cli.core import (
    State,
    check_interrupted,
    console,
    ended_by_interrupt,
    fail,
    out,
    store_error,
    store_failure,
)
from layoutkit.errors import LayoutkitError


def progress_bar(total: int, label: str) -> Progress:
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=State.quiet or not console.is_terminal and total == 0,
        transient=False,
    )


def status(text: str) -> AbstractContextManager[Any]:
    """A spinner with ``text`` while work of unknown length runs (the walk of a large
    source's metadata takes seconds to minutes before the bar can start); on a terminal
    only, and not with -q."""
    if State.quiet or not console.is_terminal:
        return nullcontext()
    return console.status(text)


def plan_and_run(command, src, dst, options, print_plan, dry_run, storage_options=(), tmpdir=None, icechunk=False,  # noqa: ANN001, ANN202
                 concat_dim=None):
    """Find the layout, plan (print it on --dry-run), then run with a progress bar through
    the pipeline; errors become one line. The sources' digests, which a new store
    records, are computed meanwhile (:func:`~layoutkit.storage.sources.digests_ahead`)."""
    from layoutkit import pipeline
    from layoutkit.archiving import batches
    from layoutkit.layouts import layout_for
    from layoutkit.plan import DEFAULT_TEMPLATE
    from layoutkit.stages import Stages
    from layoutkit.storage import SourceSet, as_sources, digests_ahead, parse_storage_options

    stages = Stages()
    try:
        layout = layout_for(command, options)
        check_name(command, layout.format, str(dst), icechunk)
        storage = parse_storage_options(storage_options)
        src = as_sources(src, getattr(options, "template", DEFAULT_TEMPLATE), storage, concat_dim)
        dest = pipeline.destination_for(layout, dst, storage, tmpdir, icechunk)
        if not dry_run:
            pipeline.check_destination(dest, options, layout)
        with digests_ahead(src, not dry_run and layout.format == "zarr" and layout.rewrites):
            with status(f"{command}: reading the source's metadata and planning"):
                src, inventory, plan = batches.plan(layout, src, dst, options, stages=stages)
            parts = batches.parts(src) if batches.in_batches(src) else None
            if dry_run:
                print_plan(plan)
                if isinstance(src, SourceSet):
                    from layoutkit.hdf5.combined import describe

                    out.print(describe(parts[0] if parts else src, inventory), highlight=False)
                if parts:
                    out.print(f"written in {len(parts)} batches of at most {src.batch:,} files (--batch-files): the "
                              "first as planned above, each next appended to it; the driver holds one batch's "
                              "inventory at a time", highlight=False)
                return None
            return run_with_bar(command, lambda advance, stages: batches.run(
                layout, src, dest, options, advance, (inventory, plan), stages, storage, tmpdir), (src, dst),
                None if parts else plan.nbytes, stages, options, "the destination was not written")
    except LayoutkitError as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        raise _said(exc, (src, dst), "the destination was not written") from None


def run_with_bar(label: str, work: Any, given: tuple[Any, ...], total: int | None = None, stages: Any = None,
                 options: Any = None, outcome: str = "the store is as it was") -> Any:
    """``work(progress, stages)`` with a progress bar of the bytes it writes (``total``:
    None when unknown ahead); errors become one line, ending with ``outcome``."""
    from layoutkit.stages import Stages

    stages = stages or Stages()
    try:
        with progress_bar(total or 0, label) as bar:
            task = bar.add_task(label, total=total)

            def advance(n: int) -> None:
                check_interrupted()
                bar.advance(task, n)

            result = work(advance, stages)
        if State.timings:
            print_timings(stages, options)
        return result
    except LayoutkitError as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        raise _said(exc, given, outcome) from None


def _said(exc: BaseException, given: tuple[Any, ...], outcome: str) -> BaseException:
    """A failure mid-run in one line: a request a store refused, or an interruption."""
    if (store := store_error(exc)) is not None:  # a request failed mid-run: what was written is gone
        return fail(store_failure(store, tuple(map(str, given))) + f" {outcome[0].upper()}{outcome[1:]}.")
    return ended_by_interrupt(exc, f"interrupted; {outcome}.")


ZARR_NAMES = (".zarr", ".zarr/")
HDF5_NAMES = (".h5", ".hdf5", ".he5", ".hdf", ".nc", ".nc4")


def check_name(command: str, fmt: str, dst: str, icechunk: bool) -> None:
    """Refuse a destination whose name says the other format: ``convert ... out.h5``
    would write a Zarr directory named like a file, ``reorder ... out.zarr`` an HDF5 file
    named like a store."""
    from layoutkit.errors import InvalidOptionError
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


def run_options(ctx: typer.Context) -> dict[str, Any]:
    """The options typed on the command line (not typer's defaults), by name; a former
    spelling as its present one (``--order signal`` is ``--layout signal-major``)."""
    typed = {
        name: value
        for name, value in ctx.params.items()
        if name not in NOT_LAYOUT_OPTIONS
        # by name: typer >= 0.20 ships its own copy of click, with its own enum
        and getattr(ctx.get_parameter_source(name), "name", "") in ("COMMANDLINE", "ENVIRONMENT")
    }
    for former, name in FORMER_OPTIONS.items():
        if former in typed:
            value = typed.pop(former)
            if name in typed:
                raise fail(f"--{former} is the former spelling of --{name}; give one of them.")
            typed[name] = value
    return typed


def print_timings(stages: Any, options: Any) -> None:
    """``--timings``: the run's steps, and the work inside each (layoutkit/stages.py)."""
    workers, scheduler = getattr(options, "workers", "?"), getattr(options, "scheduler", "threads")
    out.print(f"where the time went (seconds; after each step, the thread seconds of its work and their CPU seconds "
              f"in brackets, {workers} workers):",
              highlight=False, soft_wrap=True)
    for line in stages.lines():
        out.print(line, highlight=False, soft_wrap=True)
    if scheduler not in ("threads", "serial"):
        out.print(f"  (the tasks' work ran in worker processes (--scheduler {scheduler}) and is not counted)",
                  highlight=False)


RECIPE_HELP = (
    "A named recipe (`layoutkit recipes` lists them) or a recipe TOML file; "
    "options given here override it."
)
# arguments and switches that are not options of the layout or of the run (tests use it too)
FORMER_OPTIONS = {"order": "layout"}  # options renamed: the former name is still taken
NOT_LAYOUT_OPTIONS = frozenset({"src", "dst", "recipe", "dry_run", "storage_option", "tmpdir", "icechunk", "sources_from",
                                "append", "concat_dim"})
SOURCES_HELP = (
    "HDF5 or netCDF-4 file(s): paths, s3://bucket/key.h5 (gs://, az:// too), or quoted globs ('exports/shots-*.h5', "
    "'s3://bucket/exports/*.h5'). Several are written as one archive: the union of their shots."
)
CONCAT_DIM_HELP = ("netCDF sources without shots: the dimension to join them along (default: the unlimited one they "
                   "share).")
SOURCES_FROM_HELP = "A text file listing more sources, one per line (blank lines and lines starting with # are skipped)."


def sources_given(src: list[str], sources_from: Path | None) -> list[str]:
    """The sources named on the command line, then those of a list file."""
    listed: list[str] = []
    if sources_from is not None:
        try:
            text = Path(sources_from).read_text()
        except OSError as exc:
            raise fail(f"The list of sources {str(sources_from)!r} cannot be read ({exc.strerror or exc}).") from None
        listed = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [*src, *listed]
TMPDIR_HELP = "Where a file for a bucket is written before its upload (default: TMPDIR); it needs room for the whole file."
ICECHUNK_HELP = (
    "Write DST as an Icechunk repository (a folder or an s3:// prefix; created when missing): the run is one commit "
    "on main, or nothing. Same as naming DST icechunk:LOCATION."
)
STORAGE_HELP = (
    "KEY=VALUE for a bucket destination (repeatable): endpoint_url=http://127.0.0.1:9000, region=..., "
    "anonymous=true; credentials also come from the usual AWS_* environment variables."
)


def options_from(ctx: typer.Context, command: str, recipe: str | None):  # noqa: ANN202
    """Options from the command line over the recipe over the defaults: only what was
    typed (not typer's defaults) overrides the recipe."""
    from layoutkit.recipes import build_options

    typed = run_options(ctx)
    try:
        return build_options(command, recipe, typed)
    except LayoutkitError as exc:
        raise fail(exc) from None




__all__ = ["CONCAT_DIM_HELP", "FORMER_OPTIONS", "ICECHUNK_HELP", "NOT_LAYOUT_OPTIONS", "RECIPE_HELP", "SOURCES_FROM_HELP", "SOURCES_HELP",
           "STORAGE_HELP", "TMPDIR_HELP", "check_name", "options_from", "plan_and_run", "print_timings", "progress_bar",
           "run_options", "run_with_bar", "sources_given", "status"]
