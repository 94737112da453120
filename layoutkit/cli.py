"""The ``layoutkit`` command line: parse, call the library, print. Nothing else.

Every expected failure is a :class:`~layoutkit.errors.LayoutkitError`; it is printed as
one plain sentence and the command exits with status 2 (1 for ``verify`` mismatches).
"""

from __future__ import annotations

import re
import signal
import sys
import threading
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from layoutkit.errors import LayoutkitError
from layoutkit.options import format_size, size_relative


class _Commands(typer.core.TyperGroup):
    """The command group: every command runs through :meth:`invoke`, the one place where
    an object store that fails in the middle of any command (a request that gets no
    answer even after retries, an endpoint that goes away) becomes one sentence naming
    the URL it concerned and exit 2, not obstore's traceback. ``convert`` and
    ``reorder`` say so themselves first, and remove what they wrote."""

    def invoke(self, ctx: typer.Context) -> object:
        import click

        given = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # before the command takes them
        try:
            return super().invoke(ctx)
        except (typer.Exit, click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as exc:
            store = _store_error(exc)
            if store is None:
                raise
            raise fail(_store_failure(store, tuple(given))) from None


app = typer.Typer(
    cls=_Commands,
    name="layoutkit",
    help="File-layout conversion and optimisation for scientific HDF5 data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)
out = Console()

EXIT_DIFFERENT = 1  # verify: a variant's data differ from the source's
EXIT_BAD_INPUT = 2  # every command: a refused input, one sentence, nothing written
EXIT_PATTERN_FAILED = 3  # verify: a read pattern could not run on a variant
SOURCE_SIZE = "the source's size"


class State:
    quiet = False
    timings = False


def _print_version(value: bool) -> None:
    if value:
        from layoutkit import __version__

        typer.echo(f"layoutkit {__version__}")
        raise typer.Exit()


class Interrupted:
    """Set when Ctrl-C or SIGTERM arrived. Python runs a signal handler between any two
    bytecodes, a weakref or ``__del__`` callback included, and an exception raised there
    is printed as "ignored" and lost; the flag keeps it, and the next progress step
    raises it again."""

    flag = False


def _interrupt(signum: int, frame: object) -> None:
    Interrupted.flag = True
    raise KeyboardInterrupt  # SIGTERM ends a run as Ctrl-C does: what it wrote is removed


def _unraisable(args: object) -> None:
    if isinstance(getattr(args, "exc_value", None), KeyboardInterrupt):
        Interrupted.flag = True  # raised inside a callback that cannot pass it on: kept, not printed
        return
    sys.__unraisablehook__(args)  # type: ignore[arg-type]


def interrupted(exc: BaseException) -> bool:
    """Whether an error is the interrupt in disguise: h5py calls Python back from C while it
    iterates (attributes, links), and a KeyboardInterrupt raised there comes out as a
    SystemError ("returned a result with an exception set") chained to it."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 20:
        if isinstance(cause, KeyboardInterrupt):
            return True
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return Interrupted.flag


def ended_by_interrupt(exc: BaseException, message: str) -> typer.Exit:
    """The exit (130, one line) for an interrupt or an error it caused; anything else is
    raised again as it came."""
    if not interrupted(exc):
        raise exc
    return fail(message, 130)


def check_interrupted() -> None:
    """Raise the interrupt that a callback swallowed, if any."""
    if Interrupted.flag:
        raise KeyboardInterrupt


@app.callback()
def main(
    ctx: typer.Context,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or summaries.")] = False,
    timings: Annotated[
        bool, typer.Option("--timings", help="After convert or reorder, print where the time went: each step's seconds, and the thread seconds of reading, decoding, encoding and writing inside it (even with -q).")
    ] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """File-layout conversion and optimisation for scientific HDF5 data."""
    from layoutkit.memory import tune_allocator
    from layoutkit.storage.sources import forget_stores

    State.quiet = quiet
    State.timings = timings
    tune_allocator()  # freed large blocks go back to the system, small ones are reused (layoutkit/memory.py)
    # a command starts with its own connections: one run before it in this process (a
    # test, a notebook) may have left pooled connections the server has since closed
    forget_stores()
    if threading.current_thread() is threading.main_thread():
        Interrupted.flag = False
        before = signal.signal(signal.SIGTERM, _interrupt), signal.signal(signal.SIGINT, _interrupt), sys.unraisablehook
        sys.unraisablehook = _unraisable

        def restore() -> None:
            signal.signal(signal.SIGTERM, before[0])
            signal.signal(signal.SIGINT, before[1])
            sys.unraisablehook = before[2]

        ctx.call_on_close(restore)


def fail(exc: BaseException, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _progress(total: int, label: str) -> Progress:
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


def _status(text: str) -> AbstractContextManager[Any]:
    """A spinner with ``text`` while work of unknown length runs (the walk of a large
    source's metadata takes seconds to minutes before the bar can start); on a terminal
    only, and not with -q."""
    if State.quiet or not console.is_terminal:
        return nullcontext()
    return console.status(text)


def _plan_and_run(command, src, dst, options, print_plan, dry_run, storage_options=(), tmpdir=None, icechunk=False):  # noqa: ANN001, ANN202
    """Find the layout, plan (print it on --dry-run), then run with a progress bar through
    the pipeline; errors become one line."""
    from layoutkit import pipeline
    from layoutkit.layouts import layout_for
    from layoutkit.stages import Stages
    from layoutkit.storage import as_source, destination, parse_storage_options

    stages = Stages()
    try:
        layout = layout_for(command, options)
        storage = parse_storage_options(storage_options)
        src = as_source(src, storage)
        dest = destination(dst, storage, tmpdir, icechunk)
        if not dry_run:
            pipeline.check_destination(dest, options)
        with _status(f"{command}: reading the source's metadata and planning"):
            inventory, plan = pipeline.plan(layout, src, dst, options, stages=stages)
        if dry_run:
            print_plan(plan)
            return None
        with _progress(plan.nbytes, command) as bar:
            task = bar.add_task(command, total=plan.nbytes)
            def advance(n: int) -> None:
                check_interrupted()
                bar.advance(task, n)

            summary = pipeline.run(layout, src, dest, options, advance, (inventory, plan), stages=stages)
        if State.timings:
            _print_timings(stages, options)
        return summary
    except LayoutkitError as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        if (store := _store_error(exc)) is not None:  # a request failed mid-run: what was written is gone
            raise fail(_store_failure(store, (str(src), str(dst))) + " The destination was not written.") from None
        raise ended_by_interrupt(exc, "interrupted; the destination was not written.") from None


def _print_timings(stages: Any, options: Any) -> None:
    """``--timings``: the run's steps, and the work inside each (layoutkit/stages.py)."""
    workers, scheduler = getattr(options, "workers", 1), getattr(options, "scheduler", "threads")
    out.print(f"where the time went (seconds; after each step, the thread seconds of its work and their CPU seconds "
              f"in brackets, {workers} workers):",
              highlight=False, soft_wrap=True)
    for line in stages.lines():
        out.print(line, highlight=False, soft_wrap=True)
    if scheduler not in ("threads", "serial"):
        out.print(f"  (the tasks' work ran in worker processes (--scheduler {scheduler}) and is not counted)",
                  highlight=False)


def _store_error(exc: BaseException) -> BaseException | None:
    """What an object store answered (obstore's errors), ``exc`` or an error it came from
    (HDF5 reports a failed read of its file object as its own error); None for anything
    else, and for an interrupt."""
    from obstore.exceptions import BaseError

    if interrupted(exc):
        return None
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, BaseError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _store_failure(exc: BaseException, given: tuple[str, ...]) -> str:
    """One sentence for a store's failure during a run, naming the bucket URL it concerns
    (of the arguments given, the URL whose bucket and key the request named; else the
    first URL)."""
    from layoutkit.storage import describe_store_error, is_url

    text = str(exc)
    named = [u for u in given if is_url(u) and re.match(r"[a-z][a-z0-9+.-]*:", u)]  # not endpoint_url=http://...
    named = named or [u for u in given if not u.startswith("-")] or ["the object store"]
    where = next((u for u in named if u.split("://", 1)[-1].rstrip("/") in text), named[0])
    return describe_store_error(where, exc)


RECIPE_HELP = (
    "A named recipe (`layoutkit recipes` lists them) or a recipe TOML file; "
    "options given here override it."
)
# arguments and switches that are not options of the layout or of the run (tests use it too)
NOT_LAYOUT_OPTIONS = frozenset({"src", "dst", "recipe", "dry_run", "storage_option", "tmpdir", "icechunk"})
TMPDIR_HELP = "Where a file for a bucket is written before its upload (default: TMPDIR); it needs room for the whole file."
ICECHUNK_HELP = (
    "Write DST as an Icechunk repository (a folder or an s3:// prefix; created when missing): the run is one commit "
    "on main, or nothing. Same as naming DST icechunk:LOCATION."
)
STORAGE_HELP = (
    "KEY=VALUE for a bucket destination (repeatable): endpoint_url=http://127.0.0.1:9000, region=..., "
    "anonymous=true; credentials also come from the usual AWS_* environment variables."
)


def _build_options(ctx: typer.Context, command: str, recipe: str | None):  # noqa: ANN202
    """Options from the command line over the recipe over the defaults: only what was
    typed (not typer's defaults) overrides the recipe."""
    from layoutkit.recipes import build_options

    typed = {
        name: value
        for name, value in ctx.params.items()
        if name not in NOT_LAYOUT_OPTIONS
        # by name: typer >= 0.20 ships its own copy of click, with its own enum
        and getattr(ctx.get_parameter_source(name), "name", "") in ("COMMANDLINE", "ENVIRONMENT")
    }
    try:
        return build_options(command, recipe, typed)
    except LayoutkitError as exc:
        raise fail(exc) from None


@app.command()
def sample(
    out_path: Annotated[Path, typer.Argument(metavar="OUT.h5", help="The HDF5 file to write.")],
    shots: Annotated[int, typer.Option(help="Number of shots.")] = 25,
    signals: Annotated[int, typer.Option(help="Signals per shot.")] = 70,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same file).")] = 0,
    rate_factor: Annotated[int, typer.Option(help="Every digitizer samples this many times faster: signals this many times longer (20: a few MB each).")] = 1,
) -> None:
    """Write a realistic synthetic shot archive (/shots/<SHOT>/signals/<SIGNAL>)."""
    from layoutkit.sample import estimate_logical_bytes, write_sample

    try:
        total = estimate_logical_bytes(shots, signals, seed, rate_factor)
        with _progress(total, "sample") as bar:
            task = bar.add_task("write", total=total)
            summary = write_sample(
                out_path, shots=shots, signals=signals, seed=seed,
                progress=lambda n: bar.advance(task, n), rate_factor=rate_factor,
            )
    except (LayoutkitError, ValueError, FileExistsError) as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        raise ended_by_interrupt(exc, "interrupted; nothing was written.") from None
    if not State.quiet:
        out.print(
            f"wrote {summary.path}: {summary.shots} shots x {summary.signals} signals, "
            f"{summary.datasets} signal datasets, {summary.timebases} time bases, "
            f"{format_size(summary.logical_bytes)} of data in {format_size(summary.file_bytes)}"
        )


@app.command()
def convert(
    ctx: typer.Context,
    src: Annotated[str, typer.Argument(metavar="SRC", help="HDF5 or netCDF-4 file: a path, or s3://bucket/key.h5 (gs://, az:// too).")],
    dst: Annotated[str, typer.Argument(metavar="DST", help="Zarr store to write: a directory, or s3://bucket/key.zarr (gs://, az:// too).")],
    recipe: Annotated[str | None, typer.Option(help=RECIPE_HELP)] = None,
    # choices are plain text checked by the layouts' own parsers, so a bad value gets the
    # same one-line "Expected ... Got ..." as every other option (and as a recipe)
    zarr_format: Annotated[str, typer.Option("--zarr-format", metavar="2|3", help="Zarr format version.")] = "3",
    order: Annotated[
        str,
        typer.Option(metavar="shot|signal|shot-packed", help="shot: mirror the hierarchy (one array per shot and signal); signal: pack each signal of every shot into one array (signal-major, for shot archives; best with --shards auto); shot-packed: pack the bytes of each shot's signals and time bases into one sharded array (a shot is one request; for shot archives, read with layoutkit.open)."),
    ] = "shot",
    chunks: Annotated[
        str,
        typer.Option(help="source (keep source chunks), auto (grow source chunks to --chunk-size), or a shape such as 1000,8 (-1 = whole axis)."),
    ] = "auto",
    chunk_size: Annotated[str, typer.Option(help="Target uncompressed chunk size for --chunks auto.")] = "4MiB",
    compressor: Annotated[
        str, typer.Option(help="none, zstd[:LEVEL], gzip[:LEVEL], lz4, blosc:CNAME:LEVEL:shuffle, with an optional shuffle+ prefix; or source: copy each chunk as stored, its HDF5 filters spelled as Zarr codecs (deflate as zlib, shuffle, fletcher32, zstd, blosc), re-encoding (zstd:3) only arrays whose filters have no Zarr codec.")
    ] = "zstd:3",
    shards: Annotated[str, typer.Option(help="none, auto (64 MiB shards) or a target shard size such as 128MiB (Zarr v3 only).")] = "none",
    consolidate: Annotated[bool, typer.Option("--consolidate/--no-consolidate", help="Write consolidated metadata.")] = True,
    workers: Annotated[int, typer.Option(help="Parallel workers.")] = 2,
    scheduler: Annotated[str, typer.Option(help="threads, processes (local dask cluster), serial, or a dask scheduler ADDRESS such as tcp://host:8786.")] = "threads",
    memory_limit: Annotated[str, typer.Option(help="Memory budget for data in flight, e.g. 1GiB.")] = "1GiB",
    overwrite: Annotated[bool, typer.Option(help="Replace DST if it exists: locally once the new store is complete; in a bucket the old store goes first; in Icechunk within the run's commit.")] = False,
    skip_unsupported: Annotated[bool, typer.Option(help="Leave out datasets that cannot be represented, and list them.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Print the plan (chunks, shards, codec, sizes) and write nothing.")] = False,
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
    tmpdir: Annotated[Path | None, typer.Option("--tmpdir", help=TMPDIR_HELP)] = None,
    icechunk: Annotated[bool, typer.Option("--icechunk", help=ICECHUNK_HELP)] = False,
) -> None:
    """Rewrite an HDF5 file (netCDF-4 included) as a Zarr store."""
    options = _build_options(ctx, "convert", recipe)
    summary = _plan_and_run("convert", src, dst, options, _print_plan, dry_run, storage_option, tmpdir, icechunk)
    if summary is None:
        return
    if not State.quiet:
        _print_summary(summary)


@app.command()
def reorder(
    ctx: typer.Context,
    src: Annotated[str, typer.Argument(metavar="SRC", help="HDF5 or netCDF-4 file: a path, or s3://bucket/key.h5 (gs://, az:// too).")],
    dst: Annotated[str, typer.Argument(metavar="DST", help="HDF5 file to write: a path, or s3://bucket/key.h5 (gs://, az:// too).")],
    recipe: Annotated[str | None, typer.Option(help=RECIPE_HELP)] = None,
    by: Annotated[str, typer.Option(metavar="shot|signal|group", help="Byte order: shot (all signals of a shot together), signal (one signal of all shots together), or group (the hierarchy, depth-first; works on any file).")] = "shot",
    template: Annotated[str, typer.Option(help="Where shots and signals are; {shot} and {signal} match one path component each.")] = "/shots/{shot}/signals/{signal}",
    page_size: Annotated[str, typer.Option(help="File space page size. auto = 8 MiB, or the next power of two above the largest chunk when that is larger.")] = "auto",
    compressor: Annotated[str, typer.Option(help="gzip[:LEVEL], shuffle+gzip:N, zstd[:LEVEL], lzf, lz4, blosc:CNAME:LEVEL:shuffle, or none.")] = "gzip:4",
    compress_threshold: Annotated[str, typer.Option(help="Compress datasets larger than this; smaller ones are stored uncompressed (contiguous, or compact when tiny).")] = "8KiB",
    chunks: Annotated[str, typer.Option(help="source (keep source chunks; auto for unchunked sources), auto (grow to --chunk-size), or a shape such as 1000,8.")] = "source",
    chunk_size: Annotated[str, typer.Option(help="Target uncompressed chunk size for --chunks auto.")] = "4MiB",
    dedupe: Annotated[bool, typer.Option("--dedupe/--no-dedupe", help="Store dimension scales with identical content once per shot.")] = True,
    workers: Annotated[int, typer.Option(help="Threads that read, decode and compress chunks.")] = 2,
    memory_limit: Annotated[str, typer.Option(help="Memory budget for chunks in flight, e.g. 1GiB.")] = "1GiB",
    overwrite: Annotated[bool, typer.Option(help="Replace DST if it exists (only once the new file is complete).")] = False,
    dry_run: Annotated[bool, typer.Option(help="Print the plan and write nothing.")] = False,
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
    tmpdir: Annotated[Path | None, typer.Option("--tmpdir", help=TMPDIR_HELP)] = None,
) -> None:
    """Rewrite an HDF5 file as paged-aggregation HDF5, its bytes ordered by shot, signal or group."""
    options = _build_options(ctx, "reorder", recipe)
    summary = _plan_and_run("reorder", src, dst, options, _print_reorder_plan, dry_run, storage_option, tmpdir)
    if summary is None:
        return
    if not State.quiet:
        s = summary
        out.print(
            f"reordered {s.source} -> {s.dest} by {s.by}: {s.arrays} datasets, "
            f"{s.merged_scales} duplicate dimension scales merged, {s.raw_copied} chunks copied without "
            f"re-encoding, page size {format_size(s.page_size)}, {format_size(s.logical_bytes)} of data, "
            f"{size_relative(s.dest_bytes, s.source_bytes, SOURCE_SIZE)}, {s.seconds:.1f} s"
        )


def _print_reorder_plan(plan) -> None:  # noqa: ANN001 - ReorderPlan
    table = Table(title=f"reorder plan ({plan.options.by}): {plan.source} -> {plan.dest}")
    for col in ("#", "dataset", "layout", "chunks", "compressor", "copy"):
        table.add_column(col, overflow="fold")
    for i, path in enumerate(plan.order):
        st = plan.storage[path]
        table.add_row(str(i), path, st.layout, str(st.chunks or "-"), str(st.compressor),
                      "raw" if st.raw_copy else ("encode" if st.direct else "hdf5"))
    out.print(table)
    out.print(
        f"{len(plan.order)} datasets in write order, {plan.shots} shots x {plan.signals} signals, "
        f"{len(plan.dedupe)} duplicate scales to merge, page size {format_size(plan.page_size)}"
    )


def _print_plan(plan) -> None:  # noqa: ANN001 - ConvertPlan, imported lazily
    table = Table(title=f"convert plan: {plan.source} -> {plan.dest}")
    for col in ("array", "shape", "dtype", "chunks", "shards", "codec", "read", "size"):
        table.add_column(col, overflow="fold")
    for a in plan.arrays:
        table.add_row(
            a.path, str(a.shape), a.dtype, str(a.chunks), str(a.shards or "-"),
            str(a.source_encoding or a.compressor), a.read_mode, format_size(a.nbytes),
        )
    out.print(table)
    out.print(
        f"{len(plan.arrays)} arrays, {format_size(plan.nbytes)} of data, {len(plan.tasks)} tasks "
        f"of at most {format_size(plan.task_bytes)}, Zarr v{plan.options.zarr_format}"
    )
    for path, reason in plan.skipped:
        out.print(f"skipped {path}: {reason}")


def _print_summary(s) -> None:  # noqa: ANN001 - ConvertSummary
    out.print(
        f"converted {s.source} -> {s.dest}: {s.arrays} arrays in {s.groups} groups, "
        f"{format_size(s.logical_bytes)} of data, {size_relative(s.dest_bytes, s.source_bytes, SOURCE_SIZE)}, "
        f"{s.seconds:.1f} s, {format_size(s.throughput)}/s of data, {format_size(s.stored_throughput)}/s stored"
    )
    if s.copied is not None:
        said = "; ".join(f"{path} {reason}" for path, reason in s.reencoded[:5])
        more = f" and {len(s.reencoded) - 5:,} more" if len(s.reencoded) > 5 else ""
        out.print(f"{s.copied:,} arrays copied as stored, {len(s.reencoded):,} re-encoded" +
                  (f": {said}{more}" if said else ""))
    if s.shards_requested:
        out.print(f"{s.sharded:,} arrays sharded" if s.sharded else
                  "no array large enough to shard: each fits in one chunk, so none was sharded")
    if s.links:
        out.print(f"{s.links} links recorded in {s.dest}/layoutkit.json")
    for path, reason in s.skipped:
        out.print(f"skipped {path}: {reason}")


@app.command()
def verify(
    src: Annotated[str, typer.Argument(metavar="SRC", help="The HDF5 source the variants were made from: a path, or s3://bucket/key.h5.")],
    variants: Annotated[list[str], typer.Argument(metavar="VARIANT...", help="Zarr stores and HDF5 files to check and measure: paths, or s3://bucket/key URLs (their requests are real, counted as GETs).")],
    check: Annotated[bool, typer.Option("--check/--no-check", help="Prove every variant equal to the source first.")] = True,
    patterns: Annotated[str, typer.Option(help="Comma-separated: open, shot, signal, scan, subset, axis; or all (those that apply).")] = "all",
    sample: Annotated[int, typer.Option(help="K: shots, signals or arrays drawn per pattern subset draws 4K hyperslabs of at most 4 MiB each, together at most the data's size (what scan reads).")] = 10,
    seed: Annotated[int, typer.Option(help="Random seed of the reads drawn.")] = 0,
    engine: Annotated[str, typer.Option(help="Comma-separated sweep of serial, threads, processes, distributed.")] = "threads",
    workers: Annotated[str, typer.Option(help="Comma-separated sweep of worker counts, e.g. 1,2,4.")] = "1",
    page_buffer: Annotated[str, typer.Option("--page-buffer", help="HDF5 page buffer sizes for paged variants, e.g. 0,64MiB: one per reading process (thread workers share one open file).")] = "64MiB",
    cache: Annotated[str, typer.Option(help="cold (evict the files from the OS page cache before each run), warm, or cold,warm.")] = "cold",
    latency: Annotated[str, typer.Option(help="Simulated latency per request, e.g. 0,10ms.")] = "0",
    bandwidth: Annotated[str, typer.Option(help="Simulated bandwidth, e.g. 100MB/s (0 = unlimited).")] = "0",
    repeat: Annotated[int, typer.Option(help="Repetitions per row (the table shows the median and the spread).")] = 3,
    template: Annotated[str, typer.Option(help="Where signals live in the hierarchy.")] = "/shots/{shot}/signals/{signal}",
    scheduler: Annotated[str | None, typer.Option(help="A dask scheduler address for --engine distributed.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write results.csv, results.json and plots here.")] = None,
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
) -> None:
    """Prove every variant holds exactly the source's data, then time the standard read
    patterns on the source and every variant.

    Exit status: 0 every variant equal and every pattern ran; 1 a variant's data differ
    from the source's; 2 bad input (nothing measured); 3 a read pattern could not run on
    some variant (the reason is printed under the table).
    """
    from layoutkit.storage import parse_storage_options
    from layoutkit.verify import report as rep
    from layoutkit.verify.run import (
        CACHES,
        ENGINES,
        VerifyOptions,
        parse_bandwidths,
        parse_choices,
        parse_counts,
        parse_durations,
        parse_sizes,
    )
    from layoutkit.verify.run import verify as run_verify

    bar = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeRemainingColumn(), console=console, disable=State.quiet,
    )  # fmt: skip
    checking = bar.add_task("equality", total=len(variants) if check else 0)
    timing = bar.add_task("read patterns", total=None)

    def shown() -> Progress:  # the bar appears once the input is validated, not before
        if not bar.live.is_started:
            bar.start()
        return bar

    try:
        options = VerifyOptions(
            patterns=patterns, sample=sample, seed=seed,
            engines=parse_choices(engine, ENGINES, "--engine"), workers=parse_counts(workers, "--workers"),
            page_buffers=parse_sizes(page_buffer, "page buffer size"), caches=parse_choices(cache, CACHES, "--cache"),
            latencies=parse_durations(latency), bandwidths=parse_bandwidths(bandwidth), repeat=repeat,
            template=template, scheduler=scheduler, check=check,
            storage_options=tuple(sorted(parse_storage_options(storage_option).items())),
        )  # fmt: skip
        try:
            result = run_verify(
                src, variants, options,
                on_start=shown,
                on_check=lambda _: shown().advance(checking),
                on_total=lambda n: shown().update(timing, total=n),
                on_run=lambda label: shown().update(timing, advance=1, description=f"read patterns: {label}"),
            )  # fmt: skip
        finally:
            bar.stop()
    except LayoutkitError as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        raise ended_by_interrupt(exc, "interrupted.") from None
    bad = {n: ms for n, ms in result.mismatches.items() if ms}
    src_name = result.variants[0].name  # the file's name, local or in a bucket
    for name, ms in bad.items():
        out.print(f"[bold red]{name} differs from {src_name}[/] ({len(ms)} mismatch{'es' if len(ms) > 1 else ''}):")
        for m in ms[:20]:
            out.print(f"  {m.path}: {m.what}: {m.detail}", highlight=False)
        if len(ms) > 20:
            out.print(f"  ... and {len(ms) - 20} more")
    if check and not bad:
        out.print(f"all {len(variants)} variants hold exactly the data of {src_name}")
    for name, left_out in result.skipped.items() if check else ():
        if left_out:
            out.print(f"{name} leaves out {len(left_out)} dataset(s) it cannot carry, as its layoutkit.json "
                      f"lists them (convert --skip-unsupported): {', '.join(left_out[:5])}"
                      + (" ..." if len(left_out) > 5 else ""), highlight=False)
    # a log or a pipe gets the whole table rather than columns cut to 80 characters
    wide = out if out.is_terminal else Console(width=200)
    wide.print(rep.answer_table(result.results, result.variants[0].name))
    wide.print(rep.table(result.results, f"every measurement: read patterns on {src_name} and its variants"))
    failed = rep.failures(result.results)
    for line in failed:
        out.print(f"[bold red]failed:[/] {line}", highlight=False)
    if out_dir is not None:
        shown = {k: v for k, v in vars(options).items() if k != "storage_options"}
        # the endpoint and region say where it ran; keys and secrets stay out of the report
        shown["storage_options"] = {k: ("***" if re.search("key|secret|token|password", k, re.I) else v)
                                    for k, v in options.storage_options}
        meta = {"source": str(src), "variants": [str(v) for v in variants], "options": shown,
                "mismatches": {n: [str(m) for m in ms] for n, ms in bad.items()}}
        written = rep.write(result.results, out_dir, meta)
        out.print(f"wrote under {out_dir}:")
        for _path, caption in written:
            out.print(f"  {caption}", highlight=False)
    if bad:
        raise typer.Exit(EXIT_DIFFERENT)
    if failed:
        raise typer.Exit(EXIT_PATTERN_FAILED)


@app.command()
def advise(
    src: Annotated[str, typer.Argument(metavar="SRC", help="The HDF5 file to find a layout for: a path, or s3://bucket/key.h5.")],
    patterns: Annotated[str, typer.Option(help="The reads to optimise for, NAME=WEIGHT: shot, signal, scan, subset, axis, open (default shot=1,signal=1 for a shot archive, else scan=1,subset=1).")] = "",
    latency: Annotated[str, typer.Option(help="Latency per request of the store the layout will live in (simulated), e.g. 10ms; 0 for a local disk.")] = "10ms",
    bandwidth: Annotated[str, typer.Option(help="Bandwidth per request (simulated), e.g. 100MB/s; 0 = unlimited.")] = "0",
    workers: Annotated[int, typer.Option(help="Readers in parallel (threads), as the analysis will read.")] = 2,
    budget: Annotated[str, typer.Option(help="Wall time for the whole run, e.g. 2min, 90s, 1h: it decides the sample's size and how many candidates are tried.")] = "2min",
    candidates: Annotated[str, typer.Option(help="recipes (the shipped recipes), grid (and the layouts one knob away from each), or recipe names and files, comma-separated.")] = "recipes",
    out_dir: Annotated[Path | None, typer.Option("--out", help="Where results.json, recommended.toml and advise.png go (default: SRC's name + -advice, beside it; for a SRC in a bucket, in the current folder).")] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace what an earlier run left in --out.")] = False,
    sample: Annotated[int, typer.Option(help="K: shots, signals or arrays read per pattern, as verify's --sample (at most half the smaller sample's shots).")] = 10,
    sample_shots: Annotated[int | None, typer.Option("--sample-shots", help="Shots in the larger sample (default: as many as let every candidate fit 80% of the budget).")] = None,
    seed: Annotated[int, typer.Option(help="Random seed of the reads drawn.")] = 0,
    repeat: Annotated[int, typer.Option(help="Repetitions of each measurement (the median counts).")] = 3,
    price_per_1000_get: Annotated[float, typer.Option("--price-per-1000-get", help="Dollars per 1000 GET requests, for the request-cost column.")] = 0.0004,
    template: Annotated[str, typer.Option(help="Where signals live in the hierarchy.")] = "/shots/{shot}/signals/{signal}",
    tmpdir: Annotated[Path | None, typer.Option(help="Where the samples and candidates are written while advise runs (default: TMPDIR); removed at the end.")] = None,
    target: Annotated[str | None, typer.Option(help="A bucket prefix (s3://bucket/scratch) to write the candidates to and read them from, with real requests; emptied at the end. --latency then adds to the bucket's own.")] = None,
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
) -> None:
    """Try candidate layouts on samples of SRC, predict each one's read time at full size
    under the given conditions, recommend one and write its recipe."""
    from layoutkit.advise.run import AdviseOptions, parse_budget, write_command, write_outputs
    from layoutkit.advise.run import advise as run_advise
    from layoutkit.errors import InvalidOptionError
    from layoutkit.plan import parse_template
    from layoutkit.storage import parse_storage_options
    from layoutkit.verify.run import parse_bandwidths, parse_durations

    bar = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeRemainingColumn(), console=console, disable=State.quiet,
    )  # fmt: skip
    task = bar.add_task("advise: sampling", total=None)
    try:
        out_path = out_dir if out_dir is not None else _advice_folder(src)
        if out_path.exists() and (not out_path.is_dir() or any(out_path.iterdir())) and not overwrite:
            raise InvalidOptionError(f"--out {str(out_path)!r} exists and is not empty; choose another or pass --overwrite.")
        lat, bw = parse_durations(latency), parse_bandwidths(bandwidth)
        if len(lat) != 1 or len(bw) != 1:
            raise InvalidOptionError(f"Expected one --latency and one --bandwidth. Got {latency!r} and {bandwidth!r}.")
        options = AdviseOptions(
            patterns=patterns, latency=lat[0], bandwidth=bw[0], workers=workers, budget=parse_budget(budget),
            candidates=candidates, template=parse_template(template), sample=sample, seed=seed, repeat=repeat,
            price_per_1000_get=price_per_1000_get, shots=sample_shots, tmpdir=str(tmpdir) if tmpdir else None,
            target=target, storage_options=tuple(sorted(parse_storage_options(storage_option).items())),
        )  # fmt: skip
        if price_per_1000_get < 0:
            raise InvalidOptionError(f"Expected --price-per-1000-get of 0 or more. Got {price_per_1000_get}.")
        with bar:
            result = run_advise(
                src, options,
                on_total=lambda n: bar.update(task, total=n, description="advise: candidates"),
                on_step=lambda name: (check_interrupted(), bar.update(task, advance=1, description=f"advise: {name}")),
            )  # fmt: skip
        if overwrite and out_path.is_dir():
            for name in ("results.json", "recommended.toml", "advise.png"):
                (out_path / name).unlink(missing_ok=True)
        written = write_outputs(result, out_path)
    except LayoutkitError as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        raise ended_by_interrupt(exc, "interrupted; nothing was written.") from None
    wide = out if out.is_terminal else Console(width=200)
    wide.print(_advice_table(result))
    for t in result.trials:
        if t.status != "measured":
            out.print(f"{t.name}: {t.status}: {t.reason}", highlight=False)
    if result.not_tried:
        out.print(f"not tried within the budget: {', '.join(result.not_tried)}", highlight=False)
    best = result.recommended
    out.print(f"advise took {result.elapsed:.0f} s of a {options.budget:.0f} s budget; wrote "
              + ", ".join(str(p) for p in written), highlight=False)
    order = f" ({best.order} order)" if result.unit == "shots" else ""
    out.print(f"recommended: {best.name}{order}, predicted {best.weighted_seconds:.3g} s per weighted "
              "pattern run at full size. Write it with:", highlight=False)
    out.print(write_command(result, written[1]), highlight=False, soft_wrap=True)


