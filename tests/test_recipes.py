"""Recipes: every shipped recipe writes a faithful variant; command line over recipe over
defaults; every bad recipe is one plain sentence and exit 2; a variant's recorded recipe
reads back as TOML that writes the same layout again."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import pytest
import typer
import zarr
from typer.testing import CliRunner

from layoutkit.cli import app
from layoutkit.convert import ConvertOptions
from layoutkit.equality import compare_zarr
from layoutkit.equality.hdf5 import compare_hdf5
from layoutkit.errors import RecipeError
from layoutkit.layouts import layout_for
from layoutkit.options import parse_chunks, parse_compressor, parse_shards
from layoutkit.recipes import (
    PROVENANCE_ATTR,
    SHIPPED,
    build_options,
    load_recipe,
    parse_recipe,
    read_provenance,
    recipe_keys,
    recipe_of,
    shipped_recipes,
)
from layoutkit.reorder import ReorderOptions, plan_reorder
from layoutkit.verify.equality import compare_variant

runner = CliRunner()


def run(*args: str | Path):
    return runner.invoke(app, ["--quiet", *map(str, args)])


def assert_refused(result, *words: str) -> None:
    """Exit 2, one plain sentence naming ``words``, no traceback."""
    text = result.output
    assert result.exit_code == 2, text
    assert "Traceback" not in text and text.strip().startswith("error:"), text
    assert len(text.strip().splitlines()) <= 4, text  # one sentence, wrapped at most
    flat = " ".join(text.split())
    for w in words:
        assert w in flat, text


def recorded(variant: Path) -> dict:
    return read_provenance(variant)["recipe"]


# -- the shipped recipes ------------------------------------------------------------


def test_the_issue_presets_ship() -> None:
    assert {"cmod-shot", "cmod-signal", "shot-major", "signal-major", "shot-packed", "cloud-netcdf",
            "local-fast"} <= set(shipped_recipes())


@pytest.mark.parametrize(("former", "name"), [
    ("zarr-shot", "shot-major"), ("zarr-signal", "signal-major"), ("zarr-shot-packed", "shot-packed"),
])
def test_a_recipe_s_former_name_still_finds_it(former: str, name: str) -> None:
    assert load_recipe(former).name == name and former in load_recipe(name).aliases


def test_a_recipe_s_former_order_key_is_read_as_its_layout() -> None:
    recipe = parse_recipe('target = "zarr"\norder = "signal"\nshards = "auto"\n')
    assert recipe.values["layout"] == "signal-major"
    assert build_options("convert", recipe, {}).layout == "signal-major"
    with pytest.raises(RecipeError, match="former spelling of 'layout'"):
        parse_recipe('target = "zarr"\norder = "signal"\nlayout = "shot-major"\n')


@pytest.mark.parametrize("name", shipped_recipes())
def test_shipped_recipe_states_every_choice_and_when_to_use_it(name: str) -> None:
    recipe = load_recipe(name)
    assert set(recipe.values) == {k.name for k in recipe_keys(recipe.target)}
    assert len(recipe.description.split()) >= 30  # a paragraph, not a label
    # printing the effective recipe and reading it back gives the same options
    options = build_options(recipe.command, recipe, {})
    again = parse_recipe("\n".join(f"{k} = {json.dumps(v)}" for k, v in recipe_of(options).items()))
    assert build_options(recipe.command, again, {}) == options


@pytest.mark.parametrize("name", shipped_recipes())
def test_shipped_recipe_writes_a_faithful_variant(name: str, shot_file: Path, tmp_path: Path) -> None:
    recipe = load_recipe(name)
    options = build_options(recipe.command, recipe, {})
    dst = tmp_path / ("out.zarr" if recipe.target == "zarr" else "out.h5")
    if "local" not in layout_for(recipe.command, options).destinations:  # an Icechunk repository (virtual)
        dst = f"icechunk:{tmp_path / 'out.icechunk'}"
    result = run(recipe.command, shot_file, dst, "--recipe", name)
    assert result.exit_code == 0, result.output
    assert recorded(dst) == recipe_of(options)
    assert read_provenance(dst)["command"] == recipe.command
    if recipe.target == "zarr":
        assert compare_variant(shot_file, dst) == []  # any Zarr layout, signal-major included
        if str(dst).startswith("icechunk:"):
            return  # read through Icechunk: the comparison above
        root = zarr.open_group(dst, mode="r")
        assert root.metadata.zarr_format == options.zarr_format
        assert (root.attrs.get("layoutkit_layout", {}).get("name") == "signal-major") == (options.layout == "signal-major")
    else:
        _, plan = plan_reorder(shot_file, tmp_path / "unused.h5", options)
        assert plan.dedupe  # the sample has per-signal copies of time bases
        assert compare_hdf5(shot_file, dst, plan.dedupe) == []
        with h5py.File(dst, "r") as f:
            fcpl = f.id.get_create_plist()
            assert fcpl.get_file_space_strategy()[0] == h5py.h5f.FSPACE_STRATEGY_PAGE
            assert fcpl.get_file_space_page_size() == options.page_size == 8 * 1024**2


# -- precedence ---------------------------------------------------------------------


def test_command_line_over_recipe_over_defaults(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('target = "hdf5-paged"\ncompressor = "zstd:5"\nby = "signal"\n')
    options = build_options("reorder", str(path), {"by": "group", "workers": 3})
    assert options.by == "group"  # command line
    assert options.compressor == parse_compressor("zstd:5")  # recipe
    assert options.page_size is None and options.dedupe is True  # defaults
    assert options.workers == 3
    assert build_options("reorder", None, {}) == ReorderOptions()
    assert build_options("convert", "zarr-shot", {"shards": "auto"}).shards == parse_shards("auto")


def test_cli_override_is_recorded(shot_file: Path, tmp_path: Path) -> None:
    dst = tmp_path / "o.h5"
    result = run("reorder", shot_file, dst, "--recipe", "cmod-shot", "--by", "signal", "--page-size", "1MiB",
                 "--no-dedupe")
    assert result.exit_code == 0, result.output
    got = recorded(dst)
    assert (got["by"], got["page_size"], got["dedupe"]) == ("signal", "1MiB", False)
    assert (got["compressor"], got["compress_threshold"]) == ("gzip:4", "8KiB")  # from the recipe
    with h5py.File(dst, "r") as f:
        assert f.id.get_create_plist().get_file_space_page_size() == 1024**2


def _command_defaults(command: str) -> dict:
    """What typer shows as each option's default."""
    from layoutkit.cli.running import FORMER_OPTIONS, NOT_LAYOUT_OPTIONS

    params = typer.main.get_command(app).commands[command].params
    return {p.name: getattr(p.default, "value", p.default) for p in params
            if p.name not in NOT_LAYOUT_OPTIONS and p.name not in FORMER_OPTIONS}


