"""The layouts ``advise`` tries: the shipped recipes, and with ``grid`` the layouts one
step away from each of them (one knob changed: chunk size, shards, compressor, page
size, layout or byte order). Each candidate is a recipe name plus overrides, turned into the very
options ``convert`` or ``reorder`` runs with by :func:`layoutkit.recipes.build_options`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from layoutkit.errors import InvalidOptionError, LayoutkitError
from layoutkit.layouts import layouts_of
from layoutkit.recipes import build_options, load_recipe, recipe_keys, recipe_of, shipped_recipes

CANDIDATE_SETS = ("recipes", "grid")

# one knob at a time around each recipe (issue 12's grid)
ZARR_GRID: dict[str, tuple[str, ...]] = {
    "chunk_size": ("1MiB", "4MiB", "16MiB"),
    "shards": ("none", "auto"),
    "compressor": ("zstd:3", "shuffle+lz4", "gzip:4"),
    "layout": tuple(layout.name for layout in layouts_of("convert") if layout.target == "zarr"),
}
HDF5_GRID: dict[str, tuple[str, ...]] = {
    "page_size": ("4MiB", "8MiB", "16MiB"),
    "compressor": ("gzip:4", "zstd:3", "shuffle+lz4"),
    "by": ("shot", "signal"),
}


@dataclass(frozen=True)
class Candidate:
    """A layout to try: ``recipe`` with ``overrides`` (recipe keys, as typed)."""

    name: str
    recipe: str
    overrides: tuple[tuple[str, str], ...] = ()

    @property
    def command(self) -> str:
        return load_recipe(self.recipe).command

    def options(self, template: str) -> Any:
        """The options dataclass this candidate writes with (the template, where its
        layout takes one)."""
        recipe = load_recipe(self.recipe)
        typed: dict[str, Any] = dict(self.overrides)
        if "template" in {key.name for key in recipe_keys(recipe.target)}:
            typed["template"] = template
        return build_options(recipe.command, recipe, typed)

    def recipe_values(self, template: str) -> dict[str, Any]:
        """The full effective recipe (target and every key)."""
        return recipe_of(self.options(template))


def _grid_around(name: str, values: Mapping[str, Any], grid: Mapping[str, tuple[str, ...]]) -> list[Candidate]:
    out = []
    for key, choices in grid.items():
        for value in choices:
            out.append(Candidate(f"{name}+{key}={value}", name, ((key, value),)))
    return out


LIKELY: dict[str, dict[str, int]] = {
    "shot-packed": {"open": 0, "shot": 0, "signal": 4, "scan": 0},
    "hdf5-paged by shot": {"open": 1, "shot": 1, "signal": 4, "scan": 1},
    "shot-major": {"open": 2, "shot": 2, "signal": 3, "scan": 2},
    "virtual": {"open": 2, "shot": 3, "signal": 3, "scan": 2},
    "signal-major": {"open": 0, "shot": 4, "signal": 0, "scan": 0},
    "hdf5-paged by signal": {"open": 1, "shot": 4, "signal": 1, "scan": 1},
}
"""The cheap model :func:`likeliest_first` orders candidates by: for each layout (and byte
order), how likely it is to read each pattern in the fewest requests, 0 the likeliest, from
what it puts together: a shot's signals in one object (shot-packed) or in adjacent pages
(paged by shot); one signal of every shot in one series (signal-major) or adjacent pages
(paged by signal); an array per signal and shot (shot-major), or the source's own chunks
(virtual). A pattern not listed (random subsets, lines along an axis) favours none: 2."""


def likeliest_first(found: list[Candidate], weights: Mapping[str, float], template: str) -> list[Candidate]:
    """``found`` with the candidates likeliest to win the weighted patterns first
    (:data:`LIKELY`), the others after, in the order they had among equals: the budget is
    spent on the contenders, and on the same ones in every run (a budget that let three
    of eight through tried cmod-signal, cmod-shot and cloud-netcdf for ``signal=1``, and
    the recommendation changed with how many fitted)."""
    total = sum(weights.values()) or 1.0

    def score(c: Candidate) -> float:
        try:
            values = c.recipe_values(template)
        except InvalidOptionError:
            return 2.0
        kind = str(values.get("layout"))
        ranks = LIKELY.get(f"{kind} by {values.get('by')}" if kind == "hdf5-paged" else kind, {})
        return sum(w * ranks.get(p, 2) for p, w in weights.items()) / total

    return [c for _, _, c in sorted((score(c), i, c) for i, c in enumerate(found))]


def _distinct_first(found: list[Candidate], template: str) -> list[Candidate]:
    """One recipe of each layout (and byte order) first, then the others: when the
    budget stops early, every kind of layout has been tried."""
    seen: set[tuple[str, str, str]] = set()
    first: list[Candidate] = []
    rest: list[Candidate] = []
    for c in found:
        values = c.recipe_values(template)
        kind = (c.command, str(values.get("layout")), str(values.get("by")))
        (rest if kind in seen else first).append(c)
        seen.add(kind)
    return first + rest


def candidates(which: str, template: str) -> list[Candidate]:
    """The candidates of ``which``: ``recipes``, ``grid``, or recipe names and files
    separated by commas. Shipped recipes come one of each layout first (see
    :func:`_distinct_first`). Duplicates go: two candidates writing the same effective recipe
    are one (the first name stays).

    Raises
    ------
    InvalidOptionError
        ``which`` is none of those, or names a recipe that does not exist or load.
    """
    if which not in CANDIDATE_SETS:
        names = [n.strip() for n in which.split(",") if n.strip()]
        if not names:
            raise InvalidOptionError(f"Expected --candidates recipes, grid or recipe names. Got {which!r}.")
        try:
            return [Candidate(str(load_recipe(n).name), n) for n in dict.fromkeys(names)]
        except LayoutkitError as exc:
            raise InvalidOptionError(f"Expected --candidates recipes, grid or recipe names: {exc}") from None
    base = _distinct_first([Candidate(name, name) for name in shipped_recipes()], template)
    found = list(base)
    if which == "grid":
        for c in base:
            recipe = load_recipe(c.recipe)
            grid = {"zarr": ZARR_GRID, "hdf5-paged": HDF5_GRID}.get(recipe.target, {})  # a plugin's: none
            found.extend(_grid_around(c.name, recipe.values, grid))
    unique: dict[str, Candidate] = {}
    for c in found:
        try:
            key = repr(sorted(c.recipe_values(template).items()))
        except InvalidOptionError:
            continue  # a combination the layout refuses (e.g. an order without shards)
        unique.setdefault(key, c)
    return list(unique.values())


__all__ = ["CANDIDATE_SETS", "LIKELY", "Candidate", "HDF5_GRID", "ZARR_GRID", "candidates", "likeliest_first"]
