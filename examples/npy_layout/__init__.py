"""An example layout, whole: every numeric dataset of a source as a ``.npy`` file.

A layout is one package like this one, registered through the ``layoutkit.layouts``
entry-point group of the package that ships it (its ``pyproject.toml`` here), or, in a
script, one line in the registry. Its ``Layout`` subclass names its parts by role,
each imported when first used (:class:`layoutkit.layout.Layout`):

- ``spec.py``: the format (file names, what is carried), which both directions use;
- ``plan.py``: the planner, pure, from the source's inventory;
- ``write.py``: the writer (``begin``: the skeleton and the tasks; ``summarize``);
- ``read.py``: the reader (``open_archive``: what ``layoutkit.open`` hands out);
- ``compare.py``: the comparator, the proof ``layoutkit verify`` runs;
- ``recipes/``: the recipes it ships (``layoutkit recipes`` lists them, ``advise``
  tries them).

Installed (``pip install examples/npy_layout``), it is a layout of ``layoutkit
convert`` like layoutkit's own: ``layoutkit convert shots.h5 out --layout npy``,
``layoutkit verify shots.h5 out``, ``layoutkit advise shots.h5 --candidates npy``, and
the conformance suite (:mod:`layoutkit.testing`) runs over it, with no line of
layoutkit changed for it. The pipeline checks the source and the destination, stages
the output, runs the tasks on the engine (threads, processes or a dask cluster), stamps
the provenance and publishes, or removes everything on an error or Ctrl-C::

    # pyproject.toml of the package that ships it
    [project.entry-points."layoutkit.layouts"]
    npy = "npy_layout:NpyFolder"

    # or, in a script
    from layoutkit.layouts import LAYOUTS
    LAYOUTS["npy"] = NpyFolder()
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from layoutkit.layout import Comparator, Layout, Planner, Reader, Writer
from npy_layout.spec import ATTRS_FILE, FORMER_NAMES, LAYOUT_NAME

if TYPE_CHECKING:
    from npy_layout.plan import NpyPlan
    from npy_layout.write import NpySummary


@dataclass(frozen=True)
class NpyOptions:
    workers: int = 2
    overwrite: bool = False


class NpyFolder(Layout[NpyOptions, "NpyPlan", "NpySummary"]):
    """Every numeric dataset as a ``.npy`` file in one folder."""

    name, aliases = LAYOUT_NAME, FORMER_NAMES
    command, target, format, suffix = "convert", "npy", "npy", ".npy.d"
    destinations = ("local",)  # files in a folder: no bucket, no Icechunk
    options_class, recipe_keys = NpyOptions, ()
    description = "every numeric dataset as a .npy file in one folder (an example plugin)"
    recipes = resources.files(__name__) / "recipes"

    def planner(self) -> Planner[NpyOptions, NpyPlan]:
        from npy_layout import plan

        return plan

    def writer(self) -> Writer[NpyPlan, NpySummary]:
        from npy_layout import write

        return write

    def reader(self) -> Reader:
        from npy_layout import read

        return read

    def comparator(self) -> Comparator:
        from npy_layout import compare

        return compare

    def guess_can_open(self, location: Path) -> bool:
        return (location / ATTRS_FILE).is_file()

    def needs_shot_archive(self, options: Any) -> bool:
        return False


__all__ = ["NpyFolder", "NpyOptions"]
