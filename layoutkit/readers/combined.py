"""Several shot archives read as one: ``layoutkit.open(["a.h5", "b.h5"])`` or a glob.

The archives users hold are many files (a file per shot, per run day, per campaign).
:class:`CombinedArchive` reads them as one archive, the union of their shots, with the
interface of every other reader, so that the read patterns of ``verify`` measure the
"before" of a combined store, and a combined store can be proved equal to its sources.

- Each shot is read from the source that holds it. A shot in two sources is taken once
  when both hold the same data (compared when the shot list is first asked for), and
  refused by name (the shot, both sources, the first signal that differs) when not.
- Anything outside the shots (the root's attributes, arrays beside ``/shots``) is read
  from the first source that has it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import xarray as xr

from layoutkit.errors import DifferentDuplicateError
from layoutkit.formats import stored_path
from layoutkit.hdf5.combined import duplicate_shot_error
from layoutkit.readers.base import Archive, Selection
from layoutkit.storage.sources import expand_sources, is_source_set
from layoutkit.templates import natural_key


class _Counters:
    """The requests and bytes of every source of a set, summed (what verify reports)."""

    def __init__(self, members: Sequence[Archive]) -> None:
        self._members = members

    @property
    def requests(self) -> int:
        return sum(m.counter.requests for m in self._members)

    @property
    def bytes(self) -> int:
        return sum(m.counter.bytes for m in self._members)

    @property
    def delayed(self) -> float:
        return sum(m.counter.delayed for m in self._members)

    def reset(self) -> None:
        for m in self._members:
            m.counter.reset()


class CombinedArchive(Archive):
    """Several archives (each opened by :func:`~layoutkit.archive.open_archive`) read as
    one: the union of their shots. See the module docstring for the rules."""

    format = "set"
    layout = "set"

    def __init__(self, members: Sequence[Archive], template: str) -> None:
        super().__init__(members[0].path, template)
        self.members = list(members)
        self.counter = _Counters(self.members)  # type: ignore[assignment]
        self._owners: dict[str, Archive] | None = None
        self._outside: dict[str, Archive] = {}  # path outside the shots -> the first source that has it
        self._shots_parent = self.template[: self.template.index("{shot}")].rstrip("/") or "/"

    def __repr__(self) -> str:
        return f"<CombinedArchive of {len(self.members)}: {', '.join(str(m.path) for m in self.members[:3])}...>"

    def close(self) -> None:
        for m in self.members:
            m.close()

    # -- which source holds what -------------------------------------------------

    @property
    def owners(self) -> dict[str, Archive]:
        """Shot -> the source it is read from."""
        if self._owners is None:
            owners: dict[str, Archive] = {}
            for member in self.members:
                for shot in member.children(self._shots_parent):
                    first = owners.setdefault(shot, member)
                    if first is not member:
                        same_shot(shot, first, member)
            self._owners = owners
        return self._owners

    def _owner(self, path: str) -> Archive | None:
        """The source of a path inside a shot; None for a path outside the shots."""
        prefix = self._shots_parent.rstrip("/") + "/"
        if not path.startswith(prefix):
            return None
        shot = path[len(prefix):].split("/", 1)[0]
        return self.owners.get(shot, self.members[0])

    def _holder(self, path: str) -> Archive:
        """The source a path is read from: its shot's, or the first that has it."""
        owner = self._owner(path)
        if owner is not None:
            return owner
        holder = self._outside.get(path)
        if holder is None:
            holder = self._outside[path] = next((m for m in self.members if m.exists(path)), self.members[0])
        return holder

    # -- the Archive interface, routed ---------------------------------------------

    def children(self, group: str) -> list[str]:
        if (group.rstrip("/") or "/") == self._shots_parent:
            return sorted(self.owners, key=natural_key)
        owner = self._owner(group)
        if owner is not None:
            return owner.children(group)
        return sorted({c for m in self.members for c in m.children(group)}, key=natural_key)

    def exists(self, path: str) -> bool:
        owner = self._owner(path)
        return owner.exists(path) if owner is not None else any(m.exists(path) for m in self.members)

    def arrays(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        return {path: info for member in self.members for path, info in member.arrays().items()
                if self._holder(path) is member}

    def get(self, path: str, selection: Selection = ()) -> np.ndarray:
        return self._holder(path).get(path, selection)

    def dimension_only(self, path: str) -> bool:
        return self._holder(path).dimension_only(path)

    def blocks(self) -> list[tuple[str, Selection]]:
        return [(path, selection) for member in self.members for path, selection in member.blocks()
                if self._holder(path) is member]

    def read_block(self, path: str, selection: Selection) -> np.ndarray:
        return self._holder(path).read_block(path, selection)

    def read_blocks(self, units: Iterable[tuple[str, Selection]]) -> Iterator[np.ndarray]:
        for path, selection in units:
            yield from self._holder(path).read_blocks([(path, selection)])

    def variable(self, path: str) -> xr.DataArray:
        return self._holder(path).variable(path)

    def _variables(self, paths: Iterable[str], lazy: bool = False) -> list[xr.DataArray]:
        """Each source's paths read by that source together (its batching kept), in order."""
        paths = list(paths)
        holders = [self._holder(p) for p in paths]
        out: list[xr.DataArray | None] = [None] * len(paths)
        for member in {id(h): h for h in holders}.values():
            mine = [i for i, h in enumerate(holders) if h is member]
            read = member.lazy_variables if lazy else member._variables
            for i, array in zip(mine, read([paths[i] for i in mine])):
                out[i] = array
        return out  # type: ignore[return-value]

    def lazy_variables(self, paths: Iterable[str]) -> list[xr.DataArray]:
        return self._variables(paths, lazy=True)

    def stored_chunks(self, path: str) -> tuple[int, ...] | None:
        return self._holder(path).stored_chunks(path)

    def group_attrs(self, path: str) -> dict[str, Any]:
        return self._holder(path).group_attrs(path)


def _stored(tree: xr.DataTree) -> dict[str, xr.Dataset]:
    """A shot's signals with the names a Zarr store gives them (:func:`~layoutkit.formats.stored_path`)."""
    out = {}
    for name, child in tree.children.items():
        ds = child.to_dataset()
        out[stored_path(name)] = ds.rename({k: stored_path(k) for k in {*map(str, ds.variables), *map(str, ds.dims)}
                                            if "\\" in k})
    return out


def _same_stored(a: xr.DataTree, b: xr.DataTree) -> bool:
    """Whether two reads of a shot are identical once their names with a backslash are
    named as a Zarr store names them (one from a store, one from an HDF5 file)."""
    if not any("\\" in n for n in (*a.children, *b.children)) or not a.to_dataset().identical(b.to_dataset()):
        return False
    mine, theirs = _stored(a), _stored(b)
    return mine.keys() == theirs.keys() and all(mine[n].identical(theirs[n]) for n in mine)


def same_shot(shot: str, first: Archive, second: Archive, first_name: str | None = None) -> None:
    """Refuse, by name, a shot two sources hold with different data (``first_name``: how
    the message names ``first``, by default its path)."""
    a, b = first.shot(shot), second.shot(shot)
    if a.identical(b) or _same_stored(a, b):
        return
    names = sorted(set(a.children) | set(b.children), key=natural_key)
    differs = next((n for n in names if n not in a.children or n not in b.children
                    or not a.children[n].identical(b.children[n])), None)
    what = f"signal {differs!r} differs" if differs else "its attributes differ"
    raise duplicate_shot_error(shot, str(first_name or first.path), str(second.path), what)


__all__ = ["CombinedArchive", "DifferentDuplicateError", "same_shot", "expand_sources", "is_source_set"]
