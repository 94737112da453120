"""Parse user-supplied option values at the edge.

Each ``parse_*`` function takes the text a user typed (on the command line or in a
recipe) and returns a plain value or a frozen dataclass, or raises
:class:`~layoutkit.errors.InvalidOptionError` saying what was expected and what came.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeVar, get_args

from layoutkit.errors import InvalidOptionError

_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int, *, what: str = "size") -> int:
    """Parse a byte size such as ``"8MiB"``, ``"64MB"``, ``"4096"`` or ``"1.5GiB"``.

    Decimal units (kB, MB, GB) are powers of 1000, binary ones (KiB, MiB, GiB) powers
    of 1024, as in the IEC standard.

    Raises
    ------
    InvalidOptionError
        When the text is not a non-negative number with a known unit.
    """
    if isinstance(text, int):
        if text < 0:
            raise InvalidOptionError(f"Expected a {what} of 0 bytes or more. Got {text}.")
        return text
    m = _SIZE_RE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _SIZE_UNITS:
        raise InvalidOptionError(
            f"Expected a {what} such as 4MiB, 64MB or 1048576 "
            f"(units: B, kB, MB, GB, KiB, MiB, GiB). Got {text!r}."
        )
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` agreeing: "1 group", "3 groups", "1,200 arrays" (``many``:
    a plural that is not ``word`` + "s")."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def format_size(n: float) -> str:
    """Format a byte count with a binary unit, e.g. ``8.0 MiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


ZarrFormat: TypeAlias = Literal[2, 3]
"""The Zarr format versions layoutkit writes and reads."""

BloscCname: TypeAlias = Literal["blosclz", "lz4", "lz4hc", "zlib", "zstd"]


@dataclass(frozen=True)
class CompressorSpec:
    """A compressor choice, independent of the target format.

    ``name`` is one of :data:`COMPRESSORS`; ``cname`` is blosc's inner codec.
    """

    name: str
    level: int | None = None
    cname: BloscCname | None = None
    shuffle: bool = False

    @property
    def codec_level(self) -> int:
        """The level a codec that takes one (zstd, gzip, blosc) is given: the one chosen,
        else the codec's default."""
        return self.level if self.level is not None else _LEVELS[self.name][2] or 0

    @property
    def blosc_cname(self) -> BloscCname:
        """Blosc's inner codec: the one chosen, else lz4."""
        return self.cname or "lz4"

    def __str__(self) -> str:
        if self.name in ("none", "source"):
            return self.name
        if self.name == "blosc":
            return f"blosc:{self.cname}:{self.level}:{'shuffle' if self.shuffle else 'noshuffle'}"
        prefix = "shuffle+" if self.shuffle else ""
        return f"{prefix}{self.name}" + (f":{self.level}" if self.level is not None else "")


# "source": keep each dataset's own encoding, copying its stored chunks (convert only)
COMPRESSORS = ("none", "zstd", "gzip", "lz4", "lzf", "blosc", "source")
_LEVELS: dict[str, tuple[int | None, int | None, int | None]] = {"zstd": (1, 22, 3), "gzip": (0, 9, 4), "blosc": (0, 9, 5), "lz4": (None, None, None)}
_BLOSC_CNAMES: tuple[BloscCname, ...] = get_args(BloscCname)


def _parse_level(name: str, text: str | None) -> int | None:
    lo, hi, default = _LEVELS.get(name, (None, None, None))
    if text is None or text == "":
        return default
    if lo is None or hi is None:
        raise InvalidOptionError(f"Compressor {name} takes no level. Got {name}:{text}.")
    try:
        level = int(text)
    except ValueError:
        level = -1
    if not lo <= level <= hi:
        raise InvalidOptionError(
            f"Expected a {name} compression level from {lo} to {hi}. Got {text}."
        )
    return level


