"""``layoutkit reorder``: an HDF5 source as paged HDF5, its bytes ordered by shot, signal or group."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from layoutkit.cli.core import DETAIL_ROWS, State, app, out
from layoutkit.cli.running import (
    CONCAT_DIM_HELP,
    RECIPE_HELP,
    SOURCES_FROM_HELP,
    SOURCES_HELP,
    STORAGE_HELP,
    TMPDIR_HELP,
    options_from,
    plan_and_run,
    sources_given,
)
from layoutkit.options import format_size


@app.command()
def reorder(
    ctx: typer.Context,
    src: Annotated[list[str], typer.Argument(metavar="SRC...", help=SOURCES_HELP)],
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
    skip_unsupported: Annotated[bool, typer.Option(help="Leave out datasets that cannot be carried over, and list them.")] = False,
    dry_run: Annotated[bool, typer.Option(help="Print the plan and write nothing: the datasets by kind, a row each in write order with --detail.")] = False,
    detail: Annotated[bool, typer.Option("--detail", help="With --dry-run: a row for every dataset, in write order.")] = False,
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
    tmpdir: Annotated[Path | None, typer.Option("--tmpdir", help=TMPDIR_HELP)] = None,
    sources_from: Annotated[Path | None, typer.Option("--sources-from", help=SOURCES_FROM_HELP)] = None,
    concat_dim: Annotated[str | None, typer.Option("--concat-dim", help=CONCAT_DIM_HELP)] = None,
) -> None:
    """Rewrite an HDF5 file, or several as one archive, as paged-aggregation HDF5, its bytes ordered by shot, signal
    or group."""
    options = options_from(ctx, "reorder", recipe)
    summary = plan_and_run("reorder", sources_given(src, sources_from), dst, options,
                           partial(_print_reorder_plan, detail=detail), dry_run,
                           storage_option, tmpdir, concat_dim=concat_dim)
    if summary is None:
        return
    if not State.quiet:
        for line in summary.lines():
            out.print(line, highlight=False)


def _print_reorder_plan(plan, detail: bool = False) -> None:  # noqa: ANN001 - ReorderPlan
    each = detail or len(plan.order) <= DETAIL_ROWS
    table = Table(title=f"reorder plan ({plan.options.by}): {plan.source} -> {plan.dest}"
                  + ("" if each else ", the datasets by kind"))

    def copy(st: Any) -> str:
        return "raw" if st.raw_copy else ("encode" if st.direct else "hdf5")

    if each:
        for col in ("#", "dataset", "layout", "chunks", "compressor", "copy"):
            table.add_column(col, overflow="fold")
        for i, path in enumerate(plan.order):
            st = plan.storage[path]
            table.add_row(str(i), path, st.layout, str(st.chunks or "-"), str(st.compressor), copy(st))
    else:
        kinds: dict[tuple[str, str, str], list[str]] = {}
        for path in plan.order:
            st = plan.storage[path]
            kinds.setdefault((st.layout, str(st.compressor), copy(st)), []).append(path)
        for col in ("datasets", "layout", "compressor", "copy", "first in write order"):
            table.add_column(col, overflow="fold")
        for (layout, compressor, how), paths in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
            table.add_row(f"{len(paths):,}", layout, compressor, how, paths[0])
    out.print(table)
    out.print(
        f"{len(plan.order)} datasets in write order, {plan.shots} shots x {plan.signals} signals, "
        f"{len(plan.dedupe)} duplicate scales to merge, page size {format_size(plan.page_size)}"
        + ("" if each else "; a row for every dataset: add --detail")
    )


__all__ = ['reorder']
