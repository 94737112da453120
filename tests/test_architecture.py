"""The package's import structure, read with ``ast`` (no module is imported): the seams
between layouts, pipeline, recipes and verify stay seams."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "layoutkit"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """Every import of a layoutkit module in ``path`` (lazy ones inside functions
    included, those under ``if TYPE_CHECKING:`` not): (module, names imported from it)."""
    name = module_name(path)
    found = []
    tree = ast.parse(path.read_text(), str(path))
    # ``if TYPE_CHECKING:`` imports name types for annotations and never run: not edges
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and getattr(block.test, "id", None) == "TYPE_CHECKING" for stmt in block.body for n in ast.walk(stmt)}
    for node in (n for n in ast.walk(tree) if id(n) not in typing_only):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (path.name == "__init__.py")]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
    return [(t, names) for t, names in found if t.split(".")[0] == "layoutkit"]


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
# the package's face (__init__) re-exports the API; importing __version__ from it is not an edge
EDGES = {
    name: {t for t, _ in imports(path) if t in MODULES and t not in (name, "layoutkit")}
    for name, path in MODULES.items()
}


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_the_graph_is_read() -> None:
    """The checks below mean something: the walk finds the modules and their imports,
    lazy ones included, and the closure follows them and the packages they run."""
    assert {"layoutkit.pipeline", "layoutkit.layouts", "layoutkit.layouts.shot_major.plan",
            "layoutkit.verify.equality", "layoutkit.cli"} <= set(MODULES)
    assert "layoutkit.zarr_plan" in EDGES["layoutkit.layouts.shot_major.plan"]
    assert "layoutkit.writers.zarr_convert" in EDGES["layoutkit.layouts.shot_major.write"]
    assert "layoutkit.layouts.signal_major.plan" in EDGES["layoutkit.layouts.signal_major.write"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert "layoutkit.writers.zarr_" in closure("layoutkit.layouts.signal_major.write")
    assert "layoutkit.layouts" in closure("layoutkit.layouts.signal_major.spec")  # the package runs first


def test_no_import_cycles() -> None:
    assert find_cycle(EDGES) is None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_names_of_another_module(name: str) -> None:
    private = [
        f"{target}.{n}" for target, names in imports(MODULES[name]) if target != name
        for n in names if n.startswith("_") and not n.startswith("__")
    ]
    assert private == []


def unit_of_privates(module: str) -> str:
    """What shares private names: a module, or a layout's package (its reader, planner,
    writer and comparator are one unit)."""
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[1:2] == ["layouts"] and len(parts) > 3 else module


def private_names(tree: ast.Module) -> set[str]:
    """The ``_names`` a module defines: functions, classes, and what it assigns (attributes too)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in n.targets if isinstance(n, ast.Assign) else [n.target]:
                out |= {e.id if isinstance(e, ast.Name) else e.attr for e in ast.walk(target)
                        if isinstance(e, (ast.Name, ast.Attribute))}
    return {d for d in out if d.startswith("_") and not d.startswith("__")}


