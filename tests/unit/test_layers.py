"""The shape of the code, checked: imports only run down the floors, engine knowledge stays in engines/.

Read from the source with `ast` (nothing is imported): every import a module makes at run time, at any
depth, except those under `if TYPE_CHECKING:` (annotations only).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from firstlight.engines import ENGINES
from tests.conftest import ROOT

SRC = ROOT / "src" / "firstlight"

# Lowest first. A module may import from its own unit and from lower floors, never from a higher one.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("version", "errors", "logs", "nvml", "records", "secrets"),
    ("engines",),
    ("deployment", "store", "facts"),
    ("preflight", "diagnosis", "rendering", "benchmark", "testing"),
    ("launch", "reports"),
    ("sweep",),
    ("__init__",),  # the public API, over everything
    ("cli", "__main__"),
)
FLOOR = {unit: i for i, units in enumerate(FLOORS) for unit in units}


def unit_of(module: str) -> str:
    """`firstlight.launch.watcher` → `launch`; `firstlight` → `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


class RuntimeImports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool) -> None:
        self.module, self.is_package = module, is_package
        self.found: list[tuple[int, str]] = []

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [(node.lineno, a.name) for a in node.names if a.name.startswith("firstlight")]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module.split(".")
            base = base[: len(base) - node.level + (1 if self.is_package else 0)]
            target = ".".join([*base, node.module] if node.module else base)
        else:
            target = node.module or ""
        if target.startswith("firstlight"):
            self.found.append((node.lineno, target))


def runtime_imports() -> list[tuple[str, int, str]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        module = module_name(path)
        visitor = RuntimeImports(module, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(), str(path)))
        out += [(module, line, target) for line, target in visitor.found]
    return out


def test_every_unit_has_a_floor() -> None:
    units = {unit_of(module_name(p)) for p in SRC.rglob("*.py")}
    assert units <= set(FLOOR), f"give these a floor in FLOORS: {sorted(units - set(FLOOR))}"


def test_no_import_runs_back_up() -> None:
    upward = [
        f"{module}:{line} imports {target}"
        for module, line, target in runtime_imports()
        if unit_of(target) != unit_of(module) and FLOOR[unit_of(target)] > FLOOR[unit_of(module)]
    ]
    assert upward == []


def test_no_import_of_another_command() -> None:
    """CLI commands are thin and independent: they share only cli.common and cli.view."""
    shared = {"firstlight.cli", "firstlight.cli.common", "firstlight.cli.view"}
    crossing = [
        f"{module}:{line} imports {target}"
        for module, line, target in runtime_imports()
        if module.startswith("firstlight.cli.") and target.startswith("firstlight.cli") and target not in shared
    ]
    assert crossing == []


def engine_name_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants equal to an engine's name where code decides on them: compared, tested for
    membership, or used as a mapping's key."""
    names = set(ENGINES)
    found = []
    for node in ast.walk(tree):
        candidates: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            candidates = [node.left, *node.comparators]
            for c in list(candidates):
                if isinstance(c, ast.Tuple | ast.List | ast.Set):
                    candidates += c.elts
        elif isinstance(node, ast.Dict):
            candidates = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.MatchValue):
            candidates = [node.value]
        found += [(c.lineno, c.value) for c in candidates if isinstance(c, ast.Constant) and c.value in names]
    return found


def test_no_engine_name_is_compared_outside_engines() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name!r}"
        for path in sorted(SRC.rglob("*.py"))
        if "engines" not in path.relative_to(SRC).parts
        for line, name in engine_name_literals(ast.parse(path.read_text()))
    ]
    assert offenders == []


def test_the_name_check_catches_a_comparison() -> None:
    """The check above is not vacuous: it finds the kinds of code it forbids."""
    code = 'if dep.engine == "sglang": pass\nx = {"vllm": 1}\nok = engine in ("tgi", "x")\n'
    assert [name for _, name in engine_name_literals(ast.parse(code))] == ["sglang", "vllm", "tgi"]


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_above_400_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 400
