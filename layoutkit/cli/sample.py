"""``layoutkit sample``: a synthetic shot archive."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from layoutkit.cli.core import State, app, ended_by_interrupt, fail, out
from layoutkit.cli.running import progress_bar
from layoutkit.errors import LayoutkitError
from layoutkit.options import format_size


@app.command()
def sample(
    out_path: Annotated[Path, typer.Argument(metavar="OUT", help="The HDF5 file to write (a folder with --shots-per-file).")],
    shots: Annotated[int, typer.Option(help="Number of shots.")] = 25,
    signals: Annotated[int, typer.Option(help="Signals per shot.")] = 70,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same file).")] = 0,
    rate_factor: Annotated[int, typer.Option(help="Every digitizer samples this many times faster: signals this many times longer (20: a few MB each).")] = 1,
    shots_per_file: Annotated[int, typer.Option(help="Write the archive as many files, N shots each (1: a file per shot), into the folder OUT.")] = 0,
) -> None:
    """Write a realistic synthetic shot archive (/shots/<SHOT>/signals/<SIGNAL>), as one
    file or as a folder of files."""
    from layoutkit.sample import estimate_logical_bytes, write_sample
    from layoutkit.storage.local import check_report_folder

    try:  # the folder the sample goes in, before any work (a read-only one was a 60-line traceback)
        check_report_folder(Path(out_path).resolve().parent, "OUT's folder", "the sample")
        total = estimate_logical_bytes(shots, signals, seed, rate_factor)
        with progress_bar(total, "sample") as bar:
            task = bar.add_task("write", total=total)
            summary = write_sample(
                out_path, shots=shots, signals=signals, seed=seed,
                progress=lambda n: bar.advance(task, n), rate_factor=rate_factor, shots_per_file=shots_per_file,
            )
    except (LayoutkitError, ValueError, FileExistsError) as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        raise ended_by_interrupt(exc, "interrupted; nothing was written.") from None
    if not State.quiet:
        out.print(
            f"wrote {summary.path}{_files(shots, shots_per_file)}: {summary.shots} shots x {summary.signals} signals, "
            f"{summary.datasets} signal datasets, {summary.timebases} time bases, "
            f"{format_size(summary.logical_bytes)} of data in {format_size(summary.file_bytes)}"
        )



def _files(shots: int, per_file: int) -> str:
    return f" ({-(-shots // per_file)} files)" if per_file else ""


__all__ = ['sample']
