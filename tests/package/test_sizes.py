"""Size limits of the package's structure (issue 23): modules a reader can hold, a thin servicer.

No module in `extproc/` over 700 lines, the servicer under 250, and no function over 80 lines
outside the offline tools (`extproc/tools/`, run by the CLI, never by the server).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "extproc"
MODULE_LINES = 700
SERVICER_LINES = 250
FUNCTION_LINES = 80


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(name, lines) of every function or method in `source` longer than `limit` lines."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append((node.name, lines))
    return found


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def package_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_module_is_over_the_line_limit() -> None:
    too_long = {str(p.relative_to(PACKAGE)): n for p in package_modules() if (n := line_count(p)) > MODULE_LINES}
    assert too_long == {}


def test_the_servicer_stays_thin() -> None:
    assert line_count(PACKAGE / "server" / "grpc_service.py") < SERVICER_LINES


def test_no_function_outside_the_offline_tools_is_over_the_limit() -> None:
    tools = PACKAGE / "tools"
    found = {
        f"{path.relative_to(PACKAGE)}:{name}": lines
        for path in package_modules()
        if tools not in path.parents
        for name, lines in long_functions(path.read_text(encoding="utf-8"), FUNCTION_LINES)
    }
    assert found == {}


def test_the_function_check_catches_a_long_function_and_method() -> None:
    def statements(indent: str) -> str:
        return "\n".join(f"{indent}x{i} = {i}" for i in range(FUNCTION_LINES))

    source = (
        "def short():\n    return 1\n\n"
        f"def long():\n{statements('    ')}\n\n"
        f"class C:\n    async def method(self):\n{statements('        ')}\n"
    )
    found = dict(long_functions(source, FUNCTION_LINES))
    assert found == {"long": FUNCTION_LINES + 1, "method": FUNCTION_LINES + 1}
    assert long_functions(source, FUNCTION_LINES + 1) == []
