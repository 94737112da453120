"""The options of ``reorder`` and their recipe keys: what the registry needs of the paged
HDF5 layout, without h5py's writer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from layoutkit.errors import InvalidOptionError
from layoutkit.layouts.hdf5_paged.spec import BY
from layoutkit.options import (
    CHUNK_SIZE_KEY,
    CHUNKS_KEY,
    COMPRESSOR_KEY,
    STR_OR_INT,
    ChunkSpec,
    CompressorSpec,
    RecipeKey,
    choice_parser,
    exact_size,
    parse_bool,
    parse_chunks,
    parse_compressor,
    parse_size,
    size_parser,
    take_typed_values,
    takes_command_names,
)
from layoutkit.templates import DEFAULT_TEMPLATE, TEMPLATE_KEY


@takes_command_names
@dataclass(frozen=True)
class ReorderOptions:
    """Every choice ``reorder`` takes (the CLI and recipes build one).

    Each field takes the values the command line takes, as text or already parsed
    (``ReorderOptions(by="signal", page_size="8MiB", compressor="gzip:4")``); a bad
    value raises :class:`~layoutkit.errors.InvalidOptionError` at once, naming the field.

    Attributes
    ----------
    by : str
        The byte order: ``"shot"`` (default: all signals of a shot together),
        ``"signal"`` (one signal of every shot together) or ``"group"`` (``--by``).
    template : str
        Where shots and signals are: ``"/shots/{shot}/signals/{signal}"`` (``--template``).
    page_size : int or str or None
        The file space page: None or ``"auto"`` (default: chosen for the file), or a
        power of two of at least 512 B such as ``"8MiB"`` (``--page-size``).
    compressor : CompressorSpec or str
        ``"gzip:4"`` (default), ``"none"``, ``"lz4"``, ``"zstd:3"``, ``"source"`` (the
        chunks as stored)... (``--compressor``).
    compress_threshold : int or str
        Datasets smaller than this are stored uncompressed: 8 KiB, or ``"16KiB"``
        (``--compress-threshold``).
    chunks : ChunkSpec or str
        ``"source"`` (default), ``"auto"`` or a shape such as ``"1000,8"`` (``--chunks``).
    chunk_bytes : int or str
        The chunk size ``chunks="auto"`` aims at: 4 MiB (``--chunk-size``).
    dedupe : bool
        Store a time base shared by several signals once (default True; ``--no-dedupe``).
    workers : int or str
        Parallel workers (default 2; ``--workers``).
    memory_limit : int or str
        The budget for data in flight: 1 GiB, or ``"2GiB"`` (``--memory-limit``).
    overwrite : bool
        Replace the destination if it exists (``--overwrite``).
    skip_unsupported : bool
        Leave out, and list, datasets no HDF5 file can carry (``--skip-unsupported``).
    """

    by: str = "shot"
    template: str = DEFAULT_TEMPLATE
    page_size: int | None = None  # None: auto
    compressor: CompressorSpec = field(default_factory=lambda: parse_compressor("gzip:4"))
    compress_threshold: int = 8 * 1024
    chunks: ChunkSpec = field(default_factory=lambda: parse_chunks("source"))
    chunk_bytes: int = 4 * 1024**2
    dedupe: bool = True
    workers: int = 2
    memory_limit: int = 1024**3
    overwrite: bool = False
    skip_unsupported: bool = False  # leave out (and list) datasets no HDF5 file can carry over

    def __post_init__(self) -> None:
        take_typed_values(self, REORDER_RECIPE_KEYS)  # page_size="8MiB", compressor="gzip:4", by="signal"...


def _parse_page_size(text: Any) -> int | None:
    """``auto``, or a power of two of at least 512 B (HDF5's file space pages)."""
    if str(text).strip().lower() == "auto":
        return None
    size = parse_size(text, what="page size")
    if size < 512 or size & (size - 1):
        raise InvalidOptionError(
            f"Expected a page size that is a power of two of at least 512 B, such as 8MiB, or auto. Got {text!r}."
        )
    return size


REORDER_RECIPE_KEYS: tuple[RecipeKey, ...] = (
    RecipeKey("by", "by", choice_parser("--by", BY), str, "\"shot\", \"signal\" or \"group\""),
    TEMPLATE_KEY,
    RecipeKey("page_size", "page_size", _parse_page_size, lambda v: "auto" if v is None else exact_size(v),
              "auto or a size such as \"8MiB\"", STR_OR_INT),
    COMPRESSOR_KEY,
    RecipeKey("compress_threshold", "compress_threshold", size_parser("compression threshold"), exact_size,
              "a size such as \"8KiB\"", STR_OR_INT),
    CHUNKS_KEY,
    CHUNK_SIZE_KEY,
    RecipeKey("dedupe", "dedupe", parse_bool, bool, "true or false", (bool,)),
)



__all__ = ["REORDER_RECIPE_KEYS", "ReorderOptions"]