@pytest.mark.parametrize("command, cls", [("convert", ConvertOptions), ("reorder", ReorderOptions)])
def test_help_defaults_are_the_real_defaults(command: str, cls: type) -> None:
    """The defaults --help shows are what an option left out gives."""
    assert build_options(command, None, _command_defaults(command)) == cls()


# -- validation ---------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "text, words",
    [
        pytest.param('target = "zarr"\ncompresor = "zstd"\n', ["unknown key 'compresor'", "compressor", "chunk_size", "shards"],
                     id="unknown-key-lists-valid-keys"),
        pytest.param('target = "zarr"\ncompressor = "zstd:99"\n', ["key 'compressor'", "Expected a zstd compression level", "Got 99"],
                     id="bad-level"),
        pytest.param('target = "zarr"\nchunk_size = "4 lightyears"\n', ["key 'chunk_size'", "Expected a --chunk-size", "Got"],
                     id="bad-size"),
        pytest.param('target = "zarr"\ncompressor = true\n', ["key 'compressor'", "Expected a compressor", "Got True"],
                     id="bool-for-text"),
        pytest.param('target = "zarr"\nconsolidate = "yes"\n', ["key 'consolidate'", "Expected true or false", "Got 'yes'"],
                     id="text-for-bool"),
        pytest.param('target = "zarr"\nchunks = [100, "x"]\n', ["key 'chunks'", "Expected source, auto or a shape"],
                     id="bad-chunk-shape"),
        pytest.param('target = "zarr"\nzarr_format = 4\n', ["key 'zarr_format'", "Expected --zarr-format 2 or 3", "Got 4"],
                     id="bad-format"),
        pytest.param('target = "zarr"\nworkers = 8\n', ["unknown key 'workers'", "command line"], id="machine-resource"),
        pytest.param('compressor = "zstd"\n', ["expected target = \"zarr\" or \"hdf5-paged\"", "Got None"], id="no-target"),
        pytest.param('target = "tiff"\n', ["Got 'tiff'"], id="unknown-target"),
        pytest.param('target = ["zarr"]\n', ["Got ['zarr']"], id="target-not-text"),
        pytest.param('target = "zarr"\ncompressor = \n', ["not valid TOML"], id="not-toml"),
        pytest.param('target = "hdf5-paged"\n', ["is for `layoutkit reorder`", "not `layoutkit convert`"],
                     id="other-command"),
    ],
)
def test_bad_recipe_is_one_sentence_exit_2(text: str, words: list[str], shot_file: Path, tmp_path: Path) -> None:
    path = write(tmp_path, text)
    assert_refused(run("convert", shot_file, tmp_path / "o.zarr", "--recipe", path), *words)
    assert not (tmp_path / "o.zarr").exists()
    if "hdf5-paged" not in text:  # a recipe for the other command is a valid recipe to show
        assert_refused(run("recipes", "show", path), *words[:1])


