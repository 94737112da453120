"""An example layout, whole: every numeric dataset of a source as a ``.npy`` file.

A layout is one package like this one, registered through the ``layoutkit.layouts``
entry-point group of the package that ships it (or, in a script, one line in the
registry). The package's modules are the layout's parts, found by
:attr:`layoutkit.layout.Layout.package`:

- ``spec.py``: the format (file names, what is carried), which both directions use;
- ``plan.py``: ``plan``, pure, from the source's inventory;
- ``write.py``: ``begin`` (the skeleton and the tasks) and ``summarize``;
- ``read.py``: ``open_archive``, the reader ``layoutkit.open`` hands out;
- ``compare.py``: ``compare``, the proof ``layoutkit verify`` runs.

The pipeline checks the source and the destination, stages the output, runs the tasks
on the engine (threads, processes or a dask cluster), stamps the provenance and
publishes, or removes everything on an error or Ctrl-C. Registered, the layout is run
by the conformance suite (:mod:`layoutkit.testing`), opened by ``layoutkit.open`` and
verified by ``layoutkit verify``::

    # pyproject.toml of the package that ships it
    [project.entry-points."layoutkit.layouts"]
    npy-folder = "npy_layout:NpyFolder"

    # or, in a script
    from layoutkit.layouts import LAYOUTS
    LAYOUTS["npy-folder"] = NpyFolder()
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from layoutkit.layout import Layout
from npy_layout.spec import ATTRS_FILE, LAYOUT_NAME


@dataclass(frozen=True)
class NpyOptions:
    workers: int = 2
    overwrite: bool = False


class NpyFolder(Layout):
    """Every numeric dataset as a ``.npy`` file in one folder."""

    name = LAYOUT_NAME
    package = "npy_layout"
    command, target, format = "export", "npy-folder", "npy"
    destinations = ("local",)  # files in a folder: no bucket, no Icechunk
    options_class, recipe_keys = NpyOptions, ()
    description = "every numeric dataset as a .npy file in one folder"

    def guess_can_open(self, location: Path) -> bool:
        return (location / ATTRS_FILE).is_file()


__all__ = ["NpyFolder", "NpyOptions"]
