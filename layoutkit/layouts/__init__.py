"""The layouts layoutkit writes and reads, one package each, and the registry that names them.

A layout is a :class:`~layoutkit.layout.Layout`: its names, options and recipe keys, and
the package whose modules plan, write, read and compare it. Everything that lists
layouts derives the list from :data:`LAYOUTS`: the commands' choices and help, recipes,
:func:`layoutkit.open` (which reader a store needs), ``verify`` (which comparator),
``inspect`` and ``advise``. A new layout of layoutkit's is one package and one line
below; a layout of another package registers through the entry-point group
:data:`ENTRY_POINTS`, as zarr-python's codecs and xarray's backends do::

    # the other package's pyproject.toml
    [project.entry-points."layoutkit.layouts"]
    npy-folder = "npy_layout:NpyFolder"     # a Layout subclass, or an instance

The conformance suite (:class:`layoutkit.testing.LayoutTests`) runs over every
registered layout.

Importing this module loads each layout's names and options only: no writer, reader or
Zarr (each is imported when a layout first uses it). The entry points are read when the
registry is first used (reading them costs ~50 ms, which ``import`` should not).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, MutableMapping
from typing import Any

from layoutkit import zarr_options as _zarr_options
from layoutkit.errors import InvalidOptionError, UnknownLayoutError
from layoutkit.layout import AnyLayout, Layout
from layoutkit.layouts import hdf5_paged, shot_major, shot_packed, signal_major, virtual
from layoutkit.options import RecipeKey

ENTRY_POINTS = "layoutkit.layouts"
"""The entry-point group other packages register their layouts in."""


class _Registry(MutableMapping[str, AnyLayout]):
    """The layouts by name: layoutkit's, then those of the entry points, read on first use
    (every other mapping method goes through these five)."""

    def __init__(self, own: Iterable[tuple[str, AnyLayout]]) -> None:
        self._layouts = dict(own)
        self._loaded = False

    def own(self, name: str) -> AnyLayout | None:
        """layoutkit's own layout called ``name`` (or a former spelling), read without
        loading the entry points (an entry point cannot take an own layout's name)."""
        return next((layout for layout in self._layouts.values() if name in layout.names), None)

    def _all(self) -> dict[str, AnyLayout]:
        if not self._loaded:
            self._loaded = True
            for name, layout in entry_point_layouts().items():
                if name in self._layouts:
                    warnings.warn(f"the layout {name!r} an entry point registers is layoutkit's own; it is not used",
                                  stacklevel=3)
                else:
                    self._layouts[name] = layout
        return self._layouts

    def __getitem__(self, key: str) -> AnyLayout:
        return self._all()[key]

    def __setitem__(self, key: str, value: AnyLayout) -> None:
        self._all()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def entry_point_layouts() -> dict[str, AnyLayout]:
    """The layouts other packages register under :data:`ENTRY_POINTS`, by name. One
    that does not load, or is no :class:`~layoutkit.layout.Layout`, is left out with a
    warning naming it: another package's fault does not stop layoutkit."""
    from importlib.metadata import entry_points

    found: dict[str, AnyLayout] = {}
    for point in entry_points(group=ENTRY_POINTS):
        try:
            obj = point.load()
            layout = obj() if isinstance(obj, type) and issubclass(obj, Layout) else obj
        except Exception as exc:  # noqa: BLE001 - any error of another package's code: said, and left out
            warnings.warn(f"the layout entry point {point.name!r} ({point.value}) does not load: {exc}", stacklevel=2)
            continue
        if not isinstance(layout, Layout):
            warnings.warn(f"the layout entry point {point.name!r} ({point.value}) is no layoutkit Layout", stacklevel=2)
            continue
        found[layout.name] = layout
    return found


LAYOUTS: MutableMapping[str, AnyLayout] = _Registry(
    (layout.name, layout)
    for layout in (shot_major.LAYOUT, signal_major.LAYOUT, shot_packed.LAYOUT, hdf5_paged.LAYOUT, virtual.LAYOUT)
)

def _check_convert_layout(options: Any) -> None:
    layout_for("convert", options)


_zarr_options.LAYOUT_CHECKS.append(_check_convert_layout)  # ConvertOptions refuses an unknown layout when built

DEFAULT_ZARR_LAYOUT = shot_major.LAYOUT.name
"""The layout of a Zarr store that records none (:data:`~layoutkit.formats.LAYOUT_ATTR`)."""


def _by_any_name() -> dict[str, AnyLayout]:
    out: dict[str, AnyLayout] = {}
    for layout in LAYOUTS.values():
        for name in layout.names:
            out.setdefault(name, layout)
    return out


def get_layout(name: str) -> AnyLayout:
    """The registered layout called ``name`` (its name, or a former spelling).

    Raises
    ------
    InvalidOptionError
        No such layout; the message lists the registered names.
    """
    found = _by_any_name().get(name)
    if found is None:
        raise InvalidOptionError(f"Expected a layout: {', '.join(LAYOUTS)}. Got {name!r}.")
    return found


def find_layout(name: str | None) -> AnyLayout | None:
    """The registered layout called ``name`` (its name, or a former spelling), or None."""
    return _by_any_name().get(name) if name else None


def layouts_of(command: str) -> list[AnyLayout]:
    """The layouts a command writes (``convert``: the Zarr ones; ``reorder``: paged HDF5)."""
    return [layout for layout in LAYOUTS.values() if layout.command == command]


def layouts_of_format(fmt: str) -> list[AnyLayout]:
    """The layouts whose outputs are of ``fmt`` ("zarr", "hdf5", or a layout's own)."""
    return [layout for layout in LAYOUTS.values() if layout.format == fmt]


def zarr_layout(recorded: Any) -> AnyLayout | None:
    """The layout of a Zarr store whose root records ``recorded`` under
    :data:`~layoutkit.formats.LAYOUT_ATTR` (``{"name": ...}``, or nothing: shot-major);
    None when the name is not a registered Zarr layout's."""
    name = recorded.get("name") if isinstance(recorded, dict) else None
    layout = find_layout(name or DEFAULT_ZARR_LAYOUT)
    return layout if layout is not None and layout.format == "zarr" else None


def detect(where: Any, recorded: Any = None, path: Any = None) -> AnyLayout:
    """The registered layout that wrote the output at ``where``: decided here once, for
    ``layoutkit.open``, ``verify`` and ``convert --append`` alike, with one error.

    ``recorded``: a Zarr store's root layout attribute (:data:`~layoutkit.formats.LAYOUT_ATTR`;
    ``{}`` when the root records none: shot-major), the store's layout by name. Else
    ``path`` (a local path): the layout of another format whose ``guess_can_open`` knows it.

    Raises
    ------
    UnknownLayoutError
        No registered layout wrote it; the message names what it holds and the layouts
        this layoutkit knows.
    """
    if recorded is not None:
        layout = zarr_layout(recorded)
        if layout is not None:
            return layout
        name = recorded.get("name") if isinstance(recorded, dict) else recorded
        known = ", ".join(sorted(lay.name for lay in layouts_of_format("zarr")))
        raise UnknownLayoutError(f"{where} holds the Zarr layout {name!r}, which this layoutkit does not know "
                                 f"(it knows {known}).")
    for layout in LAYOUTS.values():
        if path is not None and layout.format not in ("zarr", "hdf5") and layout.guess_can_open(path):
            return layout
    raise UnknownLayoutError(f"{where} is neither a Zarr store nor an HDF5 file, and no registered layout reads it.")


def _either(names: list[str]) -> str:
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]