def test_bad_recipe_for_reorder(shot_file: Path, tmp_path: Path) -> None:
    path = write(tmp_path, 'target = "hdf5-paged"\ntemplate = "/shots/{signal}"\n')
    assert_refused(run("reorder", shot_file, tmp_path / "o.h5", "--recipe", path), "key 'template'", "Expected a --template")
    assert_refused(run("reorder", shot_file, tmp_path / "o.h5", "--recipe", "zarr-shot"), "is for `layoutkit convert`")
    assert_refused(run("reorder", shot_file, tmp_path / "o.h5", "--recipe", "no-such-recipe"),
                   "no shipped recipe", "cmod-shot", "signal-major")
    assert not (tmp_path / "o.h5").exists()


def test_bad_value_on_the_command_line_still_refused(shot_file: Path, tmp_path: Path) -> None:
    assert_refused(run("convert", shot_file, tmp_path / "o.zarr", "--recipe", "zarr-shot", "--shards", "lots"),
                   "Expected --shards none, auto", "Got 'lots'")


def test_recipes_list_and_show() -> None:
    listing = run("recipes")
    assert listing.exit_code == 0, listing.output
    for name in shipped_recipes():
        assert name in listing.output
    assert "convert" in listing.output and "reorder" in listing.output
    shown = run("recipes", "show", "cmod-signal")
    assert shown.exit_code == 0
    assert shown.output == (SHIPPED / "cmod-signal.toml").read_text()


# -- provenance and `recipes from` ---------------------------------------------------


@pytest.mark.parametrize("command, name, extra, suffix", [
    ("convert", "zarr-shot", ["--chunk-size", "1MiB", "--zarr-format", "2"], ".zarr"),
    ("reorder", "cmod-signal", ["--compressor", "shuffle+zstd:5", "--chunks", "auto"], ".h5"),
])
def test_recipes_from_reproduces_the_layout(command: str, name: str, extra: list[str], suffix: str,
                                           shot_file: Path, tmp_path: Path) -> None:
    first = tmp_path / f"first{suffix}"
    assert run(command, shot_file, first, "--recipe", name, *extra).exit_code == 0
    back = run("recipes", "from", first)
    assert back.exit_code == 0, back.output
    toml = tmp_path / "back.toml"
    toml.write_text(back.output)
    second = tmp_path / f"second{suffix}"
    result = run(command, shot_file, second, "--recipe", toml)
    assert result.exit_code == 0, result.output
    assert recorded(second) == recorded(first)
    assert recorded(first) != recipe_of(build_options(command, name, {}))  # the overrides were kept
    if suffix == ".zarr":
        assert json.loads((second / ".zattrs").read_text())[PROVENANCE_ATTR]  # v2 root attributes
        assert compare_zarr(shot_file, second) == []


def test_recipes_from_refuses_a_file_layoutkit_did_not_write(shot_file: Path) -> None:
    assert_refused(run("recipes", "from", shot_file), "no 'layoutkit' root attribute")


