"""The command group every command belongs to: its state, its options (-q, --timings,
--version), and how a command ends: one sentence and an exit status for every expected
failure, and an interrupt (Ctrl-C, SIGTERM) that removes what the run wrote."""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
import threading
from typing import Annotated, Any

import typer
from rich.console import Console


class _Commands(typer.core.TyperGroup):
    """The command group: every command runs through :meth:`invoke`, the one place where
    an object store that fails in the middle of any command (a request that gets no
    answer even after retries, an endpoint that goes away) becomes one sentence naming
    the URL it concerned and exit 2, not obstore's traceback. ``convert`` and
    ``reorder`` say so themselves first, and remove what they wrote."""

    ORDER = ("sample", "convert", "reorder", "verify", "advise", "inspect", "recipes")  # as --help lists them

    # ctx: typer's Context base (typer >= 0.25 carries its own click, whose Context is private)
    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: self.ORDER.index(n) if n in self.ORDER else len(self.ORDER))

    def get_command(self, ctx: Any, name: str) -> Any:
        command = super().get_command(ctx, name)
        if command is not None:
            plain_metavars(command)
        return command

    def invoke(self, ctx: Any) -> object:
        given = [*getattr(ctx, "_protected_args", ()), *ctx.args]  # before the command takes them
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # usage errors are TyperExceptions
            raise
        except Exception as exc:
            store = store_error(exc)
            if store is not None:
                raise fail(store_failure(store, tuple(given))) from None
            disk = disk_failure(exc)
            if disk is None:
                raise
            raise fail(disk) from None


METAVARS = {
    "src": "SRC...", "dst": "DST", "variants": "VARIANT...", "variant": "VARIANT", "recipe": "NAME|FILE",
    "chunks": "auto|source|SHAPE", "chunk_size": "SIZE", "compressor": "CODEC", "shards": "none|auto|SIZE",
    "workers": "N", "scheduler": "threads|processes|serial|ADDRESS", "memory_limit": "SIZE", "batch_files": "N",
    "storage_option": "KEY=VALUE", "tmpdir": "DIR", "sources_from": "FILE", "concat_dim": "DIM", "template": "TEMPLATE",
    "page_size": "auto|SIZE", "compress_threshold": "SIZE", "by": "shot|signal|group", "latency": "DURATIONS",
    "bandwidth": "RATES", "page_buffer": "SIZES", "patterns": "PATTERNS", "engine": "ENGINES", "cache": "cold,warm",
    "repeat": "N", "sample": "K", "seed": "N", "budget": "DURATION", "candidates": "NAMES", "target": "S3_PREFIX",
    "out_dir": "DIR", "out_path": "DIR", "shots": "N", "signals": "N", "rate_factor": "N", "shots_per_file": "N",
    "sample_shots": "N", "zarr_format": "2|3", "name": "NAME",
}
"""What an option's value looks like in ``--help`` (typer would print ``<str>``)."""


def plain_metavars(command: Any) -> None:
    """Give each of ``command``'s options and arguments the metavar of :data:`METAVARS`
    (its name in capitals otherwise): help reads ``--chunk-size SIZE``, not ``<str>``,
    and a flag shows no type."""
    for param in getattr(command, "params", ()):
        if getattr(param, "is_flag", False) or getattr(param, "_layoutkit_metavar", False):
            continue
        if getattr(param, "param_type_name", "") == "argument":  # its name says it: "SRC...", not "SRC... SRC..."
            param.display_type_rich = lambda ctx=None: ""
            param._layoutkit_metavar = True
            continue
        label = param.metavar or METAVARS.get(param.name or "", (param.name or "value").upper())
        if getattr(param, "type", None) is not None and getattr(param.type, "choices", None):
            label = "|".join(map(str, param.type.choices))
        param.display_type_rich = lambda ctx=None, label=label: label
        param._layoutkit_metavar = True


app = typer.Typer(
    cls=_Commands,
    name="layoutkit",
    help="File-layout conversion and optimisation for scientific HDF5 data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: at 80 columns, a description column of 46, not 17
)
console = Console(stderr=True)
out = Console()

EXIT_DIFFERENT = 1  # verify: a variant's data differ from the source's
EXIT_BAD_INPUT = 2  # every command: a refused input, one sentence, nothing written
EXIT_PATTERN_FAILED = 3  # verify: a read pattern could not run on a variant
from layoutkit.options import SOURCE_SIZE  # noqa: E402 - one wording for the summaries and the commands

