"""Recipes: named layouts, one TOML file each, for ``convert`` and ``reorder``.

A recipe states its target (``zarr`` for ``convert``, ``hdf5-paged`` for ``reorder``), its
``layout`` (a registered layout's name: ``shot-major``, ``signal-major``...), a
description of when to use it, and the layout choices the command takes, under the
names of the command's options (``--chunk-size`` is ``chunk_size``). ``aliases`` lists
former names of a shipped recipe, still found; a recipe's former key ``order`` is read
as ``layout``. :func:`load_recipe`
checks every key with the same ``parse_*`` functions the command line uses, and
:func:`build_options` turns a recipe plus the options typed on the command line into
the very dataclass the command runs with: command line over recipe over defaults.

Every variant records its effective recipe as one root attribute, :data:`PROVENANCE_ATTR`,
which the pipeline stamps (:mod:`layoutkit.pipeline`); :func:`read_provenance` reads it
back, and :func:`recipe_toml` prints it as a recipe that writes the same layout. This
module reads, validates and writes TOML only: the keys and options dataclasses are the
layouts' own, found through the registry (:mod:`layoutkit.layouts`).
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

from layoutkit.errors import InvalidOptionError, RecipeError, RecipeNotFoundError
from layoutkit.layouts import find_layout, layout_for, layout_key, targets
from layoutkit.options import RecipeKey, parse_batch_files, parse_workers, size_parser
from layoutkit.pipeline import PROVENANCE_ATTR, provenance_attrs
from layoutkit.pipeline import recipe_of as layout_recipe_of
from layoutkit.schedulers import parse_scheduler

COMMANDS = {target: layout.command for target, layout in targets().items()}  # target -> the command that writes it


def command_targets(commands: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Command -> the recipe targets it writes, in the registry's order (the built-in
    target first): a plugin's layout written by ``convert`` adds a target to convert's,
    and takes none of convert's recipes over."""
    out: dict[str, tuple[str, ...]] = {}
    for target, command in commands.items():
        out[command] = (*out.get(command, ()), target)
    return out


TARGETS = command_targets(COMMANDS)
META_KEYS = ("target", "description", "aliases")
FORMER_KEYS = {"order": "layout"}  # keys recipes and provenance used to spell otherwise
SHIPPED = resources.files("layoutkit") / "recipes_data"

# Machine resources, not layout: the command line sets them, recipes do not.
RUNTIME: dict[str, Callable[[Any], Any]] = {
    "workers": parse_workers,
    "memory_limit": size_parser("memory limit"),
    "batch_files": parse_batch_files,
    "scheduler": parse_scheduler,
    "overwrite": bool,
    "skip_unsupported": bool,
}


def _options_class(target: str) -> type:
    return targets()[target].options_class


def recipe_keys(target: str) -> tuple[RecipeKey, ...]:
    """The layout keys a recipe for ``target`` may set (``zarr`` or ``hdf5-paged``): which
    layout, then the layouts' own keys."""
    return (layout_key(target), *targets()[target].recipe_keys)


# -- recipes --------------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    """A validated recipe: ``values`` holds the parsed value of every key the file sets."""

    name: str
    target: str
    description: str
    values: Mapping[str, Any]
    source: str
    aliases: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        return COMMANDS[self.target]


_SCANNED: dict[tuple[str, ...], tuple[dict[str, Any], dict[str, str]]] = {}
"""The shipped recipe files and their former names, by the folders they were read from
(a layout registered later adds a folder, and so a new scan)."""


