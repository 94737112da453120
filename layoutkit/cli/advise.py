"""``layoutkit advise``: candidate layouts tried on samples of a source, and one recommended."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from layoutkit.cli.core import State, app, check_interrupted, console, ended_by_interrupt, fail, out
from layoutkit.cli.running import STORAGE_HELP, stopped_after
from layoutkit.errors import LayoutkitError


# long: typer declares each of the 19 options as a parameter; the body builds the options, runs, prints.
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
    workload: Annotated[Path | None, typer.Option(metavar="FILE", help="A workload file (layoutkit trace): the reads a program made of SRC, replayed on every candidate as the pattern workload (weigh it with --patterns workload=W beside others; alone by default).")] = None,
) -> None:
    """Try candidate layouts on samples of SRC, predict each one's read time at full size
    under the given conditions, recommend one and write its recipe."""
    import layoutkit.api as api
    from layoutkit.advise.run import rewrite_verdict, write_command
    from layoutkit.storage import parse_storage_options

    bar = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeRemainingColumn(), console=console, disable=State.quiet,
    )  # fmt: skip
    task = bar.add_task("advise: sampling", total=None)
    try:
        def shown() -> Progress:  # the bar appears once the input is checked: no residue before an error
            if not bar.live.is_started:
                bar.start()
            return bar

        def on_step(name: str) -> None:
            check_interrupted()
            shown().update(task, advance=1, description=f"advise: {name}")

        storage = parse_storage_options(storage_option)
        with stopped_after(bar):  # no last frame of the bar above an error
            result = api.advise(
                src, patterns=patterns, latency=latency, bandwidth=bandwidth, workers=workers, budget=budget,
                candidates=candidates, sample=sample, sample_shots=sample_shots, seed=seed, repeat=repeat,
                price_per_1000_get=price_per_1000_get, template=template, tmpdir=tmpdir, target=target,
                storage_options=storage, out=out_dir if out_dir is not None else advice_folder(src),
                overwrite=overwrite, workload=workload, on_step=on_step,
                on_total=lambda n: shown().update(task, total=n, description="advise: candidates"),
            )  # fmt: skip
        written = result.written
    except LayoutkitError as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        raise ended_by_interrupt(exc, "interrupted; nothing was written.") from None
    wide = out if out.is_terminal else Console(width=200)
    wide.print(advice_table(result))
    for t in result.trials:
        if t.status != "measured":
            out.print(f"{t.name}: {t.status}: {t.reason}", highlight=False)
    if result.not_tried:
        out.print(f"not tried within the budget: {', '.join(result.not_tried)}", highlight=False)
    best = result.recommended
    out.print(f"advise took {result.elapsed:.0f} s of a {result.options.budget:.0f} s budget; wrote "
              + ", ".join(str(p) for p in written), highlight=False)
    layout = f" ({best.layout})" if best.layout != best.name else ""
    for line in workload_lines(result):
        out.print(line, highlight=False)
    tie = result.tie_note()
    if tie:
        out.print(tie, highlight=False)
    verdict = rewrite_verdict(result)
    if verdict:
        out.print(verdict, highlight=False)
    out.print(f"recommended: {best.name}{layout}, predicted {best.weighted_seconds:.3g} s per weighted "
              "pattern run at full size. Write it with:", highlight=False)
    out.print(write_command(result, written[1]), highlight=False, soft_wrap=True)


def workload_lines(result) -> list[str]:  # noqa: ANN001 - AdviseResult, imported lazily
    """With ``--workload``: what its reads were made of on the samples, and which of them
    cost each candidate the most (the best four, in the table's order)."""
    from layoutkit.options import format_size, plural

    w = result.workload
    if w is None:
        return []
    what = f"{plural(w.shots, 'shot')} of {result.scales[2]:.0f}, " if w.shots else ""
    lines = [f"workload: {plural(len(w.full), 'read')} ({what}{'growing with the archive' if w.grows else 'a fixed amount'}), "
             f"made as {len(w.small)} and {len(w.large)} on the samples"
             + (f"; {plural(w.dropped, 'read')} had no stand-in there" if w.dropped else "")]
    for t in [t for t in result.ranked if t.workload_costs][:4]:
        total = sum(r for _, r, _ in t.workload_costs) or 1
        top = ", ".join(f"{k} {r / total:.0%} ({plural(r, 'request')}, {format_size(b)})" for k, r, b in t.workload_costs[:3])
        lines.append(f"  {t.name}: the costliest reads, by share of the workload's requests on the larger sample: {top}")
    return lines


def advice_folder(src: str) -> Path:
    """advise's default --out: SRC's name + -advice, beside a local SRC; in the current
    folder for a SRC in a bucket."""
    from layoutkit.storage import ObjectSource, as_source

    source = as_source(src)
    if isinstance(source, ObjectSource):
        return Path(f"{source.stem}-advice")
    return source.with_name(f"{source.stem}-advice")


def advice_table(result) -> Table:  # noqa: ANN001 - AdviseResult, imported lazily
    from layoutkit.advise.run import weighted_counts

    unit = "shots" if result.unit == "shots" else "MB"
    scale = (lambda x: f"{x:.0f}") if result.unit == "shots" else (lambda x: f"{x / 1e6:.0f}")
    o = result.options
    title = (
        f"advise: {Path(result.source).name}, predicted at full size ({scale(result.scales[2])} {unit}; samples of "
        f"{scale(result.scales[0])} and {scale(result.scales[1])}), {o.latency * 1e3:g} ms latency, {o.workers} "
        f"workers, {result.reads} read{'' if result.reads == 1 else 's'} a pattern; best first (those whose ± ranges overlap "
        f"the fastest's: {result.rank_rule()})"
    )
    t = Table(title=title, title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("candidate")
    t.add_column("writes with")
    for p, w in result.weights.items():
        t.add_column(f"{p} s (weight {w:g})", justify="right")
        t.add_column(f"{p} GETs", justify="right")
    t.add_column("weighted s", justify="right")
    t.add_column("weighted GETs", justify="right")
    t.add_column("read", justify="right")
    t.add_column("stored", justify="right")
    t.add_column("build", justify="right")
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
            cells += [f"{pred.seconds:.3g} ± {fit.uncertainty:.1g}{mark}", f"{pred.requests:,.0f}"]
            cost += pred.requests * w / sum(result.weights.values())
        t.add_row(str(i), trial.name, trial.command, *cells,
                  f"{trial.weighted_seconds:.3g} ± {trial.weighted_uncertainty:.1g}", *weighted_counts(trial),
                  f"{trial.predicted_build_seconds:.3g} s",
                  f"{cost * o.price_per_1000_get:.4f}")
    t.caption = ("s: predicted seconds of a pattern's read at full size, ± its uncertainty; GETs: its requests; "
                 "weighted: over the patterns by their weights; read: the weighted bytes read; stored: the "
                 "predicted size of the layout; build: the predicted time to write it.")
    if alike:
        t.caption += (" * both samples made the same requests for a read that grows with the archive (they fit "
                      "the same objects, and no geometry counted its pages): no growth is predicted, and the time "
                      "may be low. Larger samples (--sample-shots, --budget) show the growth.")
    t.caption_justify = "left"
    return t


__all__ = ['advice_folder', 'advice_table', 'advise']