def _advice_folder(src: str) -> Path:
    """advise's default --out: SRC's name + -advice, beside a local SRC; in the current
    folder for a SRC in a bucket."""
    from layoutkit.storage import ObjectSource, as_source

    source = as_source(src)
    if isinstance(source, ObjectSource):
        return Path(f"{source.stem}-advice")
    return source.with_name(f"{source.stem}-advice")


def _advice_table(result) -> Table:  # noqa: ANN001 - AdviseResult, imported lazily
    unit = "shots" if result.unit == "shots" else "MB"
    scale = (lambda x: f"{x:.0f}") if result.unit == "shots" else (lambda x: f"{x / 1e6:.0f}")
    o = result.options
    title = (
        f"advise: {Path(result.source).name}, predicted at full size ({scale(result.scales[2])} {unit}; samples of "
        f"{scale(result.scales[0])} and {scale(result.scales[1])}), {o.latency * 1e3:g} ms latency, {o.workers} "
        f"workers, K={result.reads}; best first"
    )
    t = Table(title=title, title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("candidate")
    t.add_column("writes with")
    for p, w in result.weights.items():
        t.add_column(f"{p} s (w {w:g})", justify="right")
        t.add_column(f"{p} GETs", justify="right")
    t.add_column("weighted s", justify="right")
    t.add_column("size", justify="right")
    t.add_column(f"$ per 1000 runs (at ${o.price_per_1000_get:g}/1000 GET)", justify="right")
    alike = False
    for i, trial in enumerate(result.ranked, 1):
        cells = []
        cost = 0.0
        for p, w in result.weights.items():
            fit = trial.patterns[p]
            pred = fit.prediction
            mark = "*" if fit.may_be_low(p) else ""
            alike = alike or bool(mark)
            cells += [f"{pred.seconds:.3g}{mark}", f"{pred.requests:,.0f}"]
            cost += pred.requests * w / sum(result.weights.values())
        t.add_row(str(i), trial.name, trial.command, *cells, f"{trial.weighted_seconds:.3g}",
                  format_size(trial.predicted_bytes), f"{cost * o.price_per_1000_get:.4f}")
    if alike:
        t.caption = ("* both samples made the same requests for a read that grows with the archive (they fit the "
                     "same objects, and no geometry counted its pages): no growth is predicted, and the time may "
                     "be low. Larger samples "
                     "(--sample-shots, --budget) show the growth.")
        t.caption_justify = "left"
    return t


recipes_app = typer.Typer(
    help="Named layouts for convert and reorder: list them, show one, or read one back from a variant.",
    add_completion=False,
)
app.add_typer(recipes_app, name="recipes")


@recipes_app.callback(invoke_without_command=True)
def recipes(ctx: typer.Context) -> None:
    """List the shipped recipes and when to use each (`recipes show NAME` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    from layoutkit.recipes import load_recipe, shipped_recipes

    table = Table(title="layoutkit recipes: convert/reorder SRC DST --recipe NAME", show_lines=True)
    for col in ("recipe", "command", "when to use it"):
        table.add_column(col, overflow="fold")
    for name in shipped_recipes():
        recipe = load_recipe(name)
        table.add_row(name, recipe.command, recipe.description)
    out.print(table)


@recipes_app.command("show")
def recipes_show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="A shipped recipe's name, or a recipe file.")],
) -> None:
    """Check a recipe and print its TOML."""
    from layoutkit.recipes import find_recipe, parse_recipe

    try:
        found, text = find_recipe(name)
        parse_recipe(text, name=found, source=name)
    except LayoutkitError as exc:
        raise fail(exc) from None
    typer.echo(text, nl=not text.endswith("\n"))


@recipes_app.command("from")
def recipes_from(
    variant: Annotated[str, typer.Argument(metavar="VARIANT", help="A Zarr store or HDF5 file layoutkit wrote: a path, or s3://bucket/key.")],
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
) -> None:
    """Print the recipe a variant was written with, as TOML that --recipe takes."""
    from layoutkit.recipes import recipe_toml
    from layoutkit.storage import parse_storage_options

    try:
        text = recipe_toml(variant, parse_storage_options(storage_option))
    except LayoutkitError as exc:
        raise fail(exc) from None
    typer.echo(text, nl=False)


@app.command()
def inspect(
    src: Annotated[str, typer.Argument(metavar="SRC", help="An HDF5 / netCDF-4 file (a path, or s3://bucket/key.h5) or a Zarr store (a directory).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON, for scripts.")] = False,
    template: Annotated[str, typer.Option(help="Where shots and signals are; {shot} and {signal} match one path component each.")] = "/shots/{shot}/signals/{signal}",
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
    workers: Annotated[int, typer.Option(help="Processes that read the datasets of a local HDF5 file with thousands of them.")] = 2,
) -> None:
    """Diagnose how a file is laid out (chunks, filters, metadata, scales) and what to do about it."""
    from layoutkit.inspect import inspect_path
    from layoutkit.storage import parse_storage_options

    try:
        with Progress(TextColumn("[bold]inspect: datasets"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console, disable=State.quiet or not console.is_terminal, transient=True) as bar:
            task = bar.add_task("inspect", total=None)

            def progress(done: int, total: int) -> None:
                check_interrupted()
                bar.update(task, completed=done, total=total)

            report = inspect_path(src, template=template, storage_options=parse_storage_options(storage_option),
                                  workers=workers, progress=progress)
    except LayoutkitError as exc:
        raise fail(exc) from None
    if json_out:
        typer.echo(report.to_json())
    else:
        _print_inspect(report)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _header_spread(regions: int) -> str:
    if regions <= 1:
        return "object headers together within 8 MiB"
    return f"object headers spread over {regions:,} stretches of 8 MiB"


def _pipeline_label(pipeline: str) -> str:
    return pipeline + (" (level 0: stored uncompressed)" if pipeline.endswith(("gzip:0", "zlib:0")) else "")


def _print_inspect(r) -> None:  # noqa: ANN001 - InspectReport, imported lazily
    from rich.columns import Columns

    out.print(f"[bold]{r.path}[/]: {r.format}, {format_size(r.total_bytes)} on disk, inspected in {r.seconds:.1f} s",
              highlight=False)
    unwritten = r.logical_bytes - sum(c.logical_bytes for c in r.codecs)
    out.print(f"{_count(r.groups, 'group')}, {_count(r.arrays, 'array')}: {format_size(r.logical_bytes)} of data"
              + (f" ({format_size(unwritten)} never written: it reads as the fill value)" if unwritten > 0 else "")
              + ", "
              f"{size_relative(r.stored_bytes, r.logical_bytes, 'the data' + chr(39) + 's size')}; "
              f"metadata {format_size(r.metadata_bytes)}", highlight=False)
    out.print("layouts: " + ", ".join(f"{k} {v:,}" for k, v in sorted(r.layouts.items(), key=lambda kv: -kv[1]))
              + ("; filters: " + ", ".join(f"{k} {v:,}" for k, v in sorted(r.filters.items())) if r.filters else ""),
              highlight=False)
    if (fs := r.file_space) is not None:
        out.print(f"file space: {fs.strategy.removeprefix('H5F_FSPACE_STRATEGY_')}, page size {format_size(fs.page_size)}, "
                  f"persist {'yes' if fs.persist else 'no'}, user block {fs.userblock_bytes:,} B; "
                  f"metadata {fs.metadata_bytes:,} B (as h5stat -S), {_header_spread(fs.header_regions)}, "
                  f"raw data {fs.raw_bytes:,} B, free {fs.free_bytes:,} B", highlight=False)
    if r.consolidated is not None:
        out.print(f"consolidated metadata: {'yes' if r.consolidated else 'no'}")
    codecs = Table(title="compression", title_justify="left")
    for col in ("pipeline", "arrays", "chunks", "data", "stored", "ratio"):
        codecs.add_column(col, justify="left" if col == "pipeline" else "right")
    for c in r.codecs:
        codecs.add_row(_pipeline_label(c.pipeline), f"{c.arrays:,}", f"{c.chunks:,}", format_size(c.logical_bytes),
                       format_size(c.stored_bytes), f"{c.ratio:.2f}" if c.stored_bytes else "-")
    hist = Table(title=f"{r.chunks:,} chunks, {r.small_chunks:,} under 16 KiB", title_justify="left")
    hist.add_column("stored size")
    hist.add_column("chunks", justify="right")
    hist.add_column("")
    top = max((b.count for b in r.chunk_histogram), default=0) or 1
    short = lambda n: f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"  # noqa: E731 - the bins are powers of 4
    for b in r.chunk_histogram:
        label = f"< {short(b.high)}" if b.low == 0 else (f">= {short(b.low)}" if b.high is None else
                                                        f"{short(b.low)} - {short(b.high)}")
        hist.add_row(label, f"{b.count:,}", "#" * round(12 * b.count / top))
    out.print(Columns([codecs, hist]) if r.chunks else codecs)
    if r.scales is not None:
        out.print(f"dimension scales: {r.scales:,}, of which {r.duplicate_scales:,} repeat another by content"
                  + (f" ({r.shot_duplicate_scales:,} within the same shot)" if r.template_matches else ""),
                  highlight=False)
    if r.template_matches:  # a file that is no shot archive gets no line about it
        out.print(f"template {r.template}: {r.template_matches:,} arrays match, {r.shots:,} shots x {r.signals:,} signals",
                  highlight=False)
    out.print("[bold]recommendations[/]")
    for i, rec in enumerate(r.recommendations, 1):
        out.print(f"{i}. {rec.finding}\n   -> {rec.action}", highlight=False)


def run() -> None:  # pragma: no cover - console entry point alias
    app(prog_name="layoutkit")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
