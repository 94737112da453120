"""What each layout keeps outside its package: the top-level functions and classes
outside ``layoutkit/layouts/`` that only one layout's package uses (tests aside), and
their lines. docs/architecture.md quotes it (issue 63).

    python scripts/layout_footprint.py [ROOT]
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path


def main(root: Path) -> None:
    pkg = root / "layoutkit"
    modules = {p: p.read_text() for p in pkg.rglob("*.py")}
    layout_of = {p: p.relative_to(pkg / "layouts").parts[0] for p in modules
                 if p.is_relative_to(pkg / "layouts") and p.parent != pkg / "layouts"}
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for path, text in modules.items():
        if path in layout_of or path.is_relative_to(pkg / "layouts"):
            continue
        for node in ast.parse(text).body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or node.name.startswith("__"):
                continue
            word = re.compile(rf"\b{re.escape(node.name)}\b")
            users = {p for p, t in modules.items() if p != path and word.search(t)}
            if users and (not word.search(text.replace(ast.get_source_segment(text, node) or "", ""))):
                packages = {layout_of.get(p) for p in users}
                if len(packages) == 1 and None not in packages:
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    found[packages.pop() or ""].append((f"{path.relative_to(root)}:{node.name}", lines))
    layouts = sorted({*layout_of.values()})
    print("| layout | lines outside its package used by it alone | where |")
    print("|---|---:|---|")
    for name in layouts:
        items = sorted(found.get(name, []), key=lambda x: -x[1])
        where = ", ".join(f"`{w}` ({n})" for w, n in items) or "-"
        print(f"| {name} | {sum(n for _, n in items)} | {where} |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