def _scanned() -> tuple[dict[str, Any], dict[str, str]]:
    """Every shipped recipe file by name (layoutkit's, then those each registered layout
    ships, :attr:`~layoutkit.layout.Layout.recipes`: a plugin's own; none taking over
    another's name), and each former name's recipe: the folders listed and the files
    parsed once, not at every lookup (advise looks a recipe up several times a candidate)."""
    from layoutkit.layouts import LAYOUTS

    folders = (SHIPPED, *(layout.recipes for layout in LAYOUTS.values() if layout.recipes is not None))
    key = tuple(map(str, folders))
    if key not in _SCANNED:
        found: dict[str, Any] = {}
        for folder in folders:
            for p in sorted(folder.iterdir(), key=lambda p: p.name):
                if p.name.endswith(".toml"):
                    found.setdefault(p.name[: -len(".toml")], p)
        aliases: dict[str, str] = {}
        for name, path in found.items():
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
            aliases.update(dict.fromkeys(doc.get("aliases", []), name))
        _SCANNED[key] = (found, aliases)
    return _SCANNED[key]


def _shipped() -> dict[str, Any]:
    """Every shipped recipe file by name (:func:`_scanned`)."""
    return _scanned()[0]


def shipped_recipes() -> list[str]:
    """Names of the recipes that ship with layoutkit and its registered layouts, sorted."""
    return sorted(_shipped())


def _shipped_aliases() -> dict[str, str]:
    """A shipped recipe's former name -> its name (each recipe's ``aliases``)."""
    return _scanned()[1]


def find_recipe(name_or_path: str | os.PathLike) -> tuple[str, str]:
    """Return ``(name, TOML text)`` of a recipe file path, or else of a shipped recipe.

    Raises
    ------
    RecipeNotFoundError
        Neither a file nor a shipped recipe; the message lists the shipped names.
    """
    path = Path(name_or_path)
    if path.is_file():
        return path.stem, path.read_text(encoding="utf-8")
    name = _shipped_aliases().get(str(name_or_path), str(name_or_path))
    shipped = _shipped().get(name) if "/" not in name else None
    if shipped is not None and shipped.is_file():
        return name, shipped.read_text(encoding="utf-8")
    raise RecipeNotFoundError(
        f"No recipe file {str(name_or_path)!r} and no shipped recipe of that name; "
        f"shipped recipes: {', '.join(shipped_recipes())}."
    )


def load_recipe(name_or_path: str | os.PathLike) -> Recipe:
    """Find, read and validate a recipe (see :func:`parse_recipe`)."""
    name, text = find_recipe(name_or_path)
    return parse_recipe(text, name=name, source=str(name_or_path))


def parse_recipe(text: str, name: str = "recipe", source: str = "") -> Recipe:
    """Validate recipe TOML with the command line's parsers.

    Raises
    ------
    RecipeError
        Not TOML; no or an unknown target; an unknown key (the message lists the valid
        ones); a bad value (what was expected and what came).
    """
    label = f"Recipe {source or name!r}"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{label} is not valid TOML: {exc}.") from None
    for former, key in FORMER_KEYS.items():
        if former in doc:
            if key in doc:
                raise RecipeError(f"{label}: {former!r} is the former spelling of {key!r}; give one of them.")
            doc[key] = doc.pop(former)
    target = doc.get("target")
    if not isinstance(target, str) or target not in COMMANDS:
        raise RecipeError(f"{label}: expected target = \"zarr\" or \"hdf5-paged\". Got {target!r}.")
    keys = {k.name: k for k in recipe_keys(target)}
    unknown = [k for k in doc if k not in keys and k not in META_KEYS]
    if unknown:
        hint = " (a machine resource: pass it on the command line)" if unknown[0] in RUNTIME else ""
        raise RecipeError(
            f"{label}: unknown key {unknown[0]!r}{hint}; valid keys for target {target!r}: "
            f"{', '.join((*META_KEYS, *keys))}."
        )
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise RecipeError(f"{label}: expected description to be text. Got {description!r}.")
    aliases = doc.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise RecipeError(f"{label}: expected aliases to be a list of names. Got {aliases!r}.")
    values = {}
    for key, raw in doc.items():
        if key in keys:
            try:
                values[key] = keys[key].value(raw)
            except InvalidOptionError as exc:
                raise RecipeError(f"{label}, key {key!r}: {exc}") from None
    return Recipe(name, target, " ".join(description.split()), values, source or name, tuple(aliases))


