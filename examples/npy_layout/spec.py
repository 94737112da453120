"""The npy-folder format: one ``.npy`` file per numeric dataset, named after its path
(``/shots/1/signals/ip`` is ``shots__1__signals__ip.npy``), and ``attrs.json``: the root
attributes (layoutkit's provenance among them)."""

from __future__ import annotations

LAYOUT_NAME = "npy"
FORMER_NAMES = ("npy-folder",)
ATTRS_FILE = "attrs.json"
MAX_BYTES = 64 * 2**20  # a .npy file is read whole: larger datasets are left out
SEPARATOR = "__"


def npy_name(path: str) -> str:
    """The file of the dataset at ``path``."""
    return path.strip("/").replace("/", SEPARATOR) + ".npy"


def dataset_path(name: str) -> str:
    """The dataset path of the file ``name`` (the inverse of :func:`npy_name`)."""
    return "/" + name.removesuffix(".npy").replace(SEPARATOR, "/")


def carried(kind: str, dtype_kind: str, shape: tuple[int, ...], nbytes: int, null_space: bool) -> bool:
    """Whether a dataset is written: numbers with at least one axis, read whole."""
    return kind in ("numeric", "bool") and dtype_kind in "biufc" and bool(shape) and not null_space \
        and nbytes <= MAX_BYTES
