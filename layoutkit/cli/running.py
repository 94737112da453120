"""What the commands that write share: options from the command line over a recipe, the
plan and the run with a progress bar, where the time went, and a store's failure said
in one sentence."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from layoutkit.cli.core import (
    State,
    check_interrupted,
    console,
    disk_failure,
    ended_by_interrupt,
    fail,
    out,
    store_error,
    store_failure,
)
from layoutkit.errors import LayoutkitError


class _Bar(Progress):
    """A progress bar that leaves nothing behind when the work under it fails: in a log
    (not a terminal) a bar prints its last frame as it stops, which above an error reads
    as what the work did ("reorder 0.0/812.4 KiB")."""

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            stop_quietly(self)
        elif self.live.is_started:  # rich's stop ends a log's line each time it is called
            super().__exit__(exc_type, exc, tb)


def stop_quietly(bar: Progress) -> None:
    """Stop ``bar`` printing nothing (a run that failed: rich prints the bar's last frame
    and a line's end in a log)."""
    if not bar.live.is_started:
        return
    quiet, bar.live.console.quiet = bar.live.console.quiet, True
    try:
        bar.live.transient = True
        bar.stop()
    finally:
        bar.live.console.quiet = quiet


@contextmanager
def stopped_after(bar: Progress) -> Iterator[Progress]:
    """A bar started when first shown (after the input is checked): stopped at the end if
    it was, quietly when the work failed (:func:`stop_quietly`)."""
    try:
        yield bar
    except BaseException:
        stop_quietly(bar)
        raise
    finally:
        if bar.live.is_started:  # stopping a bar never shown prints an empty line
            bar.stop()


def progress_bar(total: int, label: str) -> Progress:
    return _Bar(
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
    """``layoutkit.convert`` or ``layoutkit.reorder`` (:mod:`layoutkit.api`) with a spinner
    while the sources are walked and planned, then a progress bar (or, on --dry-run, the
    plan printed); errors become one line."""
    import layoutkit.api as api
    from layoutkit.hdf5.combined import describe
    from layoutkit.storage import SourceSet, parse_storage_options
    from layoutkit.timings import Stages

    stages = Stages()
    call = api.convert if command == "convert" else api.reorder
    extra = {"icechunk": icechunk} if command == "convert" else {}
    with ExitStack() as shown:
        spinner = ExitStack()
        spinner.enter_context(status(f"{command}: reading the source's metadata and planning"))
        shown.callback(spinner.close)
        bar: Progress | None = None
        task: Any = None

        def planned(plan: Any) -> None:  # the spinner gives way to the bar, or to the printed plan
            nonlocal bar, task
            spinner.close()
            if dry_run:
                print_plan(plan.plan)
                if isinstance(plan.source, SourceSet):
                    out.print(describe(plan.batches[0] if plan.batches else plan.source, plan.inventory),
                              highlight=False)
                if plan.batches:
                    out.print(f"written in {len(plan.batches)} batches of at most {plan.source.batch:,} files "
                              "(--batch-files): the first as planned above, each next appended to it; the driver "
                              "holds one batch's inventory at a time", highlight=False)
                return
            bar = shown.enter_context(progress_bar(plan.nbytes or 0, command))
            task = bar.add_task(command, total=plan.nbytes)

        def advance(n: int) -> None:
            check_interrupted()
            if bar is not None:
                bar.advance(task, n)

        try:
            result = call(src, dst, options, storage_options=parse_storage_options(storage_options), tmpdir=tmpdir,
                          concat_dim=concat_dim, dry_run=dry_run, progress=advance, on_plan=planned, stages=stages,
                          **extra)
        except LayoutkitError as exc:
            raise fail(exc) from None
        except (KeyboardInterrupt, Exception) as exc:
            raise _said(exc, (src, dst), "the destination was not written") from None
    if dry_run:
        return None
    if State.timings:
        print_timings(stages, options)
    return result


def run_with_bar(label: str, work: Any, given: tuple[Any, ...], total: int | None = None, stages: Any = None,
                 options: Any = None, outcome: str = "the store is as it was") -> Any:
    """``work(progress, stages)`` with a progress bar of the bytes it writes (``total``:
    None when unknown ahead); errors become one line, ending with ``outcome``."""
    from layoutkit.timings import Stages

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
    """A failure mid-run in one line: a request a store refused, a disk that refused
    more, or an interruption."""
    if (store := store_error(exc)) is not None:  # a request failed mid-run: what was written is gone
        return fail(store_failure(store, tuple(map(str, given))) + f" {outcome[0].upper()}{outcome[1:]}.")
    if (disk := disk_failure(exc)) is not None:
        return fail(f"{disk} {outcome[0].upper()}{outcome[1:]}.")
    return ended_by_interrupt(exc, f"interrupted; {outcome}.")


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
    """``--timings``: the run's steps, and the work inside each (layoutkit/timings.py)."""
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
NOT_LAYOUT_OPTIONS = frozenset({"src", "dst", "recipe", "dry_run", "detail", "storage_option", "tmpdir", "icechunk",
                                "sources_from", "append", "concat_dim"})
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
           "STORAGE_HELP", "TMPDIR_HELP", "options_from", "plan_and_run", "print_timings", "progress_bar",
           "run_options", "run_with_bar", "sources_given", "status"]