def parse_compressor(text: str) -> CompressorSpec:
    """Parse a compressor such as ``zstd:3``, ``gzip:4``, ``shuffle+gzip:4``, ``lz4``,
    ``lzf``, ``blosc:zstd:5:shuffle``, ``none`` or ``source``.

    Raises
    ------
    InvalidOptionError
        For an unknown compressor or a level out of range; the message lists the choices.
    """
    raw = str(text).strip().lower()
    shuffle = False
    if raw.startswith("shuffle+"):
        shuffle, raw = True, raw[len("shuffle+") :]
    name, _, rest = raw.partition(":")
    if name not in COMPRESSORS:
        raise InvalidOptionError(
            "Expected a compressor: none, zstd[:1-22], gzip[:0-9], lz4, lzf, "
            f"blosc[:CNAME[:0-9[:shuffle|noshuffle]]], optionally prefixed shuffle+, or source. Got {text!r}."
        )
    if name in ("none", "source"):
        if rest or shuffle:
            raise InvalidOptionError(f"Compressor {name} takes no options. Got {text!r}.")
        return CompressorSpec(name)
    if name == "lzf":
        if rest:
            raise InvalidOptionError(f"Compressor lzf takes no level. Got {text!r}.")
        return CompressorSpec("lzf", shuffle=shuffle)
    if name == "blosc":
        parts = rest.split(":") if rest else []
        cname = parts[0] if parts else "lz4"
        if cname not in _BLOSC_CNAMES:
            raise InvalidOptionError(
                f"Expected a blosc codec from {', '.join(_BLOSC_CNAMES)}. Got {cname!r}."
            )
        level = _parse_level("blosc", parts[1] if len(parts) > 1 else None)
        mode = parts[2] if len(parts) > 2 else "shuffle"
        if mode not in ("shuffle", "noshuffle") or len(parts) > 3:
            raise InvalidOptionError(
                f"Expected blosc:CNAME:LEVEL:shuffle|noshuffle. Got {text!r}."
            )
        return CompressorSpec("blosc", level, cname, mode == "shuffle" or shuffle)
    return CompressorSpec(name, _parse_level(name, rest or None), shuffle=shuffle)


@dataclass(frozen=True)
class ChunkSpec:
    """How to choose chunks: ``source``, ``auto`` (target bytes), or an explicit shape."""

    mode: str  # "source" | "auto" | "shape"
    shape: tuple[int, ...] | None = None

    def __str__(self) -> str:
        return ",".join(map(str, self.shape)) if self.mode == "shape" and self.shape else self.mode


def parse_chunks(text: str) -> ChunkSpec:
    """Parse ``--chunks``: ``source``, ``auto`` or a shape such as ``1000,8``.

    An explicit shape applies to arrays of the same rank; other arrays fall back to
    ``auto``. A ``-1`` entry means the whole axis.
    """
    raw = str(text).strip().lower()
    if raw in ("source", "auto"):
        return ChunkSpec(raw)
    try:
        shape = tuple(int(p) for p in raw.replace("x", ",").split(",") if p.strip())
    except ValueError:
        shape = ()
    if not shape or any(s == 0 or s < -1 for s in shape):
        raise InvalidOptionError(
            f"Expected --chunks source, auto, or a shape such as 1000,8 (-1 = whole axis). "
            f"Got {text!r}."
        )
    return ChunkSpec("shape", shape)


@dataclass(frozen=True)
class ShardSpec:
    """How to shard Zarr v3 arrays: ``none``, ``auto`` or a target shard size in bytes."""

    mode: str  # "none" | "auto" | "size"
    target_bytes: int = 0

    def __str__(self) -> str:
        return str(self.target_bytes) if self.mode == "size" else self.mode


AUTO_SHARD_BYTES = 64 * 1024**2


