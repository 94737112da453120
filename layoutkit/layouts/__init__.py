"""The layouts layoutkit writes, one module each, and the registry that names them.

A layout is a :class:`~layoutkit.pipeline.Layout`: its options dataclass and recipe
keys, a pure planner, and the task function that writes one task; the pipeline
(:mod:`layoutkit.pipeline`) runs every layout the same way. The commands, recipes and
``advise`` find layouts here by name, as zarr-python finds codecs by name. A new layout
is one new module and one line in :data:`LAYOUTS`.
"""

from __future__ import annotations

from typing import Any

from layoutkit.errors import InvalidOptionError
from layoutkit.layouts.hdf5_paged.plan import HDF5Paged
from layoutkit.layouts.shot_major.plan import ZarrMirror
from layoutkit.layouts.shot_packed.plan import ZarrShotPacked
from layoutkit.layouts.signal_major.plan import ZarrSignal
from layoutkit.pipeline import Layout

LAYOUTS: dict[str, Layout] = {
    layout.name: layout for layout in (ZarrMirror(), ZarrSignal(), HDF5Paged(), ZarrShotPacked())
}


def get_layout(name: str) -> Layout:
    """The registered layout called ``name``.

    Raises
    ------
    InvalidOptionError
        No such layout; the message lists the registered names.
    """
    try:
        return LAYOUTS[name]
    except KeyError:
        raise InvalidOptionError(f"Expected a layout: {', '.join(LAYOUTS)}. Got {name!r}.") from None


def layouts_of(command: str) -> list[Layout]:
    """The layouts a command writes (``convert``: the Zarr ones; ``reorder``: paged HDF5)."""
    return [layout for layout in LAYOUTS.values() if layout.command == command]


def layout_for(command: str, options: Any) -> Layout:
    """The layout ``command`` writes with ``options``: the one whose ``order`` is
    ``options.order`` when the command writes several.

    Raises
    ------
    InvalidOptionError
        An order no layout of the command has.
    """
    candidates = layouts_of(command)
    if len(candidates) == 1:
        return candidates[0]
    order = getattr(options, "order", None)
    for layout in candidates:
        if layout.order == order:
            return layout
    names = [str(layout.order) for layout in candidates]
    orders = f"{', '.join(names[:-1])} or {names[-1]}"
    raise InvalidOptionError(f"Expected --order {orders}. Got {order!r}.")


def targets() -> dict[str, Layout]:
    """Recipe target -> a layout of that target (the layouts of one target share their
    options and recipe keys)."""
    out: dict[str, Layout] = {}
    for layout in LAYOUTS.values():
        out.setdefault(layout.target, layout)
    return out


__all__ = ["LAYOUTS", "get_layout", "layout_for", "layouts_of", "targets"]