DETAIL_ROWS = 20
"""A --dry-run plan of at most this many arrays is printed a row each; a larger one by
kind, a screen or less (issue 66: 904 lines for 4 shots), unless --detail."""


class State:
    quiet = False
    timings = False
    failed = False  # the command said its error (fail): its retries are in that sentence


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


def _say_fallbacks() -> None:
    """A dataset the fast path would not read right (:class:`~layoutkit.errors.RawReadFallback`)
    is said once, as a note on stderr, not as Python's warning with a file and line."""
    import warnings

    from layoutkit.errors import LeftOut, RawReadFallback

    shown = warnings.showwarning
    if getattr(shown, "says_fallbacks", False):  # a command run before this one in the process set it
        return

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001, ANN202
        if issubclass(category, (RawReadFallback, LeftOut)):
            console.print(f"note: {message}", markup=False, highlight=False)
        else:
            shown(message, category, filename, lineno, file, line)

    show.says_fallbacks = True  # type: ignore[attr-defined]
    warnings.showwarning = show
    warnings.simplefilter("default", RawReadFallback)  # once per message
    warnings.simplefilter("default", LeftOut)


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
    from layoutkit.errors import command_line
    from layoutkit.memory import tune_allocator
    from layoutkit.storage.retry import RETRIES
    from layoutkit.storage.sources import forget_stores

    ctx.with_resource(command_line())  # errors name options as --options, not keyword arguments
    State.quiet = quiet
    State.timings = timings
    State.failed = False
    _say_fallbacks()
    RETRIES.reset()
    ctx.call_on_close(_report_retries)
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


def fail(exc: BaseException | str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    State.failed = True
    console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _report_retries() -> None:
    """Say how many requests the object store failed and layoutkit sent again (even with
    --quiet: a store that misbehaves is worth knowing of), unless the command failed."""
    from layoutkit.storage.retry import RETRIES

    said = RETRIES.summary()
    if said and not State.failed:
        console.print(f"note: {said}.", highlight=False, soft_wrap=True)




def store_error(exc: BaseException) -> BaseException | None:
    """What an object store answered (obstore's errors), ``exc`` or an error it came from
    (HDF5 reports a failed read of its file object as its own error); None for anything
    else, and for an interrupt."""
    from obstore.exceptions import BaseError

    from layoutkit.storage.retry import RetriesExhaustedError

    if interrupted(exc):
        return None
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (BaseError, RetriesExhaustedError)):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


_DISK_ERRORS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "a file would pass the size this process may write, ulimit -f",
    errno.EROFS: "the file system is read-only",
}


def disk_failure(exc: BaseException) -> str | None:
    """One sentence for an output that could not be written because the disk refused more
    (full, over quota, a file-size limit, read-only), found in ``exc`` or an error it came
    from; HDF5 gives the system's errno only in its message. None for anything else.
    ``convert``, ``reorder`` and ``sample`` have removed what they wrote by then."""
    seen: BaseException | None = exc
    while seen is not None and not interrupted(seen):
        code = seen.errno if isinstance(seen, OSError) else None
        m = re.search(r"errno = (\d+)", str(seen))
        code = code if code in _DISK_ERRORS else int(m.group(1)) if m else None
        if code in _DISK_ERRORS:
            return f"The output could not be written: {_DISK_ERRORS[code]} ({os.strerror(code)})."
        seen = seen.__cause__ or seen.__context__
    return None


def store_failure(exc: BaseException, given: tuple[str, ...]) -> str:
    """One sentence for a store's failure during a run, naming the bucket URL it concerns
    (of the arguments given, the URL whose bucket and key the request named; else the
    first URL)."""
    from layoutkit.storage import describe_store_error, is_url

    text = str(exc)
    named = [u for u in given if is_url(u) and re.match(r"[a-z][a-z0-9+.-]*:", u)]  # not endpoint_url=http://...
    named = named or [u for u in given if not u.startswith("-")] or ["the object store"]
    where = next((u for u in named if u.split("://", 1)[-1].rstrip("/") in text), named[0])
    return describe_store_error(where, exc)


__all__ = ["EXIT_BAD_INPUT", "EXIT_DIFFERENT", "EXIT_PATTERN_FAILED", "SOURCE_SIZE", "Interrupted", "State", "app",
           "check_interrupted", "console", "disk_failure", "ended_by_interrupt", "fail", "interrupted", "out", "store_error",
           "store_failure"]