def parse_shards(text: str) -> ShardSpec:
    """Parse ``--shards``: ``none``, ``auto`` (64 MiB shards) or a size such as ``128MiB``."""
    raw = str(text).strip().lower()
    if raw == "none":
        return ShardSpec("none")
    if raw == "auto":
        return ShardSpec("auto", AUTO_SHARD_BYTES)
    try:
        size = parse_size(raw, what="shard size")
    except InvalidOptionError:
        raise InvalidOptionError(
            f"Expected --shards none, auto, or a target shard size such as 64MiB. Got {text!r}."
        ) from None
    if size <= 0:
        raise InvalidOptionError(f"Expected a shard size above 0 bytes. Got {text!r}.")
    return ShardSpec("size", size)


def parse_workers(value: int) -> int:
    """Check a worker count (1 or more)."""
    if value < 1:
        raise InvalidOptionError(f"Expected --workers of 1 or more. Got {value}.")
    return value


def parse_batch_files(value: int) -> int:
    """Check a batch's number of files (0: chosen by the run, :mod:`layoutkit.appending.batches`)."""
    if int(value) < 0:
        raise InvalidOptionError(f"Expected --batch-files of 1 or more (0: chosen for the files). Got {value}.")
    return int(value)


SOURCE_SIZE = "the source's size"


def size_relative(stored: int, reference: int, what: str) -> str:
    """The one wording every command uses for a size against another:
    "stored 681.7 KiB, 0.83x the source's size"."""
    if not reference:
        return f"stored {format_size(stored)}"
    return f"stored {format_size(stored)}, {stored / reference:.2f}x {what}"


# -- recipe keys: the layout choices an options dataclass takes, by name -------------


def exact_size(n: int) -> str | int:
    """A byte count as the shortest exact size text: 8388608 -> "8MiB", 8000 -> "8kB"."""
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024), ("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if n and n % factor == 0:
            return f"{n // factor}{unit}"
    return n


def size_parser(what: str) -> Callable[[Any], int]:
    """A parser of sizes whose error message names ``what``."""
    return lambda text: parse_size(text, what=what)


def choice_parser(option: str, choices: tuple[str, ...]) -> Callable[[Any], str]:
    """A parser of one of ``choices`` (case-insensitive), for the option named ``option``."""

    def parse(text: Any) -> str:
        value = str(text).strip().lower()
        if value not in choices:
            listed = f"{', '.join(choices[:-1])} or {choices[-1]}" if len(choices) > 1 else choices[0]
            raise InvalidOptionError(f"Expected {option} {listed}. Got {text!r}.")
        return value

    return parse


def parse_bool(text: Any) -> bool:
    """A TOML boolean (recipes): ``true`` or ``false``, nothing else."""
    if not isinstance(text, bool):
        raise InvalidOptionError(f"Expected true or false. Got {text!r}.")
    return text


@dataclass(frozen=True)
class RecipeKey:
    """One layout choice: its key in a recipe (the command's option name with ``_`` for
    ``-``), the options-dataclass field it sets, how to parse it and how to print it.
    Each layout declares its keys; :mod:`layoutkit.recipes` reads recipes with them."""

    name: str
    field: str
    parse: Callable[[Any], Any]
    show: Callable[[Any], Any]
    example: str  # what a good value looks like, for type errors
    types: tuple[type, ...] = (str,)  # the TOML types accepted

    def value(self, raw: Any) -> Any:
        """Parse a raw value (TOML or command line); raises InvalidOptionError."""
        if isinstance(raw, bool) and bool not in self.types or not isinstance(raw, self.types):
            kind = type(raw).__name__
            raise InvalidOptionError(f"Expected {self.example}. Got {raw!r} (a {kind}).")
        if isinstance(raw, list):  # chunks = [1000, 8]
            if not all(isinstance(n, int) and not isinstance(n, bool) for n in raw):
                raise InvalidOptionError(f"Expected {self.example}. Got {raw!r}.")
            raw = ",".join(map(str, raw))
        return self.parse(raw)


STR_OR_INT = (str, int)
CHUNKS_KEY = RecipeKey("chunks", "chunks", parse_chunks, str, "source, auto or a shape such as \"1000,8\"", (str, list))
CHUNK_SIZE_KEY = RecipeKey("chunk_size", "chunk_bytes", size_parser("--chunk-size"), exact_size, "a size such as \"4MiB\"",
                           STR_OR_INT)
COMPRESSOR_KEY = RecipeKey("compressor", "compressor", parse_compressor, str, "a compressor such as \"zstd:3\"")


# -- durations, bandwidths and lists of values (verify's sweeps, advise's budget) ----------------

_DURATION = re.compile(r"^\s*(-?[0-9]*\.?[0-9]+)\s*(us|ms|s|sec|min|m|h)?\s*$")
_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}


