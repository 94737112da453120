"""xarray's ``engine="layoutkit"``: every layout layoutkit writes, and the sources, opened
as users of xarray open anything else.

    xr.open_datatree("archive.zarr", engine="layoutkit")
    xr.open_dataset("by-signal.h5", engine="layoutkit", group="1160930002/ip")
    xr.open_datatree("s3://bucket/archive.zarr", engine="layoutkit",
                     backend_kwargs={"storage_options": {"endpoint_url": ...}})

The file or store is opened with :func:`layoutkit.open`, so every layout reads the same
tree whatever its bytes' order. A shot archive is a tree of shots, each a group of
signals, each signal a one-variable dataset with its time bases as coordinates (what
``archive.shot(shot)`` gives); any other file is its groups and arrays, at their paths.
The values are read when asked for (``.values``, ``.load()``, a selection: only that
selection is read); the coordinates are read at opening, as xarray reads index
coordinates. On shot-packed Zarr a shot's arrays are bytes in one packed row, whose
types are known only by reading it, so opening reads them too.

Registered as the ``xarray.backends`` entry point ``layoutkit``; nothing is guessed from
a file's name (``guess_can_open`` is False): the engine is named.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import xarray as xr
from xarray.backends import BackendEntrypoint

from layoutkit.plan import DEFAULT_TEMPLATE


class LayoutkitBackend(BackendEntrypoint):
    """xarray's backend for layoutkit's layouts (module docstring)."""

    description = "Open any layout layoutkit writes (Zarr, paged HDF5, Icechunk) and its HDF5 sources"
    url = "https://github.com/layoutkit/layoutkit/blob/main/docs/reading.md"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group", "template", "storage_options")

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        return False

    def open_dataset(self, filename_or_obj: Any, *, drop_variables: str | Iterable[str] | None = None,
                     group: str | None = None, template: str = DEFAULT_TEMPLATE,
                     storage_options: dict[str, str] | None = None) -> xr.Dataset:
        """One group of the tree (the root when ``group`` is None) as a Dataset."""
        tree = self.open_datatree(filename_or_obj, drop_variables=drop_variables, template=template,
                                  storage_options=storage_options)
        path = (group or "/").strip("/")
        try:
            node = tree[path] if path else tree
        except KeyError:
            tree.close()
            raise KeyError(f"no group {group!r} in {filename_or_obj}; its top groups start "
                           f"{sorted(tree.children)[:5]}") from None
        ds = node.to_dataset()
        ds.set_close(tree.close)
        return ds

    def open_datatree(self, filename_or_obj: Any, *, drop_variables: str | Iterable[str] | None = None,
                      template: str = DEFAULT_TEMPLATE, storage_options: dict[str, str] | None = None,
                      **kwargs: Any) -> xr.DataTree:
        import layoutkit

        where = os.fspath(filename_or_obj) if isinstance(filename_or_obj, os.PathLike) else filename_or_obj
        archive = layoutkit.open(where, template=template, storage_options=storage_options)
        dropped = {drop_variables} if isinstance(drop_variables, str) else set(drop_variables or ())
        try:
            nodes = _shot_nodes(archive, dropped) if archive.shots else _array_nodes(archive, dropped)
        except BaseException:
            archive.close()
            raise
        tree = xr.DataTree.from_dict(nodes)
        tree.set_close(archive.close)
        return tree

    def open_groups_as_dict(self, filename_or_obj: Any, **kwargs: Any) -> dict[str, xr.Dataset]:
        tree = self.open_datatree(filename_or_obj, **kwargs)
        return {node.path: node.to_dataset() for node in tree.subtree}


def _shot_nodes(archive: Any, dropped: set[str]) -> dict[str, xr.Dataset]:
    nodes = {"/": xr.Dataset(attrs=archive.group_attrs("/"))}
    by_shot: dict[str, list[tuple[str, str]]] = {}
    for shot, signal, path in archive._expand({}):
        by_shot.setdefault(shot, [])
        if signal not in dropped:
            by_shot[shot].append((signal, path))
    for shot, found in by_shot.items():  # a shot's signals together: each time base read once
        nodes[f"/{shot}"] = xr.Dataset(attrs=archive.group_attrs(archive.shot_path(shot)))
        for (signal, _), array in zip(found, archive.lazy_variables([path for _, path in found])):
            nodes[f"/{shot}/{signal}"] = array.rename(signal).to_dataset()
    return nodes


def _array_nodes(archive: Any, dropped: set[str]) -> dict[str, xr.Dataset]:
    groups: dict[str, dict[str, xr.DataArray]] = {"/": {}}
    wanted = []
    for path in sorted(archive.arrays()):
        group, _, name = path.rpartition("/")
        groups.setdefault(group or "/", {})
        if name not in dropped and not archive.dimension_only(path):
            wanted.append(path)
    for path, array in zip(wanted, archive.lazy_variables(wanted)):  # each scale read once
        group, _, name = path.rpartition("/")
        groups[group or "/"][name] = array.rename(name)
    nodes = {}
    for group, arrays in groups.items():
        named = {d for a in arrays.values() for d in a.dims}
        for name, a in arrays.items():  # a dimension scale is its dimension's coordinate
            if a.ndim == 1 and a.dims[0] != name and name in named and a.dims[0].startswith("dim_"):
                arrays[name] = a.rename({a.dims[0]: name})
        ds = xr.Dataset(arrays)
        ds.attrs = archive.group_attrs(group)
        nodes[group] = ds
    for group in list(nodes):  # the groups between, with their attributes
        parts = group.strip("/").split("/")
        for i in range(1, len(parts)):
            parent = "/" + "/".join(parts[:i])
            nodes.setdefault(parent, xr.Dataset(attrs=archive.group_attrs(parent)))
    return nodes


__all__ = ["LayoutkitBackend"]
