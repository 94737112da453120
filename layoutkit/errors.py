"""Errors raised by layoutkit.

Every error is a :class:`LayoutkitError` (itself a ``ValueError``) whose message is one
plain sentence meant for the person at the terminal. Subclasses also inherit the builtin
that fits, so callers can catch ``FileNotFoundError`` and friends as usual. Only
``layoutkit.cli`` turns an error into a message and an exit code.
"""

from __future__ import annotations


class LayoutkitError(ValueError):
    """Base class of every error layoutkit raises on purpose."""


class SourceNotFoundError(LayoutkitError, FileNotFoundError):
    """The source path does not exist."""


class SourceIsDirectoryError(LayoutkitError, IsADirectoryError):
    """The source path is a directory where a file was expected."""


class NotHDF5Error(LayoutkitError):
    """The source is not an HDF5 file (netCDF-3, text, anything else)."""


class CorruptSourceError(LayoutkitError):
    """The source looks like HDF5 but cannot be read (truncated, damaged)."""


class UnsupportedFeatureError(LayoutkitError):
    """A dataset uses an HDF5 feature the target format cannot represent.

    Parameters
    ----------
    dataset
        Path of the dataset (or group, or link) inside the source.
    feature
        Short description of the feature, e.g. ``"variable-length integer arrays"``.
    """

    def __init__(self, dataset: str, feature: str, hint: str = "", where: str = "") -> None:
        self.dataset = dataset
        self.feature = feature
        # where: how the object is named when it is not a dataset ("Attribute 'r' of '/a'")
        msg = f"{where or f'Dataset {dataset!r}'} uses {feature}, which layoutkit cannot carry over"
        msg += f"; {hint}" if hint else "; rerun with --skip-unsupported to leave it out."
        super().__init__(msg)


class MissingFilterError(LayoutkitError):
    """A dataset is compressed with an HDF5 filter for which no plugin is available."""

    def __init__(self, dataset: str, filter_id: int, name: str = "") -> None:
        self.dataset = dataset
        self.filter_id = filter_id
        label = f"filter {filter_id}" + (f" ({name})" if name else "")
        super().__init__(
            f"Dataset {dataset!r} is compressed with HDF5 {label}, for which no plugin is "
            "installed; install hdf5plugin (pip install hdf5plugin) or set HDF5_PLUGIN_PATH."
        )


class ChunkDecodeError(LayoutkitError):
    """A chunk of the source could not be read or decoded."""

    def __init__(self, dataset: str, chunk: tuple[int, ...], cause: str) -> None:
        self.dataset = dataset
        self.chunk = chunk
        super().__init__(
            f"Chunk at offset {tuple(chunk)} of dataset {dataset!r} could not be decoded: {cause}."
        )


class DifferentDuplicateError(LayoutkitError):
    """A shot (or a node outside the shots) is in two sources of a set, with different data."""


class SourcesDoNotCombineError(LayoutkitError):
    """Several sources were given and no rule combines them into one archive."""


class RawReadFallback(UserWarning):
    """A dataset read through HDF5's own read instead of raw chunks: its chunk index
    failed the self-check (an impossible origin, or a chunk whose decoded bytes differ
    from what HDF5 reads there). The copy is right; it is only slower."""


class LeftOut(UserWarning):
    """An object or attribute ``--skip-unsupported`` left out: the command lists it."""


class StoreReadError(LayoutkitError, OSError):
    """An object store that failed a read (after its retries): what it answered, in one sentence."""


class SourceChangedError(StoreReadError):
    """A virtual store's reference points into a source file that changed since it was
    referenced (layoutkit.layouts.virtual): refused, never read as wrong data."""


class OutputExistsError(LayoutkitError, FileExistsError):
    """The destination exists and ``--overwrite`` was not given."""


class OutputNotWritableError(LayoutkitError, PermissionError):
    """The destination cannot be written."""


class InvalidOptionError(LayoutkitError):
    """A user-supplied option value could not be parsed."""


class RecipeError(InvalidOptionError):
    """A recipe cannot be found, read or validated, or is for the other command."""


class RecipeNotFoundError(RecipeError, FileNotFoundError):
    """No recipe file at the path, and no shipped recipe of that name."""


class UnknownLayoutError(LayoutkitError):
    """An output no registered layout wrote, or knows how to read
    (:func:`layoutkit.layouts.detect`, which ``layoutkit.open``, ``verify`` and
    ``convert --append`` share)."""


# -- the caller's words ------------------------------------------------------------------
#
# A message names options the way the command line spells them ("Expected --chunks
# source, auto, ...", "pass --overwrite"). Called from Python, the same error names the
# keyword arguments instead ("Expected chunks source, auto, ...", "pass overwrite=True"):
# the public functions and options classes hand their errors through
# :func:`in_callers_words`, and the command line says once that it is the caller
# (:func:`command_line`).

import contextlib as _contextlib  # noqa: E402
import re as _re  # noqa: E402
from collections.abc import Callable as _Callable  # noqa: E402
from collections.abc import Iterator as _Iterator  # noqa: E402
from contextvars import ContextVar as _ContextVar  # noqa: E402
from typing import TypeVar as _TypeVar  # noqa: E402

_T = _TypeVar("_T")
_CALLER: _ContextVar[str] = _ContextVar("layoutkit_caller", default="python")

PYTHON_NAMES = {"chunk-size": "chunk_size", "storage-option": "storage_options", "no-consolidate": "consolidate=False",
                "no-dedupe": "dedupe=False", "overwrite": "overwrite=True", "append": "append=True"}
"""Command-line options whose keyword argument is not their name with ``_`` for ``-``."""


@_contextlib.contextmanager
def command_line() -> _Iterator[None]:
    """Within it, errors keep the command line's words (``layoutkit.cli`` runs every
    command in it)."""
    token = _CALLER.set("cli")
    try:
        yield
    finally:
        _CALLER.reset(token)


def python_words(text: str) -> str:
    """``text`` with each ``--option`` spelled as the keyword argument it is in Python."""

    def one(match: _re.Match[str]) -> str:
        name = match.group(1)
        return PYTHON_NAMES.get(name, name.replace("-", "_"))

    return _re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)", one, text)


def in_callers_words(exc: LayoutkitError) -> LayoutkitError:
    """``exc``, its message in the words of whoever called (unchanged on the command line)."""
    if _CALLER.get() == "cli" or not exc.args or not isinstance(exc.args[0], str):
        return exc
    words = python_words(exc.args[0])
    if words != exc.args[0]:
        exc.args = (words, *exc.args[1:])
    return exc


def says_it_in_python(fn: _Callable[..., _T]) -> _Callable[..., _T]:
    """A public function whose errors name keyword arguments, not options, when Python
    called it (:func:`in_callers_words`)."""
    import functools

    @functools.wraps(fn)
    def call(*args: object, **kwargs: object) -> _T:
        try:
            return fn(*args, **kwargs)
        except LayoutkitError as exc:
            in_callers_words(exc)
            raise

    return call