def duration_text(seconds: float) -> str:
    """Seconds as a person says them: "45 s", "3 min 20 s", "25 min", "2.5 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def parse_duration(text: str | float, *, what: str = "a duration", example: str = "10ms, 90s or 2min",
                   positive: bool = False) -> float:
    """A duration such as ``10ms``, ``0.05s``, ``90s``, ``2min`` or ``1h`` (a bare number
    is seconds) -> seconds; 0 or more, or above 0 with ``positive``."""
    m = _DURATION.match(str(text))
    value = float(m.group(1)) * _SECONDS[m.group(2) or "s"] if m else -1.0
    if value < 0 or positive and value == 0:
        raise InvalidOptionError(f"Expected {what} such as {example}. Got {text!r}.")
    return value


def parse_bandwidth(text: str) -> float:
    """A bandwidth such as ``100MB/s`` or ``1GiB/s`` (0 = unlimited) -> bytes per second."""
    body = text[:-2] if text.endswith("/s") else text
    try:
        return float(parse_size(body, what="bandwidth"))
    except InvalidOptionError:
        raise InvalidOptionError(f"Expected bandwidths such as 100MB/s, 1GiB/s or 0 (unlimited). Got {text!r}.") from None


def list_items(text: str) -> list[str]:
    """The items of a comma-separated list, stripped (empty items dropped)."""
    return [t.strip() for t in str(text).split(",") if t.strip()]


def parse_list(text: str, parse_one: Callable[[str], Any]) -> tuple[Any, ...]:
    """A comma-separated list, each item parsed, repeats dropped (an empty list is one
    empty item, which ``parse_one`` refuses)."""
    return tuple(dict.fromkeys(parse_one(t) for t in list_items(text) or [""]))


def parse_durations(text: str) -> tuple[float, ...]:
    """Latencies such as ``0,10ms,0.05s`` -> seconds."""
    return parse_list(text, lambda t: parse_duration(t, what="latencies of 0 or more", example="0,10ms,0.05s"))


def parse_bandwidths(text: str) -> tuple[float, ...]:
    """Bandwidths such as ``100MB/s,0`` -> bytes per second."""
    return parse_list(text, parse_bandwidth)


def parse_sizes(text: str, what: str) -> tuple[int, ...]:
    """Sizes such as ``0,64MiB,256MiB``."""
    return parse_list(text, lambda t: parse_size(t, what=what))


def parse_counts(text: str, what: str) -> tuple[int, ...]:
    """Whole numbers of 1 or more, such as ``1,2,4``."""

    def one(t: str) -> int:
        n = int(t) if t.isdigit() else 0
        if n < 1:
            raise InvalidOptionError(f"Expected {what} as whole numbers of 1 or more, such as 1,2,4. Got {t!r}.")
        return n

    return parse_list(text, one)


def parse_choices(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    """Names from ``allowed``, such as ``threads,processes``."""
    names = tuple(dict.fromkeys(list_items(text)))
    if not names or any(n not in allowed for n in names):
        raise InvalidOptionError(f"Expected {what} from {', '.join(allowed)}. Got {text!r}.")
    return names




def _count(parse: Callable[[int], int], option: str) -> Callable[[Any], int]:
    def parsed(value: Any) -> int:
        try:
            number = int(str(value).strip()) if not isinstance(value, bool) else None
        except ValueError:
            number = None
        if number is None:
            raise InvalidOptionError(f"Expected {option} as a whole number. Got {value!r}.")
        return parse(number)

    return parsed


def parse_scheduler(text: str) -> str:
    """``serial``, ``threads``, ``processes`` or a dask scheduler address."""
    raw = str(text).strip()
    if raw in ("serial", "threads", "processes"):
        return raw
    if "://" in raw:  # an address: a host and a port (distributed's own error would come at run time)
        from urllib.parse import urlsplit

        parts = urlsplit(raw)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme == "inproc" or (parts.hostname and port is not None):
            return raw
        raise InvalidOptionError(f"Expected a dask.distributed scheduler address with a host and a port, such as "
                                 f"tcp://host:8786. Got {text!r}.")
    raise InvalidOptionError(
        "Expected --scheduler threads, processes, serial, or a dask.distributed scheduler "
        f"address such as tcp://host:8786. Got {text!r}."
    )


RUN_PARSERS: dict[str, Callable[[Any], Any]] = {
    "scheduler": parse_scheduler,
    "workers": _count(parse_workers, "--workers"),
    "memory_limit": size_parser("--memory-limit"),
    "batch_files": _count(parse_batch_files, "--batch-files"),
}
"""The machine's options (not a recipe's) that take the command line's values in Python too."""


