"""The documentation site: it builds with warnings as errors, its Python examples run,
and it covers every command and every registered layout; the README stays a front door."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(tmp_path / "site")], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "ConvertOptions" in api and "Raises" in api  # the reference is built from the docstrings
    assert not re.search(r":(class|func|mod|meth|attr|data|exc):`", api)  # roles shown as code, not raw
    import html

    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", api)))
    from dataclasses import fields

    from layoutkit.layouts.hdf5_paged.options import ReorderOptions
    from layoutkit.zarr_options import ConvertOptions

    for cls in (ConvertOptions, ReorderOptions):  # every field, in the class's documented attributes
        missing = [f.name for f in fields(cls) if f.name not in (cls.__doc__ or "")]
        assert not missing, (cls.__name__, missing)
    assert "-> Archive" in text  # layoutkit.open's return type


@pytest.mark.parametrize("page", [p for p in PAGES if FENCE.search(p.read_text())], ids=lambda p: p.name)
def test_a_page_s_python_examples_run(page: Path, tmp_path: Path) -> None:
    """The page's Python blocks, in order, as one script (later blocks use earlier ones'
    names), in a process of its own from the repository's root."""
    code = "\n".join(FENCE.findall(page.read_text()))
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_every_command_has_a_page() -> None:
    import typer

    from layoutkit.cli import app

    commands = set(typer.main.get_command(app).commands)
    pages = {p.stem for p in (DOCS / "commands").glob("*.md")} | {"recipes"}
    assert commands <= pages, commands - pages


def test_every_registered_layout_has_a_format_page() -> None:
    from layoutkit.layouts import LAYOUTS

    assert {(DOCS / "formats" / f"{name}.md").is_file() for name in LAYOUTS} == {True}


def test_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), link


@pytest.mark.parametrize("page", sorted((DOCS / "commands").glob("*.md")), ids=lambda p: p.stem)
def test_a_command_page_lists_the_options_the_command_has(page: Path) -> None:
    """Each command page's option table is the one the command's own parameters make
    (python -m layoutkit.cli.option_tables docs/commands/*.md writes them again), and every
    option the page names in backticks is one the command (or another command) has."""
    import typer

    from layoutkit.cli import app
    from layoutkit.cli.option_tables import MARK, refresh

    assert MARK.search(page.read_text()), f"{page.name} has no <!-- options: ... --> table"
    assert refresh(page, write=False) == [], f"{page.name}: run python -m layoutkit.cli.option_tables {page}"
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    known = {"--help", "--version", "--quiet", "--timings", "--order", "--json"}
    for name in group.commands:
        command = group.get_command(ctx, name)
        for sub in getattr(command, "commands", {}).values():
            known |= {o for p in sub.params for o in [*p.opts, *p.secondary_opts]}
        known |= {o for p in command.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
    named = set(re.findall(r"`(--[a-z][a-z0-9-]*)", page.read_text()))
    assert named <= known, f"{page.name} names options no command has: {sorted(named - known)}"


def test_help_is_readable_at_80_columns() -> None:
    """Every command's --help fits 80 columns, with real value names (no typer <str>)."""
    import typer

    from layoutkit.cli import app

    commands = list(typer.main.get_command(app).commands)
    for name in commands:
        done = subprocess.run([sys.executable, "-m", "layoutkit", *name.split(), "--help"], capture_output=True,
                              text=True, env={**os.environ, "COLUMNS": "80"}, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert max(map(len, lines)) <= 80, (name, max(lines, key=len))
        assert not re.search(r"<(str|bool|int|path|list\[str\])>", done.stdout), (name, done.stdout)
        assert len(lines) <= 110, (name, len(lines))


def test_the_demo_figures_are_the_demo_s_own_output() -> None:
    """The README's and getting-started's demo table and sentence are what
    scripts/demo_figures.py makes of docs/demo-summary.md (make demo's summary, stored):
    the range the sentence says is the table's."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import demo_figures

    stored = (DOCS / "demo-summary.md").read_text()
    found = demo_figures.rows(stored)
    assert len(found) >= 4, stored
    for page in demo_figures.PAGES:
        match = demo_figures.BLOCK.search(page.read_text())
        assert match, page
        assert match.group(2) == demo_figures.page_block(page, stored), f"{page.name}: run make demo-figures"
    low, high = min(r[4] for r in found), max(r[4] for r in found)
    assert f"{low:.1f}x to {high:.1f}x faster" in demo_figures.block(stored)


def test_every_example_is_listed_and_the_words_are_defined() -> None:
    listed = (DOCS / "examples.md").read_text()
    for script in (ROOT / "examples").glob("*.py"):
        assert f"examples/{script.name}" in listed, script.name
    glossary = (DOCS / "glossary.md").read_text()
    for word in ("shot", "signal", "time base", "template", "variant", "layout", "recipe", "source"):
        assert re.search(rf"^\*\*{word}", glossary, re.M), word
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in ("install.md", "glossary.md", "faq.md", "changelog.md", "netcdf.md", "examples.md"):
        assert page in nav, page
