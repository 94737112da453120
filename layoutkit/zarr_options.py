"""The options of ``convert``, for every Zarr layout, and their recipe keys: what the
CLI and recipes build, what planning and the writers read. Imports neither numpy nor
zarr (the registry of layouts loads it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from layoutkit.errors import InvalidOptionError
from layoutkit.options import (
    CHUNK_SIZE_KEY,
    CHUNKS_KEY,
    COMPRESSOR_KEY,
    STR_OR_INT,
    ChunkSpec,
    CompressorSpec,
    RecipeKey,
    ShardSpec,
    ZarrFormat,
    exact_size,
    parse_bool,
    parse_chunks,
    parse_compressor,
    parse_shards,
    take_typed_values,
    takes_command_names,
)
from layoutkit.templates import DEFAULT_TEMPLATE, TEMPLATE_KEY

LAYOUT_CHECKS: list[Callable[[Any], Any]] = []
"""Checks of ``ConvertOptions.layout`` that the registry of layouts installs when it loads
(:mod:`layoutkit.layouts`; this core module cannot import it): ``layoutkit.ConvertOptions``
comes with the registry, so an unknown layout is refused when the options are built."""

DEFAULT_CHUNK_BYTES = 4 * 1024**2
DEFAULT_MEMORY_LIMIT = 1024**3


@takes_command_names
@dataclass(frozen=True)
class ConvertOptions:
    """Every choice ``convert`` takes, for every Zarr layout (the CLI and recipes build one).

    Each field takes the values the command line takes, as text or already parsed
    (``ConvertOptions(compressor="lz4", chunks="auto", memory_limit="1GiB")``); a bad
    value raises :class:`~layoutkit.errors.InvalidOptionError` at once, naming the field.

    Attributes
    ----------
    zarr_format : int
        ``3`` (default) or ``2`` (``--zarr-format``). Format 2 has no shards.
    chunks : ChunkSpec or str
        ``"auto"`` (default: the source's chunks grown to ``chunk_bytes``), ``"source"``
        (the source's chunks as they are) or a shape such as ``"1000,8"`` or ``(1000, 8)``
        (``-1``: the whole axis) (``--chunks``).
    chunk_bytes : int or str
        The uncompressed chunk size ``chunks="auto"`` aims at: 4 MiB, or ``"8MiB"``
        (``--chunk-size``; ``chunk_size=`` is taken too, and ``options.chunk_size`` reads it).
    compressor : CompressorSpec or str
        ``"zstd:3"`` (default), ``"none"``, ``"gzip:4"``, ``"lz4"``,
        ``"blosc:lz4:5:shuffle"``, with an optional ``"shuffle+"`` prefix, or ``"source"``:
        each chunk copied as stored, its HDF5 filters spelled as Zarr codecs
        (``--compressor``).
    shards : ShardSpec or str or int
        ``"none"`` (default), ``"auto"`` (64 MiB shards) or a target shard size such as
        ``"128MiB"`` (``--shards``; Zarr format 3 only).
    consolidate : bool
        Write consolidated metadata (default True; ``--no-consolidate``).
    workers : int or str
        Parallel workers (default 2; ``--workers``).
    scheduler : str
        ``"threads"`` (default), ``"processes"`` (a local dask cluster), ``"serial"``, or
        a dask scheduler address such as ``"tcp://host:8786"`` (``--scheduler``).
    memory_limit : int or str
        The budget for data in flight: 1 GiB, or ``"2GiB"`` (``--memory-limit``).
    batch_files : int
        Many sources: write this many files at a time (0, default: as many as hold
        ~100,000 datasets; ``--batch-files``).
    overwrite : bool
        Replace the destination if it exists (``--overwrite``).
    skip_unsupported : bool
        Leave out, and list, datasets the layout cannot carry (``--skip-unsupported``).
    layout : str
        ``"shot-major"`` (default), ``"signal-major"``, ``"shot-packed"`` or
        ``"virtual"`` (``--layout``; the former spellings work too).
    template : str
        Where shots and signals are, for the layouts that pack them:
        ``"/shots/{shot}/signals/{signal}"`` (``--template``).
    """

    zarr_format: ZarrFormat = 3
    chunks: ChunkSpec = field(default_factory=lambda: parse_chunks("auto"))
    chunk_bytes: int = DEFAULT_CHUNK_BYTES
    compressor: CompressorSpec = field(default_factory=lambda: parse_compressor("zstd:3"))
    shards: ShardSpec = field(default_factory=lambda: parse_shards("none"))
    consolidate: bool = True
    workers: int = 2
    scheduler: str = "threads"
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    batch_files: int = 0  # a set of sources written this many files at a time (0: as many as hold ~100,000 datasets)
    overwrite: bool = False
    skip_unsupported: bool = False
    # which Zarr layout, by its name in the registry (layoutkit.layouts); former spellings work too
    layout: str = "shot-major"
    template: str = DEFAULT_TEMPLATE  # where shots and signals are, for the layouts that pack them

    def __post_init__(self) -> None:
        from layoutkit.errors import in_callers_words

        take_typed_values(self, ZARR_RECIPE_KEYS)  # compressor="lz4", chunks="auto", memory_limit="1GiB"...
        for check in LAYOUT_CHECKS:  # a layout convert writes, by its name or a former spelling
            try:
                check(self)
            except InvalidOptionError as exc:
                raise in_callers_words(exc) from None
        if self.zarr_format == 2 and self.shards.mode != "none":  # it would shard nothing, and say nothing
            raise in_callers_words(InvalidOptionError(
                f"Zarr format 2 has no shards: leave out --shards {self.shards}, or write --zarr-format 3."))


def _parse_zarr_format(text: Any) -> int:
    if str(text).strip() not in ("2", "3"):
        raise InvalidOptionError(f"Expected --zarr-format 2 or 3. Got {text!r}.")
    return int(str(text).strip())


def _show_shards(spec: ShardSpec) -> str | int:
    return exact_size(spec.target_bytes) if spec.mode == "size" else spec.mode


ZARR_RECIPE_KEYS: tuple[RecipeKey, ...] = (
    RecipeKey("zarr_format", "zarr_format", _parse_zarr_format, int, "2 or 3", STR_OR_INT),
    TEMPLATE_KEY,
    CHUNKS_KEY,
    CHUNK_SIZE_KEY,
    COMPRESSOR_KEY,
    RecipeKey("shards", "shards", parse_shards, _show_shards, "none, auto or a size such as \"64MiB\"", STR_OR_INT),
    RecipeKey("consolidate", "consolidate", parse_bool, bool, "true or false", (bool,)),
)


__all__ = ["DEFAULT_CHUNK_BYTES", "DEFAULT_MEMORY_LIMIT", "LAYOUT_CHECKS", "ZARR_RECIPE_KEYS", "ConvertOptions"]
