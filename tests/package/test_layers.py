"""The package's layers: every import runs from a higher layer to a lower one (or within one),
and no imports run in a cycle. Function-level imports count, and so do TYPE_CHECKING ones, for both:
a type-only import still makes a reader see one module leaning on the other."""

from __future__ import annotations

import ast
from pathlib import Path

import extproc

PACKAGE = Path(extproc.__file__).resolve().parent

# Lowest first. A module may import from its own layer and the layers before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("extproc.errors", "extproc.headers", "extproc.web"),
    ("extproc.images", "extproc.detectors"),
    ("extproc.protocol",),
    ("extproc.settings",),
    ("extproc.models",),
    ("extproc.signals",),
    # Test tooling (tiny checkpoints, OCR scenes and their routing view, the OCR quantizer calibrated
    # on those scenes): only tests, bench/ and weight makers import it; the wheel leaves it out.
    ("extproc.testing",),
    ("extproc.policy",),
    ("extproc.outcome",),
    ("extproc.router",),
    ("extproc.agents", "extproc.cache", "extproc.conversations", "extproc.fleet"),
    ("extproc.observability",),
    ("extproc.server",),
    ("extproc.ops",),
    # Offline tools (training, parity, probe, evaluation, import-vsr): they read models, signals,
    # policy and the router, and only the CLI runs them, so nothing that serves requests can reach them.
    ("extproc.tools",),
    ("extproc.cli", "extproc.__main__"),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def _annotation_only(tree: ast.Module) -> set[int]:
    """Ids of import nodes under `if TYPE_CHECKING:`: they never run."""
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            ids.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return ids


def imports_of(path: Path, module: str, *, runtime_only: bool = False) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _annotation_only(tree) if runtime_only else set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("extproc"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")[: -node.level] if path.name != "__init__.py" else module.split(".")
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.startswith("extproc"):
                found.add(target)
                found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def package_graph(*, runtime_only: bool = False) -> dict[str, set[str]]:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        # Keep only targets that are modules of the package ("from extproc import headers" names one).
        targets = imports_of(path, name, runtime_only=runtime_only)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        own = layer_of(module)
        if own is None:
            problems.append(f"{module}: in no layer (add it to LAYERS)")
            continue
        for target in sorted(targets):
            theirs = layer_of(target)
            if theirs is not None and theirs > own and target != "extproc":
                problems.append(f"{module} (layer {own}) imports {target} (layer {theirs})")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_every_import_runs_downward() -> None:
    graph = package_graph()
    graph.pop("extproc", None)  # the package's own __init__ imports nothing of ours
    assert layer_violations(graph) == []


def test_no_import_cycles() -> None:
    # Type-only imports (under TYPE_CHECKING) count: they never execute, but a reader still sees a
    # circle. Where a child needs its owner, it names a small Protocol of what it reads (as the admin
    # edge does with `AdminTarget`), not the owner's class.
    assert cycles(package_graph()) == []


def test_the_checks_catch_an_upward_import_and_a_cycle() -> None:
    graph = {"extproc.policy.engine": {"extproc.router"}, "extproc.router": {"extproc.policy.engine"}}
    assert layer_violations(graph) == ["extproc.policy.engine (layer 7) imports extproc.router (layer 9)"]
    assert cycles(graph) == [["extproc.policy.engine", "extproc.router", "extproc.policy.engine"]]
    assert layer_violations({"extproc.newthing": set()}) == ["extproc.newthing: in no layer (add it to LAYERS)"]


def test_the_graph_keeps_type_only_imports_so_a_type_only_cycle_is_caught(tmp_path: Path) -> None:
    # Two modules of one layer: `a` imports `b` at run time, `b` names `a` only under TYPE_CHECKING.
    (tmp_path / "a.py").write_text("from extproc.server.b import thing\n", encoding="utf-8")
    (tmp_path / "b.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from extproc.server.a import Owner\n",
        encoding="utf-8",
    )
    modules = {"extproc.server.a": tmp_path / "a.py", "extproc.server.b": tmp_path / "b.py"}

    def graph(*, runtime_only: bool) -> dict[str, set[str]]:
        return {
            name: {t for t in imports_of(path, name, runtime_only=runtime_only) if t in modules and t != name}
            for name, path in modules.items()
        }

    assert graph(runtime_only=False)["extproc.server.b"] == {"extproc.server.a"}
    assert cycles(graph(runtime_only=False)) == [["extproc.server.a", "extproc.server.b", "extproc.server.a"]]
    # Dropping type-only imports (as the cycle check once did) hides it.
    assert cycles(graph(runtime_only=True)) == []