def private_reaches(trees: dict[str, ast.Module], allowed: dict[tuple[str, str], str]) -> list[str]:
    """Each ``obj._name`` (``obj`` not ``self``, ``cls`` or ``super()``) whose name the
    module's unit does not define (:func:`unit_of_privates`), unless ``allowed`` says why
    (a library's private that it offers no public way to): ``module:line obj._name``."""
    own: dict[str, set[str]] = {}
    for m, tree in trees.items():
        own.setdefault(unit_of_privates(m), set()).update(private_names(tree))
    found = []
    for m, tree in sorted(trees.items()):
        for n in ast.walk(tree):
            if not (isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__")):
                continue
            if isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
                continue
            if isinstance(n.value, ast.Call) and getattr(n.value.func, "id", None) == "super":
                continue
            if n.attr not in own[unit_of_privates(m)] and (m, n.attr) not in allowed:
                found.append(f"{m}:{n.lineno} {ast.unparse(n)}")
    return found


# a library's private names layoutkit uses, each for want of a public way
LIBRARY_PRIVATES = {
    ("layoutkit", "_exit"): "os._exit: ends the process at once on Ctrl-C while the command starts",
    ("layoutkit.__main__", "_exit"): "os._exit, as above",
    ("layoutkit.readers.base", "_set_node_data"): "xarray's DataTree node set without the constructor's copy "
                                                  "(tests/test_archive.py compares it with the constructor)",
    ("layoutkit.storage.counting", "_store"): "zarr's WrapperStore: the store it wraps (no public attribute)",
    ("layoutkit.xarray_engine", "_close"): "xarray's Dataset: the closer handed on to the tree (set_close has no getter)",
    ("layoutkit.xarray_engine", "_data"): "xarray's Variable: its lazily indexed array, not loaded",
}


def test_no_module_reaches_another_modules_private_names() -> None:
    """Private means private to a module (a layout: to its package); a reader's hooks
    the proof or another module calls are public. Checked on a sample first, so the
    check can fail."""
    sample = {"layoutkit.a": ast.parse("class A:\n    def _hook(self): pass\n"),
              "layoutkit.b": ast.parse("def f(a):\n    return a._hook(), a._mine\n_mine = 1\n"),
              "layoutkit.layouts.x.read": ast.parse("class R:\n    def _rows(self): pass\n"),
              "layoutkit.layouts.x.compare": ast.parse("def f(r):\n    return r._rows()\n")}
    assert private_reaches(sample, {}) == ["layoutkit.b:2 a._hook"]
    assert private_reaches(sample, {("layoutkit.b", "_hook"): "why"}) == []
    trees = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}
    assert private_reaches(trees, LIBRARY_PRIVATES) == []
    used = {(m, n.attr) for m, tree in trees.items() for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert sorted(set(LIBRARY_PRIVATES) - used) == []  # none listed that is no longer used


# -- one package per layout ------------------------------------------------------------------

LAYOUT_PACKAGES = sorted({n.split(".")[2] for n in MODULES if n.startswith("layoutkit.layouts.")})
COMMANDS = ("layoutkit.cli", "layoutkit.convert", "layoutkit.reorder", "layoutkit.recipes", "layoutkit.verify",
            "layoutkit.advise", "layoutkit.inspect", "layoutkit.archive", "layoutkit.testing")
WRITE_SIDE = ("layoutkit.writers", "layoutkit.pipeline", "layoutkit.schedulers")


def is_write_side(module: str) -> bool:
    """A writer: the shared writing machinery, or a layout's planner or writer."""
    parts = module.split(".")
    return module.startswith(WRITE_SIDE) or (parts[:2] == ["layoutkit", "layouts"] and parts[-1] in ("plan", "write"))


def closure(name: str) -> set[str]:
    """Every layoutkit module that importing ``name`` runs: its imports, lazy ones
    included, and the packages above each (Python runs a package before its modules)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        module = todo.pop()
        parents = [".".join(module.split(".")[:i]) for i in range(2, module.count(".") + 1)]
        for dep in [*EDGES.get(module, ()), *(p for p in parents if p in MODULES)]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen - {name}


def test_every_layout_package_is_read() -> None:
    assert LAYOUT_PACKAGES == ["hdf5_paged", "shot_major", "shot_packed", "signal_major", "virtual"]


@pytest.mark.parametrize("package", LAYOUT_PACKAGES)
def test_a_layout_imports_only_the_shared_core_and_its_own_package(package: str) -> None:
    own = f"layoutkit.layouts.{package}"
    for name in (n for n in MODULES if n == own or n.startswith(own + ".")):
        bad = [t for t, _ in imports(MODULES[name])
               if t != "layoutkit.layouts" and t.startswith("layoutkit.layouts") and not t.startswith(own)
               or t.startswith(COMMANDS)]
        assert bad == [], name


@pytest.mark.parametrize("package", LAYOUT_PACKAGES)
def test_a_layout_has_every_part(package: str) -> None:
    """spec, plan, write, read and compare: the format, both directions and the proof;
    and append when the layout says it appends (its capability flag, read from the
    registry: the conformance suite runs the append round trips of exactly those)."""
    from layoutkit.layouts import LAYOUTS

    parts = {n.rsplit(".", 1)[-1] for n in MODULES if n.startswith(f"layoutkit.layouts.{package}.")}
    assert {"spec", "plan", "write", "read", "compare"} <= parts
    appends = {layout.appends for layout in LAYOUTS.values()
               if type(layout).__module__ == f"layoutkit.layouts.{package}"}
    assert appends in ({True}, {False}), package
    assert ("append" in parts) == (appends == {True}), package
    if "append" in parts:
        tree = ast.parse(MODULES[f"layoutkit.layouts.{package}.append"].read_text())
        assert "merge" in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


# the layers, lowest first: a module imports from its own layer or a lower one, never a
# higher one (lazy imports included). The core (records, maths, storage, the source side,
# the merge contract) knows no layout; the sides (readers, the proof, the writers' shared
# machinery) know no layout; the layouts know no command; the commands no CLI.
LAYERS = (
    ("core", ("layoutkit.errors", "layoutkit.formats", "layoutkit.options", "layoutkit.timings", "layoutkit.memory",
              "layoutkit.plan", "layoutkit.templates", "layoutkit.merging", "layoutkit.zarr_options", "layoutkit.zarr_plan",
              "layoutkit.storage", "layoutkit.hdf5", "layoutkit.schedulers")),
    ("sides", ("layoutkit.readers", "layoutkit.equality", "layoutkit.writers")),
    ("layouts", ("layoutkit.layout", "layoutkit.layouts", "layoutkit.zarr_layout")),
    ("commands", ("layoutkit.pipeline", "layoutkit.appending", "layoutkit.writing",
                  "layoutkit.archive", "layoutkit.convert", "layoutkit.reorder", "layoutkit.recipes",
                  "layoutkit.sample", "layoutkit.verify", "layoutkit.advise", "layoutkit.inspect", "layoutkit.trace",
                  "layoutkit.testing")),
    ("face", ("layoutkit.cli", "layoutkit.__main__", "layoutkit.api", "layoutkit.xarray_engine", "layoutkit")),
)


def layer_of(module: str) -> int:
    # "layoutkit" names the package's __init__ alone: as a prefix it would hold every module
    found = [(len(p), i) for i, (_, prefixes) in enumerate(LAYERS) for p in prefixes
             if module == p or p != "layoutkit" and module.startswith(p + ".")]
    assert found, f"{module} is in no layer: add it to LAYERS"
    return max(found)[1]


def test_every_module_is_in_a_layer() -> None:
    for name in MODULES:
        layer_of(name)
    with pytest.raises(AssertionError, match="in no layer"):  # the check can fail
        layer_of("layoutkit.somewhere_new")
    assert layer_of("layoutkit") == len(LAYERS) - 1


def test_no_import_upward_across_the_layers() -> None:
    up = [f"{m} ({LAYERS[layer_of(m)][0]}) -> {t} ({LAYERS[layer_of(t)][0]})"
          for m, targets in EDGES.items() for t in targets if layer_of(t) > layer_of(m)]
    assert up == []


def unit_of(module: str) -> str:
    """A package (``layoutkit.hdf5``; the layouts as one), or a top-level module."""
    parts = module.split(".")
    return "layoutkit.layouts" if parts[1:2] == ["layouts"] else ".".join(parts[:2])


def test_no_loop_between_packages() -> None:
    """Module cycles are caught above; this catches loops between packages
    (``hdf5`` -> ``equality`` -> ``hdf5`` was one, through two modules)."""
    units: dict[str, set[str]] = {}
    for m, targets in EDGES.items():
        units.setdefault(unit_of(m), set()).update(unit_of(t) for t in targets if unit_of(t) != unit_of(m))
    assert find_cycle(units) is None


PLANNING = sorted(n for n in MODULES if n in ("layoutkit.plan", "layoutkit.zarr_plan")
                  or n.startswith("layoutkit.layouts.") and n.endswith(".plan"))


@pytest.mark.parametrize("name", PLANNING)
def test_planning_imports_nothing_of_the_write_or_read_side(name: str) -> None:
    """Planning is pure (rechunker's is numpy alone): no writer, no engine, no reader."""
    own = name.rsplit(".", 1)[0]
    bad = sorted(m for m in closure(name) if m.startswith((*WRITE_SIDE, *RAW_READ_PATH, "layoutkit.readers"))
                 or m.startswith("layoutkit.layouts.") and m.rsplit(".", 1)[-1] in ("write", "read", "append")
                 or m.startswith("layoutkit.layouts.") and m.count(".") >= 3 and not m.startswith(own))
    assert bad == []


def test_planning_loads_numpy_alone() -> None:
    """Importing every planner loads no zarr, numcodecs, h5py, hdf5plugin or xarray."""
    import subprocess
    import sys

    code = ("import importlib, sys\n"
            f"for m in {PLANNING!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in ('zarr', 'numcodecs', 'h5py', 'hdf5plugin', 'xarray', 'imagecodecs') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr


READ_SIDE = sorted(
    n for n in MODULES
    if n.startswith(("layoutkit.readers", "layoutkit.verify"))
    or n in ("layoutkit.equality", "layoutkit.equality.hdf5", "layoutkit.archive", "layoutkit.layouts")
    or n.startswith("layoutkit.layouts.") and n.rsplit(".", 1)[-1] in ("spec", "read", "compare")
    or n.count(".") == 2 and n.startswith("layoutkit.layouts.")  # a layout's package: its names and options
)


@pytest.mark.parametrize("name", READ_SIDE)
def test_readers_and_comparators_never_run_a_writer(name: str) -> None:
    """A reader, a comparator, a format spec and verify decode what the formats document:
    sharing the writers' code (even through another module) would hide an encoding bug
    from verify. The registry of layouts loads no writer either."""
    assert sorted(m for m in closure(name) if is_write_side(m)) == []


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.startswith("layoutkit.layouts")))
def test_layouts_never_import_the_cli_or_the_commands(name: str) -> None:
    bad = [t for t, _ in imports(MODULES[name])
           if t in ("layoutkit.cli", "layoutkit.convert", "layoutkit.reorder", "layoutkit.recipes")]
    assert bad == []


def test_recipes_and_pipeline_import_no_command() -> None:
    """recipes reads and validates TOML with the layouts' keys; the pipeline runs any layout."""
    for name in ("layoutkit.recipes", "layoutkit.pipeline"):
        bad = [t for t, _ in imports(MODULES[name]) if t in ("layoutkit.convert", "layoutkit.reorder")]
        assert bad == [], name
    assert not any(t.startswith("layoutkit.layouts") for t, _ in imports(MODULES["layoutkit.pipeline"]))


def test_the_package_imports_layoutkit_open_on_first_use() -> None:
    """`import layoutkit` (every command's start-up) brings neither xarray and pandas nor
    the layouts and zarr; layoutkit.open and layoutkit.Archive still resolve, and convert
    stays the function."""
    import subprocess
    import sys

    code = (
        "import sys, layoutkit\n"
        "assert 'xarray' not in sys.modules and 'layoutkit.archive' not in sys.modules\n"
        "assert 'zarr' not in sys.modules and 'layoutkit.convert' not in sys.modules\n"
        "from layoutkit.archive import Archive, open_archive\n"
        "assert layoutkit.open is open_archive and layoutkit.Archive is Archive\n"
        "import layoutkit.convert\n"
        "assert callable(layoutkit.convert) and layoutkit.convert.__name__ == 'convert'\n"
        "assert 'open' in dir(layoutkit)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_registry_loads_no_numpy_h5py_or_zarr() -> None:
    """Every command lists the layouts (its choices and help come from the registry): the
    registry loads their names and options only."""
    import subprocess
    import sys

    code = ("import sys, layoutkit.layouts\n"
            "heavy = [m for m in ('numpy', 'h5py', 'zarr', 'xarray') if m in sys.modules]\n"
            "assert heavy == [], heavy\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_convert_stays_the_function_when_its_module_is_imported_first() -> None:
    """Importing the submodules layoutkit.convert, reorder, verify, advise and inspect
    before anyone asked for the functions of those names (as a command does) does not
    put the modules where the functions belong; and
    `layoutkit inspect`'s imports do not bring zarr, nor any layout's writer or reader
    (the registry's names and options, which the CLI's choices come from, are light)."""
    import subprocess
    import sys

    code = (
        "import sys, importlib\n"
        "import layoutkit.inspect, layoutkit.cli\n"
        "assert 'zarr' not in sys.modules and 'layoutkit.layouts' in sys.modules\n"
        "parts = [m for m in sys.modules if m.startswith('layoutkit.layouts.') and m.count('.') == 3]\n"
        "assert parts and all(m.endswith(('.spec', '.options')) for m in parts), parts\n"
        "module = importlib.import_module('layoutkit.convert')\n"
        "for name in ('reorder', 'verify.run', 'advise.run', 'inspect.report'):\n"
        "    importlib.import_module('layoutkit.' + name)\n"
        "import layoutkit, layoutkit.api as api\n"
        "from layoutkit import convert, plan_convert, ConvertOptions\n"
        "assert convert is api.convert and layoutkit.convert is api.convert\n"
        "for name in ('reorder', 'verify', 'advise', 'inspect', 'append'):\n"
        "    assert getattr(layoutkit, name) is getattr(api, name), name\n"
        "assert plan_convert is module.plan_convert and ConvertOptions is module.ConvertOptions\n"
        "layoutkit.__version__ = 'x'\n"  # other attributes are set as before
        "assert layoutkit.__version__ == 'x'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def long_functions() -> list[str]:
    """Functions whose body (docstring aside) runs over 60 lines with no ``# long:``
    comment just above them saying why."""
    found = []
    for name, path in MODULES.items():
        source = path.read_text()
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            first = node.body[0]
            has_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                first.value.value, str)
            start = first.end_lineno + 1 if has_doc and len(node.body) > 1 else first.lineno
            top = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
            said = any("# long:" in lines[i] for i in range(max(0, top - 3), top))
            if node.end_lineno - start + 1 > 60 and not said:
                found.append(f"{name}.{node.name}: {node.end_lineno - start + 1} lines")
    return found


def test_no_function_runs_over_60_lines_without_saying_why() -> None:
    assert long_functions() == []


RAW_READ_PATH = ("layoutkit.hdf5.raw", "layoutkit.readers.hdf5")
PROOF = sorted(n for n in MODULES if n.startswith("layoutkit.equality") or n == "layoutkit.hdf5.library_read")


@pytest.mark.parametrize("name", PROOF)
def test_the_proof_reads_the_source_through_hdf5_never_the_raw_path(name: str) -> None:
    """verify's source side reads through HDF5's own read (:mod:`layoutkit.hdf5.library_read`):
    a bug in the converters' raw chunk reader would write wrong data and, read back the
    same way, prove it equal. No chain of imports brings the raw path to the proof."""
    assert sorted(m for m in closure(name) | {name} if m.startswith(RAW_READ_PATH)) == []


def test_the_proof_has_modules_to_hold() -> None:
    assert {"layoutkit.equality.zarr_", "layoutkit.equality.hdf5", "layoutkit.equality.expected"} <= set(PROOF)


def test_the_command_line_runs_the_commands_through_the_python_api() -> None:
    """``layoutkit convert`` and ``layoutkit.convert`` are one path (issue 62): the
    command line parses, shows progress and prints; checking, planning and running are
    :mod:`layoutkit.api`'s, so a Python caller gets every check the command makes."""
    runs = ("layoutkit.pipeline", "layoutkit.appending", "layoutkit.writing", "layoutkit.convert", "layoutkit.reorder",
            "layoutkit.verify.run", "layoutkit.inspect", "layoutkit.layouts.hdf5_paged")
    reached = sorted(f"{m} -> {t}" for m, targets in EDGES.items() if m.startswith("layoutkit.cli")
                     for t in targets if any(t == r or t.startswith(r + ".") for r in runs))
    assert reached == []
    assert {"layoutkit.api"} <= {t for m, targets in EDGES.items() if m.startswith("layoutkit.cli") for t in targets}


def test_a_layout_names_its_parts_by_role_not_by_module_name() -> None:
    """Each registered layout's roles are the objects its factories return (a type checker
    follows them: mypy checks each module against its role's protocol), its appender only
    where it appends."""
    from layoutkit.layouts import LAYOUTS

    for layout in LAYOUTS.values():
        own = type(layout).__module__
        roles = {"planner": "plan", "writer": "write", "reader": "read", "comparator": "compare"}
        if layout.appends:
            roles["appender"] = "append"
        for role, module in roles.items():
            got = getattr(layout, role)()
            assert getattr(got, "__name__", "") == f"{own}.{module}", (layout.name, role)
        if not layout.appends:
            with pytest.raises(NotImplementedError, match="does not append"):
                layout.appender()
    assert "import_module" not in MODULES["layoutkit.layout"].read_text()  # no part found by its module's name
