"""The folder tree is the architecture: no import cycle, and each stage imports only the stages before it.

An AST walk over `specaccept_cli/` (no import is executed), so an import inside a function or
under `if TYPE_CHECKING:` counts as much as one at the top of a module: a cycle hidden in a
function still breaks the moment that function runs, and a layer crossed lazily is still crossed.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

PACKAGE = "specaccept_cli"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
CORE = ("read", "rule", "summary", "pipeline", "verdict", "errors", "text", "simulate", "native", "threads")


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    imported: str  # dotted module name (the most specific module the statement names)
    where: str  # path:line, for the failure message
    typing_only: bool = False  # under `if TYPE_CHECKING:`: never executed

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.imported}"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    """The absolute name of `from .module import ...` seen from `importer`."""
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(name: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):  # every statement, module level, function level or TYPE_CHECKING
        where = f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}"
        hint = id(node) in typing_only
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(name, alias.name, where, hint)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, is_package, node.level, node.module)
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                yield Import(name, submodule if submodule in MODULES else target, where, hint)


IMPORTS = [item for name, path in MODULES.items() for item in imports_of(name, path)]


def stage(module: str) -> str | None:
    """`read`, `rule`, `cli`, `errors`, ... for a module of the package; None for anything else."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    return parts[1] if len(parts) > 1 else PACKAGE


def top_level(module: str) -> str:
    return module.split(".")[0]


def test_the_walk_sees_the_whole_package() -> None:
    """Guard the guard: a walk that finds nothing would pass everything below."""
    assert {"rule", "read", "summary", "pipeline", "views", "cli"} <= {stage(name) for name in MODULES}
    assert any(stage(item.imported) == "rule" for item in IMPORTS if stage(item.importer) == "read")


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (an iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(edges):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(sorted(edges.get(start, ())))]
        state[start] = 1
        while stack:
            following = next(stack[-1], None)
            if following is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(following) == 1:
                return [*path[path.index(following) :], following]
            if not state.get(following):
                state[following] = 1
                path.append(following)
                stack.append(iter(sorted(edges.get(following, ()))))
    return None


def test_find_cycle_finds_one_and_only_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def assert_no_cycle(imports: list[Import]) -> None:
    edges: dict[str, set[str]] = {}
    sites: dict[tuple[str, str], str] = {}
    for item in imports:
        if item.imported in MODULES and item.imported != item.importer:
            edges.setdefault(item.importer, set()).add(item.imported)
            sites.setdefault((item.importer, item.imported), item.where)
    cycle = find_cycle(edges)
    if cycle is not None:
        steps = "\n".join(f"  {sites[a, b]}: {a} imports {b}" for a, b in pairwise(cycle))
        pytest.fail(f"import cycle {' -> '.join(cycle)}:\n{steps}")


def test_no_import_cycle() -> None:
    """Imports that run (module level or inside a function) never form a cycle."""
    assert_no_cycle([item for item in IMPORTS if not item.typing_only])


def test_no_import_cycle_even_in_type_hints() -> None:
    assert_no_cycle(IMPORTS)


STDLIB = sys.stdlib_module_names | {"__future__"}


def _allowed_by_rule(item: Import) -> bool:
    """`rule` is the seed's arithmetic: errors, the standard library and numpy, nothing else (and `native`,
    the standard-library loader of its optional compiled kernel, and msgspec, whose Structs are the
    project's record types everywhere)."""
    if stage(item.imported) in ("rule", "errors", "native"):
        return True
    return stage(item.imported) is None and top_level(item.imported) in STDLIB | {"numpy", "msgspec"}


LAYERS = [
    # (importing stage(s), what it must not import, why)
    (("read",), ("summary", "verdict", "pipeline", "views", "cli"), "read produces batches; it knows no summary"),
    (
        ("summary",),
        ("read", "pipeline", "verdict", "views", "cli"),
        "summary is state from outcomes, not from files",
    ),
    (CORE, ("views", "cli"), "the core is a library: no view, no command"),
    (("views",), ("cli",), "views render; the commands call them, never the other way"),
]