def layout_for(command: str, options: Any) -> AnyLayout:
    """The layout ``command`` writes with ``options``: the one ``options.layout`` names
    (or a former spelling of it) when the command writes several.

    Raises
    ------
    InvalidOptionError
        A name no layout of the command has; the message lists those it has.
    """
    name = getattr(options, "layout", None)
    known = LAYOUTS.own(str(name)) if isinstance(LAYOUTS, _Registry) and name is not None else None
    if known is not None and known.command == command and type(options) is known.options_class:
        return known  # one of layoutkit's own: the entry points (a scan of every installed package) not read
    candidates = layouts_of(command)
    if len(candidates) == 1:
        return candidates[0]
    own = [c for c in candidates if type(options) is c.options_class]
    if len(own) == 1:  # the options of one layout alone (another package's): that layout
        return own[0]
    layout = find_layout(str(name)) if name is not None else None
    if layout not in candidates:
        raise InvalidOptionError(f"Expected --layout {_either([c.name for c in candidates])}. Got {name!r}.")
    return layout


def layout_key(target: str) -> RecipeKey:
    """The recipe key (and ``--layout``) that chooses among the layouts of a recipe
    target; its values are the layouts' names, former spellings read as them."""
    names = [layout.name for layout in LAYOUTS.values() if layout.target == target]

    def parse(text: Any) -> str:
        layout = find_layout(str(text).strip())
        if layout is None or layout.target != target:
            raise InvalidOptionError(f"Expected --layout {_either(names)}. Got {text!r}.")
        return layout.name

    return RecipeKey("layout", "layout", parse, str, _either([f'"{n}"' for n in names]))


def targets() -> dict[str, AnyLayout]:
    """Recipe target -> a layout of that target (the layouts of one target share their
    options and recipe keys)."""
    out: dict[str, AnyLayout] = {}
    for layout in LAYOUTS.values():
        out.setdefault(layout.target, layout)
    return out


__all__ = [
    "DEFAULT_ZARR_LAYOUT",
    "ENTRY_POINTS",
    "LAYOUTS",
    "detect",
    "entry_point_layouts",
    "find_layout",
    "get_layout",
    "layout_for",
    "layout_key",
    "layouts_of",
    "layouts_of_format",
    "targets",
    "zarr_layout",
]