COMMAND_NAMES = {"chunk_size": "chunk_bytes"}
"""Options whose field has another name than the command's option: the options classes
take the command's name too (``ConvertOptions(chunk_size="8MiB")``, as ``--chunk-size``)."""


_Options = TypeVar("_Options", bound=type)


def takes_command_names(cls: _Options) -> _Options:
    """An options dataclass whose constructor also takes the command's names of its fields
    (:data:`COMMAND_NAMES`), and which has them as read-only attributes."""
    import functools

    init = cls.__dict__["__init__"]  # the dataclass's own

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        for name, field_name in COMMAND_NAMES.items():
            if name in kwargs:
                if field_name in kwargs:
                    raise InvalidOptionError(f"Give {name} or {field_name}, not both (they are one option).")
                kwargs[field_name] = kwargs.pop(name)
        init(self, *args, **kwargs)

    setattr(cls, "__init__", __init__)  # noqa: B010 - a class's __init__ is not assigned as an attribute
    for name, field_name in COMMAND_NAMES.items():
        setattr(cls, name, _alias(field_name))
    return cls


def _alias(field_name: str) -> property:
    def get(self: Any) -> Any:
        return getattr(self, field_name)

    return property(get, doc=f"``{field_name}``, by its command's name.")


def take_typed_values(options: Any, keys: Sequence[RecipeKey]) -> None:
    """Parse the fields of a frozen options dataclass given as the command line types
    them (``compressor="lz4"``, ``chunks="auto"``, ``memory_limit="1GiB"``, ``shards=
    "auto"``, ``workers="2"``) with the very parsers the command line and recipes use;
    values already parsed (a :class:`CompressorSpec`, ``None`` for auto) are kept. Called
    by the options classes' ``__post_init__``: an invalid value fails there, in the
    caller's words (``Expected compressor ... Got 'lz5'``), not deep inside a run."""
    from dataclasses import fields

    from layoutkit.errors import in_callers_words

    have = {f.name for f in fields(options)}
    parsers: dict[str, Callable[[Any], Any]] = {k.field: k.value for k in keys if k.field in have}
    parsers.update({name: parse for name, parse in RUN_PARSERS.items() if name in have})
    for name, parse in parsers.items():
        value = getattr(options, name)
        if not isinstance(value, (str, int, list, tuple)):
            continue
        try:
            parsed = parse(list(value) if isinstance(value, tuple) else value)
        except InvalidOptionError as exc:
            raise in_callers_words(exc) from None
        object.__setattr__(options, name, parsed)