CHECKS = f"{PACKAGE}.verdict.checks"

EXTERNAL = [(CORE, ("click", "rich"), "the core never imports click or rich (`import specaccept_cli` stays light)")]


def layer_violations(imports: list[Import]) -> list[str]:
    found = []
    for item in imports:
        source = stage(item.importer)
        target = stage(item.imported)
        if source == "rule" and not _allowed_by_rule(item):
            found.append(f"{item} (rule imports only errors, native, the standard library, numpy and msgspec)")
        for importers, forbidden, why in LAYERS:
            if source in importers and target in forbidden:
                found.append(f"{item} ({why})")
        if item.importer == CHECKS and item.imported.startswith(f"{PACKAGE}.verdict.") and item.imported != CHECKS:
            found.append(f"{item} (checks is the comparison engine the verdict calls, never the other way)")
        for importers, libraries, why in EXTERNAL:
            if source in importers and target is None and top_level(item.imported) in libraries:
                found.append(f"{item} ({why})")
    return sorted(set(found))


def test_a_crossing_is_named_with_its_place() -> None:
    crossing = Import("specaccept_cli.read.jsonl", "rich.console", "specaccept_cli/read/jsonl.py:3")
    assert layer_violations([crossing]) == [
        "specaccept_cli/read/jsonl.py:3: specaccept_cli.read.jsonl imports rich.console "
        "(the core never imports click or rich (`import specaccept_cli` stays light))"
    ]
    upward = Import("specaccept_cli.rule.batch", "specaccept_cli.summary.state", "specaccept_cli/rule/batch.py:9")
    assert len(layer_violations([upward])) == 1


def test_each_stage_imports_only_the_stages_it_may() -> None:
    violations = layer_violations(IMPORTS)
    assert not violations, "imports across the layers:\n  " + "\n  ".join(violations)


# What only `conclude` computes: a view that called one of these would draw a number no other view shows.
COMPUTATIONS = {
    "estimate",
    "drift_test",
    "compare",
    "window_estimates",
    "check_gates",
    "conclude",
    "calibration",
    "r_uniformity",
}


def computations_in_views() -> list[str]:
    """Every call (or import) in `views/` of a function that estimates, tests or compares."""
    found = []
    for name, path in MODULES.items():
        if stage(name) != "views":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            called = None
            if isinstance(node, ast.Call):
                function = node.func
                called = function.id if isinstance(function, ast.Name) else getattr(function, "attr", None)
            elif isinstance(node, ast.ImportFrom):
                called = next((alias.name for alias in node.names if alias.name in COMPUTATIONS), None)
            if called in COMPUTATIONS:
                found.append(f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}: {called}")
    return found


def test_views_draw_findings_and_compute_nothing() -> None:
    """Estimates, tests and comparisons come from `conclude` alone: the views draw its `Findings`."""
    found = computations_in_views()
    assert not found, "views computing what conclude computes:\n  " + "\n  ".join(found)


