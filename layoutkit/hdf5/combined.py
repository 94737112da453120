"""Several HDF5 sources walked as one archive: the union of their shots.

``convert 'exports/shots-*.h5' out.zarr`` writes one store from many files. The files
are a :class:`~layoutkit.storage.SourceSet`; :func:`walk_sources` walks each once and
combines the walks into one :class:`~layoutkit.hdf5.model.Inventory`, every dataset
recording which member holds it (:attr:`ArrayInfo.member`), so that planning is the
planning of one file and the readers (:func:`~layoutkit.hdf5.raw.open_reader`) read
each dataset from its own file.

The rule (what ``--dry-run`` says, and :func:`describe`):

- a shot (the group the template's ``{shot}`` names) is taken from the first source
  that holds it; a shot in two sources is taken once when both hold the same data (the
  same nodes, attributes and values), and refused by name (the shot, both files, the
  first dataset or group that differs) when not;
- what lies outside the shots (the root and its attributes, ``/shots`` itself, arrays
  beside it) must be the same in every source that has it, or the run is refused by name;
- a set in which no source holds a shot of the template is refused, saying the rule
  tried and what did not match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from layoutkit.errors import DifferentDuplicateError, SourcesDoNotCombineError
from layoutkit.hdf5.concat import RULE as CONCAT_RULE
from layoutkit.hdf5.concat import concatenate
from layoutkit.hdf5.files import Members, open_source
from layoutkit.hdf5.inventory import read_inventory
from layoutkit.hdf5.library_read import read_all
from layoutkit.hdf5.model import ArrayInfo, DatatypeInfo, GroupInfo, Inventory, LinkInfo
from layoutkit.hdf5.values import attrs_difference, equal_values, info_difference
from layoutkit.storage import AnySource, SourceSet
from layoutkit.templates import compile_template, natural_key

RULE = "the union of their shots"

def walk_sources(source: AnySource, workers: int = 1,
                 map_files: Callable[[Callable[[Any], Inventory], Sequence[Any]], list[Inventory]] | None = None,
                 walked: Sequence[Inventory] = ()) -> Inventory:
    """The inventory of a source, or of a set of sources combined (module docstring).

    ``map_files(walk, members)``, when given, walks the files elsewhere: on a dask
    cluster (:func:`layoutkit.schedulers.file_mapper`) the files are the unit of work, each
    worker walks its own, and this process only combines what they found. Otherwise the
    files are walked one after another here (a file with many datasets shared out to
    ``workers`` processes, as one file is): spawning processes per set outside dask was
    tried and left, as a spawned process runs the caller's main module again, which a
    script without a ``__main__`` guard, or one read from stdin, does not survive.
    ``walked``: the inventories of the first members, walked already (not again)."""
    if not isinstance(source, SourceSet):
        return walked[0] if walked else read_inventory(source, workers=workers)
    rest = source.members[len(walked):]
    if map_files is not None and len(rest) > 1:
        return combine(source, [*walked, *map_files(read_inventory, rest)])
    return combine(source, [*walked, *(read_inventory(m, workers=workers) for m in rest)])


def shot_of(template: str) -> Callable[[str], str | None]:
    """A function naming the shot a path lies in under ``template`` (None: outside every shot)."""
    _, prefix = compile_template(template)

    def shot(path: str) -> str | None:
        m = prefix.match(path)
        return m.group("shot") if m else None

    return shot


def combine(sources: SourceSet, inventories: Sequence[Inventory]) -> Inventory:
    """One inventory of ``sources`` from each member's (module docstring).

    Raises
    ------
    SourcesDoNotCombineError
        No member holds a shot of the template.
    DifferentDuplicateError
        A shot, or a node outside the shots, held by two members with different data.
    """
    shot = shot_of(sources.template)
    owner: dict[str, int] = {}
    duplicates: dict[str, list[int]] = {}
    for i, inv in enumerate(inventories):
        for held_shot in {s for p in inv.node_paths() if (s := shot(p)) is not None}:
            if owner.setdefault(held_shot, i) != i:
                duplicates.setdefault(held_shot, []).append(i)
    if not owner:
        if sources.concat_dim or all(inv.is_netcdf4 for inv in inventories):
            return concatenate(sources, inventories, lambda i, info: read_whole(sources.members[i], info))
        raise SourcesDoNotCombineError(
            f"{len(inventories)} sources were given and layoutkit combines shot archives as {RULE} under the template "
            f"{sources.template!r} and netCDF-4 files along their record dimension, but none of them holds a shot of "
            f"it and {next(i.path for i in inventories if not i.is_netcdf4)} is not netCDF-4; pass --template or "
            "--concat-dim, or convert the files one by one."
        )
    groups: dict[str, GroupInfo] = {}
    group_member: dict[str, int] = {}
    arrays: dict[str, ArrayInfo] = {}
    held: dict[str, list[int]] = {}  # a dataset outside the shots -> every member that holds it
    links: dict[str, LinkInfo] = {}
    datatypes: dict[str, DatatypeInfo] = {}
    for i, inv in enumerate(inventories):
        for g in inv.groups:
            s = shot(g.path)
            if s is None and g.path in groups:
                _same_group(groups[g.path], g, inventories[group_member[g.path]].path, inv.path)
            elif s is None or owner[s] == i:
                groups[g.path], group_member[g.path] = replace(g, member=i), i
        for a in inv.arrays:
            s = shot(a.path)
            if s is None:
                held.setdefault(a.path, []).append(i)
            if s is None and a.path in arrays:
                _same_array(arrays[a.path], a, inventories, i)
            elif s is None or owner[s] == i:
                arrays[a.path] = replace(a, member=i)
        for link in inv.links:
            if (s := shot(link.path)) is None or owner[s] == i:
                links.setdefault(link.path, link)
        for t in inv.datatypes:  # a type outside the shots: the first file's (a shot's: its owner's)
            if ((s := shot(t.path)) is None and t.path not in datatypes) or (s is not None and owner[s] == i):
                datatypes[t.path] = replace(t, member=i)
    _same_values(sources, inventories, shot, duplicates, owner, held)
    first = inventories[0]
    return Inventory(
        path=str(sources), userblock_size=first.userblock_size, is_netcdf4=any(i.is_netcdf4 for i in inventories),
        groups=tuple(groups.values()), arrays=tuple(arrays.values()), links=tuple(links.values()),
        attr_notes=tuple(dict.fromkeys(n for inv in inventories for n in inv.attr_notes)),
        datatypes=tuple(datatypes.values()),
    )


def read_whole(source: Any, info: ArrayInfo) -> np.ndarray:
    """All of one dataset of one source (or of a set, its parts joined), as HDF5 reads it."""
    with Members(source) as files:
        return read_all(files if isinstance(source, SourceSet) else (lambda _: files(0)), info)


def _same_group(first: GroupInfo, other: GroupInfo, first_file: str, other_file: str) -> None:
    differs = attrs_difference(first.attrs, other.attrs)
    if differs is not None:
        raise DifferentDuplicateError(
            f"Group {first.path!r} is in {first_file} and in {other_file} with different attributes ({differs} differs); "
            "layoutkit combines sources only when what lies outside their shots is the same in each."
        )


def _same_array(first: ArrayInfo, other: ArrayInfo, inventories: Sequence[Inventory], member: int) -> None:
    differs = info_difference(first, other)
    if differs is not None:
        raise DifferentDuplicateError(
            f"Dataset {first.path!r} is in {inventories[first.member].path} and in {inventories[member].path} "
            f"with a different {differs}; layoutkit combines sources only when what lies outside their shots is "
            "the same in each."
        )


def _same_values(sources: SourceSet, inventories: Sequence[Inventory], shot: Callable[[str], str | None],
                 duplicates: dict[str, list[int]], owner: dict[str, int], held: dict[str, list[int]]) -> None:
    """Refuse a shot held twice with different nodes, attributes or values, and a dataset
    outside the shots whose values differ between members (their metadata was compared
    while combining)."""
    pairs: dict[tuple[int, int], list[tuple[ArrayInfo, ArrayInfo, str | None]]] = {}
    for s, others in sorted(duplicates.items(), key=lambda kv: natural_key(kv[0])):
        first = owner[s]
        mine = _nodes_of(inventories[first], shot, s)
        for other in others:
            theirs = _nodes_of(inventories[other], shot, s)
            what = _shot_difference(mine, theirs)
            if what is not None:
                raise duplicate_shot_error(s, inventories[first].path, inventories[other].path, what)
            for path, info in mine[1].items():
                pairs.setdefault((first, other), []).append((info, theirs[1][path], s))
    for path, members in held.items():
        for other in members[1:]:
            info = inventories[members[0]].array(path)
            pairs.setdefault((members[0], other), []).append((info, inventories[other].array(path), None))
    for (a, b), compared in pairs.items():
        # decided by HDF5's own read: whether two files hold the same data is no place for a fast path
        with open_source(sources.members[a]) as fa, open_source(sources.members[b]) as fb:
            for x, y, in_shot in compared:
                if not bool(np.all(_equal(read_all(lambda _: fa, x), read_all(lambda _: fb, y)))):
                    where = f"dataset {x.path!r} differs"
                    if in_shot is not None:
                        raise duplicate_shot_error(in_shot, inventories[a].path, inventories[b].path, where)
                    raise DifferentDuplicateError(
                        f"Dataset {x.path!r} is in {inventories[a].path} and in {inventories[b].path} with different "
                        "values; layoutkit combines sources only when what lies outside their shots is the same in each."
                    )


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return equal_values(np.asarray(a), np.asarray(b))


def _nodes_of(inv: Inventory, shot: Callable[[str], str | None], s: str) -> tuple[dict[str, GroupInfo], dict[str, ArrayInfo]]:
    return ({g.path: g for g in inv.groups if shot(g.path) == s}, {a.path: a for a in inv.arrays if shot(a.path) == s})


def _shot_difference(mine: tuple[dict[str, GroupInfo], dict[str, ArrayInfo]],
                     theirs: tuple[dict[str, GroupInfo], dict[str, ArrayInfo]]) -> str | None:
    """What differs between two copies of a shot, short of their values: a node one has
    and the other not, a group's attributes, a dataset's metadata."""
    for kind, a, b in (("group", mine[0], theirs[0]), ("dataset", mine[1], theirs[1])):
        for path in sorted(set(a) ^ set(b)):
            return f"{kind} {path!r} is in one only"
    for path, g in mine[0].items():
        if (differs := attrs_difference(g.attrs, theirs[0][path].attrs)) is not None:
            return f"group {path!r}: {differs} differs"
    for path, info in mine[1].items():
        if (differs := info_difference(info, theirs[1][path])) is not None:
            return f"dataset {path!r}: its {differs} differs"
    return None


def duplicate_shot_error(shot: str, first: str, second: str, what: str) -> DifferentDuplicateError:
    """The one refusal of a shot two sources hold with different data (the commands' walk
    and :mod:`layoutkit.readers.combined` both say it so)."""
    return DifferentDuplicateError(
        f"Shot {shot} is in {first} and in {second} with different data ({what}); remove it from one of them."
    )


def describe(sources: SourceSet, inventory: Inventory) -> str:
    """The rule ``--dry-run`` prints: how many sources, combined how, into what."""
    joined = [a for a in inventory.arrays if a.segments is not None]
    if joined:
        dim = joined[0].dims[0]
        unpacked = [a.path for a in joined if a.unpack]
        return (f"{len(sources.members)} sources joined along {dim!r} ({CONCAT_RULE}): {len(joined)} variables joined, "
                f"{len(inventory.arrays) - len(joined)} the same in every file"
                + (f"; stored decoded, as their files encode them differently: {', '.join(unpacked)}" if unpacked else ""))
    shot = shot_of(sources.template)
    shots = {s for a in inventory.arrays if (s := shot(a.path)) is not None}
    return (f"{len(sources.members)} sources combined as {RULE} under {sources.template!r}: {len(shots):,} shots "
            "(a shot in two sources taken once when equal, refused when not; what lies outside the shots must be "
            "the same in every source)")


__all__ = ["RULE", "combine", "describe", "duplicate_shot_error", "shot_of", "walk_sources"]