def build_options(command: str, recipe: Recipe | str | os.PathLike | None, typed: Mapping[str, Any]) -> Any:
    """Build the options of ``convert`` or ``reorder``: command line over recipe over defaults.

    Parameters
    ----------
    command
        ``"convert"`` or ``"reorder"``.
    recipe
        A :class:`Recipe`, a recipe name or path, or None.
    typed
        The options given on the command line, by recipe key name (``chunk_size``,
        ``workers``...), as typed: text, numbers, booleans.

    Returns
    -------
    ConvertOptions or ReorderOptions

    Raises
    ------
    RecipeError
        The recipe is invalid or is for the other command.
    InvalidOptionError
        A value typed on the command line is invalid.
    """
    if recipe is not None and not isinstance(recipe, Recipe):
        recipe = load_recipe(recipe)
    target = recipe.target if recipe is not None and recipe.target in TARGETS[command] else TARGETS[command][0]
    chosen = find_layout(str(typed["layout"]).strip()) if recipe is None and "layout" in typed else None
    if chosen is not None and chosen.command == command:  # a layout of its own target (another package's)
        target = chosen.target
    if recipe is not None and recipe.target != target:
        other = COMMANDS[recipe.target]
        raise RecipeError(
            f"Recipe {recipe.source!r} is for `layoutkit {other}` (target {recipe.target!r}), "
            f"not `layoutkit {command}`; run `layoutkit {other} --recipe {recipe.source}`."
        )
    keys = {k.name: k for k in recipe_keys(target)}
    have = {f.name for f in fields(_options_class(target))}
    unknown = sorted(set(typed) - set(keys) - set(RUNTIME))
    if unknown:
        takes = [f"--{k.replace('_', '-')}" for k in (*keys, *(k for k in RUNTIME if k in have))]
        raise InvalidOptionError(f"--{unknown[0].replace('_', '-')} is not an option of the {target} target "
                                 f"(it takes {', '.join(takes)}).")
    kwargs: dict[str, Any] = {}
    for name, key in keys.items():
        if name in typed:
            value = key.value(typed[name])
        elif recipe is not None and name in recipe.values:
            value = recipe.values[name]
        else:
            continue
        if key.field in have:  # a target of one layout has no field to choose it
            kwargs[key.field] = value
    for name, parse in RUNTIME.items():
        if name in typed and name in have:
            kwargs[name] = parse(typed[name])
    return _options_class(target)(**kwargs)


def _layout_of(options: Any) -> Any:
    """The layout an options dataclass writes (of several of one target, the one it names)."""
    target = next(t for t, layout in targets().items() if isinstance(options, layout.options_class))
    return layout_for(COMMANDS[target], options)


def recipe_of(options: Any) -> dict[str, Any]:
    """The full effective recipe of an options dataclass: target and every layout key."""
    return layout_recipe_of(_layout_of(options), options)


def provenance(options: Any) -> str:
    """The JSON value of the :data:`PROVENANCE_ATTR` root attribute of a variant written
    with ``options`` (the pipeline stamps it; :mod:`layoutkit.pipeline`)."""
    return provenance_attrs(_layout_of(options), options)[PROVENANCE_ATTR]


# -- reading a variant's recipe back ----------------------------------------------


def _url_provenance(url: str, storage_options: dict[str, str]) -> Any:
    """The provenance attribute of a variant in a bucket: from the store's root document,
    or the HDF5 file's root attributes read through ranged GETs."""
    import obstore

    from layoutkit.archive import zarr_format_at
    from layoutkit.hdf5.files import open_source
    from layoutkit.storage import ObjectSource, store_at

    if url.startswith("icechunk:"):
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.sync import sync

        from layoutkit.storage.icechunk_repo import readonly_store

        buf = sync(readonly_store(url, storage_options).get("zarr.json", default_buffer_prototype()))
        return json.loads(buf.to_bytes()).get("attributes", {}).get(PROVENANCE_ATTR) if buf is not None else None
    store = store_at(url, storage_options)
    fmt = zarr_format_at(store)
    if fmt is not None:
        from layoutkit.storage.retry import retrying

        doc = json.loads(retrying(lambda: bytes(obstore.get(store, "zarr.json" if fmt == 3 else ".zattrs").bytes())))
        return (doc.get("attributes", {}) if fmt == 3 else doc).get(PROVENANCE_ATTR)
    with open_source(ObjectSource(url, tuple(sorted(storage_options.items())))) as f:
        return f.attrs.get(PROVENANCE_ATTR)