def test_the_computation_guard_sees_a_call() -> None:
    """Guard the guard: the walk finds a computation where there is one (conclude calls them)."""
    path = ROOT / "verdict" / "conclude.py"
    tree = ast.parse(path.read_text())
    calls = {
        getattr(node.func, "id", getattr(node.func, "attr", None))
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    assert {"estimate", "drift_test", "compare"} <= calls


def _writes_the_accept_test(tree: ast.AST) -> bool:
    """A call min(1, a / b) (or min(a / b, 1)) anywhere in the module's code, not in its text."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "min":
            ones = [arg for arg in node.args if isinstance(arg, ast.Constant) and arg.value == 1]
            ratios = [arg for arg in node.args if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Div)]
            if ones and ratios:
                return True
    return False


def test_the_accept_test_is_written_in_the_rule_alone() -> None:
    """min(1, p / q) is computed in the scalar rule (`rule.scalar.threshold`) and nowhere else in scalar code:
    a view that shows the test (`check --explain`) calls the rule's own functions instead of writing it again."""
    assert _writes_the_accept_test(ast.parse("x = min(1.0, p[i] / q[i])"))  # the guard sees what it looks for
    found = sorted(name for name, path in MODULES.items() if _writes_the_accept_test(ast.parse(path.read_text())))
    assert found == ["specaccept_cli.rule.scalar"]


# ---------------------------------------------------------------------------------------------
# No import runs back up, and no module reaches into another's private names

# The stages from the ground up: a stage imports only stages below it (and itself). `specaccept_cli` is the
# package's face (`__init__.py`), which hands every public name on: a module inside that imported it would
# load the whole house to read one name.
ORDER = [
    ("errors", "text", "version", "native", "threads"),
    ("rule", "simulate", "capture"),
    ("read",),
    ("summary",),
    ("verdict",),
    ("pipeline",),
    ("views",),
    ("cli",),
    (PACKAGE, "__main__"),
]
FLOOR = {name: floor for floor, names in enumerate(ORDER) for name in names}


def upward_imports(imports: list[Import]) -> list[str]:
    """Every import of a stage from a higher floor (type hints included: a hint still names what is above)."""
    found = []
    for item in imports:
        source, target = stage(item.importer), stage(item.imported)
        if source is None or target is None or source == target:
            continue
        if FLOOR[target] > FLOOR[source]:
            found.append(f"{item} ({target} stands above {source})")
    return sorted(set(found))


def test_every_stage_has_a_floor() -> None:
    assert {stage(name) for name in MODULES} <= set(FLOOR), "a new stage needs its place in ORDER"


def test_an_upward_import_is_found() -> None:
    """Guard the guard: reading the version through the whole package is a climb, through `version` is not."""
    up = Import("specaccept_cli.pipeline.distributed", PACKAGE, "specaccept_cli/pipeline/distributed.py:9")
    down = Import(
        "specaccept_cli.pipeline.distributed", f"{PACKAGE}.version", "specaccept_cli/pipeline/distributed.py:9"
    )
    assert len(upward_imports([up, down])) == 1
    assert upward_imports([Import("specaccept_cli.read.sources", "specaccept_cli.pipeline.clusters", "x:1")])


def test_no_import_runs_back_up() -> None:
    found = upward_imports(IMPORTS)
    assert not found, "imports that run back up the house:\n  " + "\n  ".join(found)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_reaches(name: str, path: Path, code: str | None = None) -> Iterator[str]:
    """`from other import _name`, and `other._name` on a module of the package bound by an import."""
    tree = ast.parse(path.read_text() if code is None else code, filename=str(path))
    is_package = path.name == "__init__.py"
    modules: set[str] = set()  # local names bound to another module of the package
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT.parent)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom):
            target = _resolve(name, is_package, node.level, node.module)
            if stage(target) is None or target == name:
                continue
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:
                    modules.add(alias.asname or alias.name)
                elif _is_private(alias.name):
                    yield f"{where}: {name} imports {alias.name} from {target}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if stage(alias.name) is not None and alias.name != name and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _is_private(node.attr)
        ):
            yield f"{path.relative_to(ROOT.parent)}:{node.lineno}: {name} uses {node.value.id}.{node.attr}"


def test_a_private_reach_is_found() -> None:
    """Guard the guard: both ways of reaching in are seen, and a module's own private names are its own."""
    code = (
        "from specaccept_cli.summary.intervals import _untimed\n"
        "from specaccept_cli.pipeline import parallel\n"
        "from specaccept_cli.pipeline.local import _own\n"
        "parallel._serial\n"
    )
    found = list(private_reaches("specaccept_cli.pipeline.local", ROOT / "pipeline" / "local.py", code))
    assert [reach.split(": ", 1)[1] for reach in found] == [
        "specaccept_cli.pipeline.local imports _untimed from specaccept_cli.summary.intervals",
        "specaccept_cli.pipeline.local uses parallel._serial",
    ]


def test_no_module_imports_another_modules_private_names() -> None:
    """A name shared between modules is public (no underscore) where it is defined; a private one stays home."""
    found = sorted(set(reach for name, path in MODULES.items() for reach in private_reaches(name, path)))
    assert not found, "private names used across modules:\n  " + "\n  ".join(found)
