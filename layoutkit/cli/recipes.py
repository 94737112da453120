"""``layoutkit recipes``: the shipped recipes, one shown, or one read back from a variant."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from layoutkit.cli.core import app, fail, out
from layoutkit.cli.running import STORAGE_HELP
from layoutkit.errors import LayoutkitError

recipes_app = typer.Typer(
    help="Named layouts for convert and reorder: list them, show one, or read one back from a variant.",
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(recipes_app, name="recipes")


@recipes_app.callback(invoke_without_command=True)
def recipes(ctx: typer.Context) -> None:
    """List the shipped recipes and when to use each (`recipes show NAME` prints one)."""
    if ctx.invoked_subcommand is not None:
        return
    from layoutkit.recipes import load_recipe, shipped_recipes

    table = Table(title="layoutkit recipes: convert/reorder SRC DST --recipe NAME", show_lines=True)
    for col in ("recipe", "command", "when to use it"):
        table.add_column(col, overflow="fold")
    for name in shipped_recipes():
        recipe = load_recipe(name)
        table.add_row(name, recipe.command, recipe.description)
    out.print(table)


@recipes_app.command("show")
def recipes_show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="A shipped recipe's name, or a recipe file.")],
) -> None:
    """Check a recipe and print its TOML."""
    from layoutkit.recipes import find_recipe, parse_recipe

    try:
        found, text = find_recipe(name)
        parse_recipe(text, name=found, source=name)
    except LayoutkitError as exc:
        raise fail(exc) from None
    typer.echo(text, nl=not text.endswith("\n"))


@recipes_app.command("from")
def recipes_from(
    variant: Annotated[str, typer.Argument(metavar="VARIANT", help="A Zarr store or HDF5 file layoutkit wrote: a path, or s3://bucket/key.")],
    storage_option: Annotated[list[str] | None, typer.Option("--storage-option", help=STORAGE_HELP)] = None,
) -> None:
    """Print the recipe a variant was written with, as TOML that --recipe takes."""
    from layoutkit.recipes import recipe_toml
    from layoutkit.storage import parse_storage_options

    try:
        text = recipe_toml(variant, parse_storage_options(storage_option))
    except LayoutkitError as exc:
        raise fail(exc) from None
    typer.echo(text, nl=False)


__all__ = ['recipes', 'recipes_app', 'recipes_from', 'recipes_show']
