"""``layoutkit convert``: an HDF5 source as a Zarr store, in any Zarr layout."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from layoutkit.cli.core import DETAIL_ROWS, State, app, fail, out
from layoutkit.cli.running import (
    CONCAT_DIM_HELP,
    ICECHUNK_HELP,
    RECIPE_HELP,
    SOURCES_FROM_HELP,
    SOURCES_HELP,
    STORAGE_HELP,
    TMPDIR_HELP,
    options_from,
    plan_and_run,
    sources_given,
)
from layoutkit.layouts import layouts_of
from layoutkit.options import format_size, plural

LAYOUT_NAMES = [layout.name for layout in layouts_of("convert")]
LAYOUT_HELP = "Which layout: " + "; ".join(f"{layout.name}: {layout.description}" for layout in layouts_of("convert")) + "."


@app.command()
def convert(
    ctx: typer.Context,
    # both optional to typer, so that `convert --sources-from LIST DST` parses (one argument: DST); checked below
    src: Annotated[list[str] | None, typer.Argument(metavar="SRC...", help=SOURCES_HELP, show_default=False)] = None,
    dst: Annotated[str, typer.Argument(metavar="DST", help="Zarr store to write: a directory, or s3://bucket/key.zarr (gs://, az:// too).", show_default=False)] = "",
    recipe: Annotated[str | None, typer.Option(help=RECIPE_HELP)] = None,
    # choices are plain text checked by the layouts' own parsers, so a bad value gets the
    # same one-line "Expected ... Got ..." as every other option (and as a recipe)
    zarr_format: Annotated[str, typer.Option("--zarr-format", metavar="2|3", help="Zarr format version.")] = "3",
    layout: Annotated[
        str, typer.Option(metavar="|".join(LAYOUT_NAMES), help=LAYOUT_HELP)
    ] = LAYOUT_NAMES[0],
    order: Annotated[
        str | None, typer.Option(hidden=True, help="Former spelling of --layout (shot, signal, shot-packed).")
    ] = None,
    template: Annotated[str, typer.Option(help="Where shots and signals are, for the layouts that pack them; {shot} and {signal} match one path component each.")] = "/shots/{shot}/signals/{signal}",
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
    batch_files: Annotated[int, typer.Option(help="Many sources: write them this many files at a time, the first batch converted and each next appended, so the driver holds one batch's metadata (0: as many files as hold ~100,000 datasets).")] = 0,
    overwrite: Annotated[bool, typer.Option(help="Replace DST if it exists: locally once the new store is complete; in a bucket the old store goes first; in Icechunk within the run's commit.")] = False,
    skip_unsupported: Annotated[bool, typer.Option(help="Leave out datasets that cannot be represented, and list them.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Print the plan (each array's stored type, chunks, shards, codec, size, and the type rules it is written with) and write nothing: the arrays by kind, a row each with --detail.")] = False,
    detail: Annotated[bool, typer.Option("--detail", help="With --dry-run: a row for every array.")] = False,
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
    tmpdir: Annotated[Path | None, typer.Option("--tmpdir", help=TMPDIR_HELP)] = None,
    icechunk: Annotated[bool, typer.Option("--icechunk", help=ICECHUNK_HELP)] = False,
    sources_from: Annotated[Path | None, typer.Option("--sources-from", help=SOURCES_FROM_HELP)] = None,
    append: Annotated[bool, typer.Option("--append", help=APPEND_HELP)] = False,
    concat_dim: Annotated[str | None, typer.Option("--concat-dim", help=CONCAT_DIM_HELP)] = None,
) -> None:
    """Rewrite an HDF5 file (netCDF-4 included), or several as one archive, as a Zarr store."""
    src = list(src or [])  # one argument is DST: with --sources-from, the list names the sources
    if not dst or not (src or sources_from):
        raise fail("Expected SRC... DST: the sources (or --sources-from LIST) and the store to write. "
                   + (f"Got only {dst!r}." if dst else "Got neither."))
    if append:
        _append(ctx, sources_given(src, sources_from), dst, recipe, dry_run, storage_option, tmpdir, icechunk, concat_dim)
        return
    options = options_from(ctx, "convert", recipe)
    summary = plan_and_run("convert", sources_given(src, sources_from), dst, options, partial(_print_plan, detail=detail), dry_run,
                           storage_option, tmpdir, icechunk, concat_dim)
    if summary is None:
        return
    if not State.quiet:
        _print_summary(summary)




APPEND_HELP = (
    "Add the shots of SRC to the existing store DST, with the store's recipe: only the new shots' objects are "
    "written, sources the store lists already are skipped, and readers see the old store or the new one."
)


def _append(ctx: typer.Context, sources: list[str], dst: str, recipe: str | None, dry_run: bool,  # noqa: PLR0913
            storage_option: list[str] | None, tmpdir: Path | None, icechunk: bool, concat_dim: str | None) -> None:
    import layoutkit.api as api
    from layoutkit.cli.core import fail
    from layoutkit.cli.running import run_options, run_with_bar
    from layoutkit.errors import LayoutkitError
    from layoutkit.storage import parse_storage_options

    if recipe is not None:
        raise fail("--append writes with the store's own recipe and keeps what it holds: leave out --recipe.")
    try:
        storage = parse_storage_options(storage_option)
    except LayoutkitError as exc:
        raise fail(exc) from None
    summary = run_with_bar("append", lambda progress, stages: api.convert(
        sources, dst, append=True, dry_run=dry_run, storage_options=storage, tmpdir=tmpdir, icechunk=icechunk,
        concat_dim=concat_dim, progress=progress, stages=stages, **run_options(ctx)), (sources, dst))
    if State.quiet:
        return
    if summary.wrote_nothing:
        out.print(f"nothing to append: {dst} lists every one of the {summary.sources} sources already; "
                  "nothing was written")
        return
    known = f" ({summary.known_shots} shots of them it held already, equal)" if summary.known_shots else ""
    what = plural(summary.records, "record") if summary.records else f"{plural(summary.new_shots, 'new shot')}{known}"
    out.print(f"appended {summary.new_sources:,} of {plural(summary.sources, 'source')} to {dst}: {what}, "
              f"{plural(summary.objects, 'object')} written or rewritten whole ({format_size(summary.bytes_written)})"
              + (f", the store now {format_size(summary.store_bytes)}" if summary.store_bytes is not None else "")
              + f", {summary.seconds:.1f} s; the store has had {plural(summary.appends, 'append')}")


def _print_plan(plan, detail: bool = False) -> None:  # noqa: ANN001 - ConvertPlan, imported lazily
    if hasattr(plan, "lines"):  # a layout of another package that says its plan itself
        for line in plan.lines():
            out.print(line, highlight=False)
        return
    each = detail or len(plan.arrays) <= DETAIL_ROWS
    rules = any(getattr(a, "type_attrs", None) for a in plan.arrays)  # a column only where a type needs them
    table = Table(title=f"convert plan: {plan.source} -> {plan.dest}" + ("" if each else ", the arrays by kind"))
    if each:
        for col in ("array", "shape", "dtype", "chunks", "shards", "codec", "read", "size", *(["type rules"] if rules else [])):
            table.add_column(col, overflow="fold")
        for a in plan.arrays:
            table.add_row(
                a.path, str(a.shape), short_dtype(a), str(a.chunks), str(a.shards or "-"),
                str(a.source_encoding or a.compressor), a.read_mode, format_size(a.nbytes),
                *([type_rules(getattr(a, "type_attrs", {}))] if rules else []),
            )
    else:
        kinds: dict[tuple[str, str, str, bool, str], list[Any]] = {}
        for a in plan.arrays:
            key = (short_dtype(a), str(a.source_encoding or a.compressor), a.read_mode, bool(a.shards),
                   " ".join(getattr(a, "type_attrs", ())))
            kinds.setdefault(key, []).append(a)
        for col in ("arrays", "dtype", "codec", "read", "sharded", "size", *(["type rules"] if rules else []), "for example"):
            table.add_column(col, overflow="fold")
        for (dtype, codec, read, sharded, names), arrays in sorted(kinds.items(), key=lambda kv: -sum(a.nbytes for a in kv[1])):
            example = max(arrays, key=lambda a: a.nbytes)
            table.add_row(f"{len(arrays):,}", dtype, codec, read, "yes" if sharded else "-",
                          format_size(sum(a.nbytes for a in arrays)), *([names.replace(" ", "\n")] if rules else []),
                          f"{example.path} {example.shape} chunks {example.chunks}")
    out.print(table)
    out.print(
        f"{plural(len(plan.arrays), 'array')}, {format_size(plan.nbytes)} of data, {plural(len(plan.tasks), 'task')} "
        f"of at most {format_size(plan.task_bytes)}, Zarr v{plan.options.zarr_format}"
        + ("" if each else "; a row for every array: add --detail")
    )
    if rules:
        out.print("type rules: the attributes that say how a type Zarr has no spelling for is stored "
                  "(docs/formats/index.md, the type rules)")
    skipped = plan.skipped if detail else plan.skipped[:DETAIL_ROWS]
    for path, reason in skipped:
        out.print(f"skipped {path}: {reason}")
    if len(plan.skipped) > len(skipped):
        out.print(f"and {len(plan.skipped) - len(skipped):,} more skipped (--detail lists them)")


RULE_TEXT = 12
"""A type rule's value is printed in a dry run when it is this short (a sequence's value
type, an array type's axes); a longer one (an enum's mapping, a compound's members, which
the dtype shows) is left to the store."""


def type_rules(attrs: Any) -> str:
    """A plan's type-rule attributes as a dry run prints them, one a line: the name, and
    its value where it is short (``hdf5_sequence=<f4``)."""
    lines = []
    for name, value in attrs.items():
        text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else ""
        lines.append(f"{name}={text}" if text and len(text) <= RULE_TEXT else name)
    return "\n".join(lines)


def short_dtype(plan: Any) -> str:
    """An array plan's dtype as a dry run prints it: a structured one as ``{name: type,
    ...}`` (nested ones so too), a subarray member as ``<f4 x 3``; any other as the plan
    names it."""
    import numpy as np

    def spell(dtype: np.dtype) -> str:
        if dtype.names:
            return "{" + ", ".join(f"{n}: {spell(dtype[n])}" for n in dtype.names) + "}"
        if dtype.subdtype is not None:
            return f"{spell(dtype.base)} x {'x'.join(map(str, dtype.shape))}"
        return dtype.str if dtype.kind not in "bO" else str(dtype)

    dtype = plan.numpy_dtype if hasattr(plan, "numpy_dtype") else None
    return spell(dtype) if dtype is not None and dtype.names else plan.dtype


def _print_summary(summary: Any) -> None:
    for line in summary.lines():  # every layout's summary says itself (a plugin's too)
        out.print(line, highlight=False)


__all__ = ['convert']
