"""``layoutkit inspect``: how a file or store is laid out, and what to do about it."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from layoutkit.cli.core import State, app, check_interrupted, console, fail, out
from layoutkit.cli.running import STORAGE_HELP
from layoutkit.errors import LayoutkitError
from layoutkit.options import format_size, size_relative


@app.command()
def inspect(
    src: Annotated[str, typer.Argument(metavar="SRC", help="An HDF5 / netCDF-4 file (a path, or s3://bucket/key.h5) or a Zarr store (a directory).")],
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON, for scripts.")] = False,
    template: Annotated[str, typer.Option(help="Where shots and signals are; {shot} and {signal} match one path component each.")] = "/shots/{shot}/signals/{signal}",
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
    workers: Annotated[int, typer.Option(help="Processes that read the datasets of a local HDF5 file with thousands of them.")] = 2,
) -> None:
    """Diagnose how a file is laid out (chunks, filters, metadata, scales) and what to do about it."""
    import layoutkit.api as api
    from layoutkit.storage import parse_storage_options

    try:
        with Progress(TextColumn("[bold]inspect: datasets"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                      console=console, disable=State.quiet or not console.is_terminal, transient=True) as bar:
            task = bar.add_task("inspect", total=None)

            def progress(done: int, total: int) -> None:
                check_interrupted()
                bar.update(task, completed=done, total=total)

            report = api.inspect(src, template=template, storage_options=parse_storage_options(storage_option),
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
              f"{size_relative(r.stored_bytes, r.logical_bytes, 'the data' + chr(39) + 's size')}"
              + (" in the sources its references point to" if (r.written_by or {}).get("recipe", {}).get("layout")
                 == "virtual" else "")
              + f"; metadata {format_size(r.metadata_bytes)}", highlight=False)
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
    if r.type_rules:
        out.print("types Zarr has no spelling for: " + ", ".join(f"{kind} {n:,}" for kind, n in r.type_rules.items()),
                  highlight=False)
    if r.template_matches:  # a file that is no shot archive gets no line about it
        out.print(f"template {r.template}: {r.template_matches:,} arrays match, {r.shots:,} shots x {r.signals:,} signals",
                  highlight=False)
    out.print("[bold]recommendations[/]")
    for i, rec in enumerate(r.recommendations, 1):
        out.print(f"{i}. {rec.finding}\n   -> {rec.action}", highlight=False)


__all__ = ['inspect']
