"""Reading an npy folder: the datasets by their source paths, through the Archive view
every layout offers (``shots``, ``signals``, ``read``, ``get``...)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from layoutkit.readers.base import Archive, Selection
from layoutkit.templates import DEFAULT_TEMPLATE
from npy_layout.spec import ATTRS_FILE, LAYOUT_NAME, dataset_path


class NpyArchive(Archive):
    """An npy folder: each file memory-mapped when read."""

    format = "npy"
    layout = LAYOUT_NAME

    def __init__(self, path: Path, template: str = DEFAULT_TEMPLATE) -> None:
        super().__init__(Path(path), template)
        self._files = {dataset_path(p.name): p for p in sorted(self.path.glob("*.npy"))}

    def children(self, group: str) -> list[str]:
        prefix = group.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/")[0] for p in self._files if p.startswith(prefix)})

    def exists(self, path: str) -> bool:
        return path in self._files or any(p.startswith(path.rstrip("/") + "/") for p in self._files)

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        out = {}
        for path, file in self._files.items():
            a = np.load(file, mmap_mode="r")
            out[path] = (a.shape, a.dtype)
        return out

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        if path not in self._files:
            raise KeyError(f"{path} is not in {self.path}")
        data = np.load(self._files[path], mmap_mode="r")
        return np.array(data[selection] if selection else data)

    def blocks(self) -> list[tuple[str, Selection]]:
        return [(path, ()) for path in self._files]

    def variable(self, path: str) -> xr.DataArray:
        data = self.get(path)
        return xr.DataArray(data, dims=[f"dim_{i}" for i in range(data.ndim)])

    def group_attrs(self, path: str) -> dict[str, Any]:
        return json.loads((self.path / ATTRS_FILE).read_text()) if path in ("", "/") else {}


def open_archive(location: Any, *, template: str, model: Any = None, sleep: Any = None, page_buffer: int | None = None,
                 root: Any = None) -> NpyArchive:
    return NpyArchive(location, template)