def read_provenance(variant: str | os.PathLike, storage_options: dict[str, str] | None = None) -> dict[str, Any]:
    """The provenance document of a variant (a Zarr store or an HDF5 file, local or in a
    bucket).

    Raises
    ------
    RecipeError
        The variant carries no layoutkit provenance attribute.
    """
    from layoutkit.storage import is_url
    from layoutkit.storage.icechunk_repo import named

    variant = named(variant, storage_options)  # an Icechunk repository named without icechunk:
    path = Path(variant)
    text = None
    if is_url(str(variant)):
        text = _url_provenance(str(variant), storage_options or {})
    elif path.is_dir():
        for doc_name, get in (("zarr.json", lambda d: d.get("attributes", {})), (".zattrs", lambda d: d)):
            if (path / doc_name).is_file():
                text = get(json.loads((path / doc_name).read_text())).get(PROVENANCE_ATTR)
                break
    else:
        from layoutkit.hdf5.files import open_source

        with open_source(path) as f:
            text = f.attrs.get(PROVENANCE_ATTR)
    if isinstance(text, bytes):
        text = text.decode()
    try:
        doc = json.loads(text) if isinstance(text, str) else None
    except json.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("recipe"), dict):
        raise RecipeError(
            f"{str(variant)!r} has no {PROVENANCE_ATTR!r} root attribute with a recipe: it was not "
            "written by layoutkit convert or reorder."
        )
    return doc


def recipe_toml(variant: str | os.PathLike, storage_options: dict[str, str] | None = None) -> str:
    """A variant's recorded recipe as TOML that ``--recipe`` takes to write the same layout."""
    return _recipe_text(read_provenance(variant, storage_options), str(variant))


def recipe_from_provenance(doc: dict[str, Any], variant: str) -> Recipe:
    """The recipe a variant's provenance document records (what an append writes with)."""
    name = variant.rstrip("/").rsplit("/", 1)[-1]
    return parse_recipe(_recipe_text(doc, variant), name=name)


def _recipe_text(doc: dict[str, Any], variant: str) -> str:
    import tomli_w

    recipe = dict(doc["recipe"])
    for former, key in FORMER_KEYS.items():  # written by an earlier layoutkit: today's spelling
        if former in recipe:
            recipe.setdefault(key, recipe.pop(former))
    target = recipe.pop("target", None)
    if target in COMMANDS and "layout" in recipe:
        recipe["layout"] = layout_key(target).value(recipe["layout"])
    name = variant.rstrip("/").rsplit("/", 1)[-1]
    recipe = {
        "target": target,
        "description": (
            f"The layout of {name}, as recorded by layoutkit {doc.get('version', '?')} "
            f"`{doc.get('command', '?')}` in its {PROVENANCE_ATTR!r} root attribute."
        ),
        **({"layout": recipe.pop("layout")} if "layout" in recipe else {}),
        **recipe,
    }
    parse_recipe(tomli_w.dumps(recipe), name=name)  # what we print must load
    return tomli_w.dumps(recipe)


__all__ = [
    "PROVENANCE_ATTR",
    "Recipe",
    "build_options",
    "load_recipe",
    "parse_recipe",
    "provenance",
    "read_provenance",
    "recipe_from_provenance",
    "recipe_of",
    "recipe_toml",
    "shipped_recipes",
]
