"""The scripts the README runs (``scripts/``) and the benchmarks import what exists: a
module moved inside layoutkit (the S3 servers into ``layoutkit.testing``) must not
leave ``make demo`` or a benchmark importing its old place. Read with ``ast``; the
layoutkit modules named are imported and asked for each name."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted([*ROOT.glob("scripts/*.py"), *ROOT.glob("benchmarks/*.py"), *ROOT.glob("examples/*.py")])
_PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# every distribution the project declares, in any group (a benchmark's extra need not be installed here)
DECLARED = {re.split(r"[<>=\[; ]", d, maxsplit=1)[0].lower().replace("-", "_")
            for d in [*_PROJECT["dependencies"], *(x for group in _PROJECT["optional-dependencies"].values() for x in group)]}
BY_HAND = {"pyfive"}  # benchmarks/pyfive_walk.py: a comparison run by hand, after pip install pyfive


def _known(top: str, siblings: set[str]) -> bool:
    return top in siblings or top in DECLARED or top in BY_HAND or importlib.util.find_spec(top) is not None


def test_there_are_scripts_to_check() -> None:
    assert ROOT / "scripts" / "demo_bucket.py" in FILES and len(FILES) > 10


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_import_resolves(path: Path) -> None:
    siblings = {p.stem for p in path.parent.glob("*.py")} | {p.name for p in path.parent.iterdir() if p.is_dir()}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            top = node.module.split(".")[0]
            if top == "layoutkit":
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name) or importlib.util.find_spec(f"{node.module}.{alias.name}"), \
                        f"{path.name}: {node.module} has no {alias.name}"
            else:
                assert _known(top, siblings), f"{path.name}: no module {top!r} (beside it, installed or declared)"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                assert _known(top, siblings), f"{path.name}: no module {top!r} (beside it, installed or declared)"
