"""``layoutkit verify``: every variant proven equal to its source, then the read patterns timed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from layoutkit.cli.core import EXIT_DIFFERENT, EXIT_PATTERN_FAILED, State, app, console, ended_by_interrupt, fail, out
from layoutkit.cli.running import STORAGE_HELP, sources_given, stopped_after
from layoutkit.errors import LayoutkitError


# long: typer declares each of the 18 options as a parameter (the signature is a third of it); the body
# builds the options, runs, and prints what came.
@app.command()
def verify(
    src: Annotated[str, typer.Argument(metavar="SRC", help="The HDF5 source the variants were made from: a path, or s3://bucket/key.h5; or a quoted glob of files ('exports/shots-*.h5'), read as one archive.")],
    variants: Annotated[list[str] | None, typer.Argument(metavar="VARIANT...", help="Zarr stores and HDF5 files to check and measure: paths, or s3://bucket/key URLs (their requests are real, counted as GETs).")] = None,
    check: Annotated[bool, typer.Option("--check/--no-check", help="Prove every variant equal to the source first.")] = True,
    patterns: Annotated[str, typer.Option(help="Comma-separated: open, list, shot, signal, scan, subset, axis; or all (those that apply; list only by name).")] = "all",
    sample: Annotated[int, typer.Option(help="K: shots, signals or arrays drawn per pattern subset draws 4K hyperslabs of at most 4 MiB each, together at most the data's size (what scan reads).")] = 10,
    seed: Annotated[int, typer.Option(help="Random seed of the reads drawn.")] = 0,
    engine: Annotated[str, typer.Option(help="Comma-separated sweep of serial, threads, processes, distributed.")] = "threads",
    workers: Annotated[str, typer.Option(help="Comma-separated sweep of worker counts, e.g. 1,2,4.")] = "1",
    page_buffer: Annotated[str, typer.Option("--page-buffer", help="HDF5 page buffer sizes for paged variants, e.g. 0,64MiB: one per reading process (thread workers share one open file).")] = "64MiB",
    cache: Annotated[str, typer.Option(help="cold (evict the files from the OS page cache before each run), warm, or cold,warm.")] = "cold",
    latency: Annotated[str, typer.Option(help="Simulated latency per request, e.g. 0,10ms.")] = "0",
    bandwidth: Annotated[str, typer.Option(help="Simulated bandwidth, e.g. 100MB/s (0 = unlimited).")] = "0",
    repeat: Annotated[int, typer.Option(help="Repetitions per row (the table shows the median and the spread); a row whose runs add up to 3 s stops repeating there.")] = 3,
    template: Annotated[str, typer.Option(help="Where signals live in the hierarchy.")] = "/shots/{shot}/signals/{signal}",
    scheduler: Annotated[str | None, typer.Option(help="A dask scheduler address for --engine distributed.")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Write results.csv, results.json and plots here.")] = None,
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
    sources_from: Annotated[Path | None, typer.Option("--sources-from", help="A text file listing the sources the variants were made from, one per line, read as one archive; every argument is then a variant.")] = None,
    workload: Annotated[Path | None, typer.Option(metavar="FILE", help="A workload file (layoutkit trace): its reads of SRC replayed on every variant as the pattern workload, each selection proved equal.")] = None,
) -> None:
    """Prove every variant holds exactly the source's data, then time the standard read
    patterns on the source and every variant.

    Exit status: 0 every variant equal and every pattern ran; 1 a variant's data differ
    from the source's; 2 bad input (nothing measured); 3 a read pattern could not run on
    some variant (the reason is printed under the table).
    """
    import layoutkit.api as api
    from layoutkit.storage import parse_storage_options
    from layoutkit.storage.local import check_report_folder
    from layoutkit.verify import report as rep

    source: str | list[str] = src
    if out_dir is not None:  # before anything is measured: a report that cannot be written is bad input
        try:
            check_report_folder(out_dir)
        except LayoutkitError as exc:
            raise fail(exc) from None
    if sources_from is not None:  # the list names the sources: SRC is a variant too
        source, variants = sources_given([], sources_from), [src, *(variants or [])]
        if not source:
            raise fail(f"The list of sources {str(sources_from)!r} names none.")
    if not variants:
        raise fail("Name at least one variant to verify after the source.")
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

    def expected(seconds: float) -> None:
        from layoutkit.options import duration_text

        shown().console.print(f"the read patterns: expected to take about {duration_text(seconds)} "
                              "(from a probe read of each pattern on each file)", highlight=False)

    try:
        storage = parse_storage_options(storage_option)
        with stopped_after(bar):  # no last frame of the bar above an error
            result = api.verify(
                source, variants, patterns=patterns, sample=sample, seed=seed, engine=engine, workers=workers,
                page_buffer=page_buffer, cache=cache, latency=latency, bandwidth=bandwidth, repeat=repeat,
                template=template, scheduler=scheduler, check=check, storage_options=storage, workload=workload,
                on_start=shown,
                on_check=lambda _: shown().advance(checking),
                on_total=lambda n: shown().update(timing, total=n),
                on_expected=None if State.quiet else expected,
                on_run=lambda label: shown().update(timing, advance=1, description=f"read patterns: {label}"),
            )  # fmt: skip
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
        held = f"all {len(variants)} variants hold" if len(variants) > 1 else "the 1 variant holds"
        out.print(f"{held} exactly the data of {src_name}")
    for name, left_out in result.skipped.items() if check else ():
        if left_out:
            out.print(f"{name} leaves out {len(left_out)} dataset(s) it cannot carry, as its layoutkit.json "
                      f"lists them (convert --skip-unsupported): {', '.join(left_out[:5])}"
                      + (" ..." if len(left_out) > 5 else ""), highlight=False)
    # a log or a pipe gets the whole table rather than columns cut to 80 characters
    wide = out if out.is_terminal else Console(width=200)
    wide.print(rep.answer_table(result.results, result.variants[0].name))
    note = rep.too_small_to_matter(result.results)
    if note:
        out.print(note, highlight=False)
    wide.print(rep.table(result.results, f"every measurement: read patterns on {src_name} and its variants"))
    failed = rep.failures(result.results)
    for line in failed:
        out.print(f"[bold red]failed:[/] {line}", highlight=False)
    if out_dir is not None:
        options = result.options
        recorded = {k: v for k, v in vars(options).items() if k != "storage_options"}
        # the endpoint and region say where it ran; keys and secrets stay out of the report
        recorded["storage_options"] = {k: ("***" if re.search("key|secret|token|password", k, re.I) else v)
                                       for k, v in options.storage_options}
        meta = {"source": source if isinstance(source, list) else str(src), "variants": [str(v) for v in variants], "options": recorded,
                "mismatches": {n: [str(m) for m in ms] for n, ms in bad.items()}}
        written = rep.write(result.results, out_dir, meta)
        out.print(f"wrote under {out_dir}:")
        for _path, caption in written:
            out.print(f"  {caption}", highlight=False)
    if bad:
        raise typer.Exit(EXIT_DIFFERENT)
    if failed:
        raise typer.Exit(EXIT_PATTERN_FAILED)


__all__ = ['verify']
