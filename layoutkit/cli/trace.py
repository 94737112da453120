"""``layoutkit trace``: record what a program reads, or show a recorded workload."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from layoutkit.cli.core import State, app, ended_by_interrupt, fail, out
from layoutkit.errors import LayoutkitError


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def trace(
    ctx: typer.Context,
    out_path: Annotated[Path, typer.Option("--out", metavar="FILE", help="The workload file to write.")] = Path("workload.json"),
    overwrite: Annotated[bool, typer.Option(help="Replace --out if it exists.")] = False,
    show: Annotated[Path | None, typer.Option(metavar="FILE", help="Summarise this workload file instead of running a command.")] = None,
    plot: Annotated[Path | None, typer.Option(metavar="PNG", help="Also draw the reads over time into this PNG.")] = None,
    syscalls: Annotated[bool, typer.Option(help="Trace the command's system calls (strace) for what it reads from HDF5 files and local Zarr stores: for programs that read through the HDF5 C library (netCDF-C, C, Fortran, IDL) or read Zarr without Python.")] = False,
    template: Annotated[str, typer.Option(help="Where shots and signals are, to name the access order.")] = "/shots/{shot}/signals/{signal}",
) -> None:
    """Run a program and record what it reads from HDF5 files and Zarr stores (h5py,
    zarr, xarray through them, layoutkit.open), as a workload file:
    layoutkit trace -- python analysis.py. With --show, summarise one."""
    import layoutkit.api as api
    from layoutkit.templates import parse_template
    from layoutkit.trace.show import plot as draw
    from layoutkit.trace.show import summary
    from layoutkit.trace.workload import load

    command = list(ctx.args)
    try:
        parse_template(template)
        if show is not None:
            if command:
                raise LayoutkitError("Give either --show FILE or a command to trace after --, not both.")
            workload = load(show)
        else:
            workload = api.trace(command, out_path, overwrite=overwrite, syscalls=syscalls)
        if plot is not None:
            draw(workload, plot)
    except LayoutkitError as exc:
        raise fail(exc) from None
    except (KeyboardInterrupt, Exception) as exc:
        raise ended_by_interrupt(exc, "interrupted; the workload was not written.") from None
    if not State.quiet:
        for line in summary(workload, template):
            out.print(line, highlight=False, soft_wrap=True)
        if show is None:
            out.print(f"wrote {out_path}" + (f" and {plot}" if plot else ""), highlight=False)
    if show is None and workload.exit_code != 0:
        raise typer.Exit(workload.exit_code)