def test_provenance_is_the_only_root_attribute_ignored(shot_file: Path, tmp_path: Path) -> None:
    """compare_* skip the provenance attribute at the root and nowhere else, and still catch
    any other attribute added at the root."""
    store = tmp_path / "s.zarr"
    assert run("convert", shot_file, store, "--recipe", "zarr-shot").exit_code == 0
    assert compare_zarr(shot_file, store) == []
    root = zarr.open_group(store, mode="r+", use_consolidated=False)
    root.attrs["extra"] = 1
    root["shots"].attrs[PROVENANCE_ATTR] = "{}"
    found = {(m.path, m.what, m.detail.split()[0]) for m in compare_zarr(shot_file, store)}
    assert found == {("/", "attribute", "'extra'"), ("/shots", "attribute", f"'{PROVENANCE_ATTR}'")}

    h5 = tmp_path / "s.h5"
    assert run("reorder", shot_file, h5, "--recipe", "cmod-shot", "--no-dedupe").exit_code == 0
    assert compare_hdf5(shot_file, h5) == []
    with h5py.File(h5, "r+") as f:
        f.attrs["extra"] = 1
        f["shots"].attrs[PROVENANCE_ATTR] = "{}"
    found = {(m.path, m.what, m.detail.split()[0]) for m in compare_hdf5(shot_file, h5)}
    assert found == {("/", "attribute", "'extra'"), ("/shots", "attribute", f"'{PROVENANCE_ATTR}'")}


def test_provenance_replaces_a_source_one(shot_file: Path, tmp_path: Path) -> None:
    """Reordering a variant again records the new recipe, not the old one."""
    first, second = tmp_path / "a.h5", tmp_path / "b.h5"
    assert run("reorder", shot_file, first, "--recipe", "cmod-shot").exit_code == 0
    assert run("reorder", first, second, "--recipe", "cmod-signal", "--no-dedupe").exit_code == 0
    assert recorded(second)["by"] == "signal"
    with h5py.File(second, "r") as f:
        assert list(f.attrs).count(PROVENANCE_ATTR) == 1


def test_recipe_path_beats_shipped_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("zarr-shot").write_text('target = "zarr"\ncompressor = "gzip:2"\n')
    assert load_recipe("zarr-shot").values == {"compressor": parse_compressor("gzip:2")}
    assert load_recipe("zarr-signal").values["chunks"] == parse_chunks("auto")


def test_recipes_from_a_variant_an_earlier_layoutkit_wrote(shot_file: Path, tmp_path: Path) -> None:
    """A store whose provenance says ``"order": "signal"`` (layoutkit before the layouts
    had one name each) prints a recipe in today's spelling, which writes the same store."""
    dst = tmp_path / "old.zarr"
    assert run("convert", shot_file, dst, "--layout", "signal-major", "--shards", "auto").exit_code == 0
    root = json.loads((dst / "zarr.json").read_text())
    doc = json.loads(root["attributes"]["layoutkit"])
    doc["recipe"].pop("layout")
    doc["recipe"]["order"] = "signal"
    root["attributes"]["layoutkit"] = json.dumps(doc)
    (dst / "zarr.json").write_text(json.dumps(root))
    text = run("recipes", "from", dst).output
    assert 'layout = "signal-major"' in text and "order" not in text.split('"""')[-1]
    again = tmp_path / "again.zarr"
    assert run("convert", shot_file, again, "--recipe", write(tmp_path, text)).exit_code == 0
    assert json.loads((again / "zarr.json").read_text())["attributes"]["layoutkit_layout"]["name"] == "signal-major"


def test_a_plugin_layout_of_convert_adds_a_target_and_takes_none_over() -> None:
    """A third party's layout written by ``convert`` (a new recipe target) leaves convert's
    own recipes and defaults to convert's own target; its recipes are convert's too."""
    from layoutkit.recipes import TARGETS, command_targets

    assert command_targets({"zarr": "convert", "hdf5-paged": "reorder", "npy-folder": "convert"}) == {
        "convert": ("zarr", "npy-folder"), "reorder": ("hdf5-paged",)}
    assert TARGETS["convert"][0] == "zarr" and TARGETS["reorder"] == ("hdf5-paged",)
    assert type(build_options("convert", None, {})).__name__ == "ConvertOptions"
    assert type(build_options("convert", "cloud-netcdf", {})).__name__ == "ConvertOptions"
    with pytest.raises(RecipeError, match="layoutkit reorder"):  # a recipe of the other command, named
        build_options("convert", "cmod-shot", {})
