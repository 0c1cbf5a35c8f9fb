"""The docs stay true to the tree: docs/architecture.md's layer table is LAYERS, the README's
layout table names every layer in order and only what exists, the paths docs and comments name
exist, and the demo ports the docs give are the default policy's."""

from __future__ import annotations

import glob
import re
from pathlib import Path

import yaml

from tests.package.test_layers import LAYERS, layer_of

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
ARCHITECTURE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")

# Paths the docs give as examples of a user's own files, not files of the repository.
PLACEHOLDERS = {"policies/new.yaml"}
ROOTS = "extproc|tests|bench|policies|envoy|docker|docs"
SUBPACKAGES = "ops|server|signals|policy|protocol|models|tools|cli|observability|cache|conversations|fleet|agents|testing|detectors"
ROOTED = re.compile(rf"(?<![\w./-])((?:{ROOTS})/[\w./*-]*[\w*/])")
# A path inside the package written without `extproc/` (`ops/envoy_config/options.py`).
INNER = re.compile(rf"(?<![\w./-])((?:{SUBPACKAGES})/[\w./-]*\.(?:py|yaml|jsonl|json|md|c|html))\b")


def table_rows(text: str, header: str) -> list[list[str]]:
    start = text.index(header)
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_architecture_layer_table_is_the_layering_tests() -> None:
    block = ARCHITECTURE.split("<!-- layers:begin", 1)[1].split("<!-- layers:end -->", 1)[0]
    rows = table_rows(block, "| layer | modules |")
    assert [int(row[0]) for row in rows] == list(range(len(LAYERS)))
    assert [tuple(re.findall(r"`([\w.]+)`", row[1])) for row in rows] == list(LAYERS)


def readme_layout() -> list[tuple[list[str], list[Path]]]:
    """Each layout row's package modules and the paths it names (`extproc/x/`, then names in it)."""
    found = []
    for row in table_rows(README, "| where | what |"):
        names = re.findall(r"`([^`]+)`", row[0])
        base = Path(names[0]).parent  # `extproc/cache/` or `extproc/errors.py`: the rest are beside it
        paths = [REPO / names[0]] + [REPO / base / name for name in names[1:]]
        modules = []
        for path in paths:
            relative = path.relative_to(REPO).with_suffix("") if path.suffix == ".py" else path.relative_to(REPO)
            modules.append(".".join(relative.parts))
        found.append((modules, paths))
    return found


def test_the_readme_layout_table_follows_the_layers_and_names_what_exists() -> None:
    rows = readme_layout()
    for _, paths in rows:
        for path in paths:
            assert path.exists(), f"the README's layout table names {path.relative_to(REPO)}, which does not exist"
    layers = [layer_of(module) for modules, _ in rows for module in modules if layer_of(module) is not None]
    assert layers == sorted(layers), "the layout table's rows must run in the layering test's order"
    named = {module for modules, _ in rows for module in modules}
    for prefixes in LAYERS:
        for prefix in prefixes:
            assert any(m == prefix or m.startswith(prefix + ".") for m in named), f"{prefix} is not in the layout table"


def documents() -> list[Path]:
    files = [REPO / "README.md", REPO / "Makefile", REPO / "pyproject.toml", *sorted((REPO / "docs").glob("*.md"))]
    for folder in ("extproc", "tests", "bench"):
        files += sorted(p for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".md") and p.is_file())
    return [f for f in files if f != Path(__file__).resolve()]  # this file names stale paths on purpose


def missing_paths(files: list[Path]) -> dict[str, list[str]]:
    missing: dict[str, list[str]] = {}
    for file in files:
        text = file.read_text(encoding="utf-8", errors="replace")
        for match in ROOTED.finditer(text):
            path = match.group(1).rstrip("./")
            exists = glob.glob(str(REPO / path), recursive=True) if "*" in path else (REPO / path).exists()
            if path not in PLACEHOLDERS and not exists:
                missing.setdefault(path, []).append(file.name)
        for match in INNER.finditer(text):
            path = match.group(1)
            if not (REPO / "extproc" / path).exists() and not (REPO / path).exists():
                missing.setdefault(path, []).append(file.name)
    return missing


def test_every_path_the_docs_and_comments_name_exists() -> None:
    assert missing_paths(documents()) == {}


def test_the_path_check_catches_a_stale_path(tmp_path: Path) -> None:
    stale = tmp_path / "note.py"
    text = "Sized in ops/envoy_config.py; see extproc/observability/replay.py, not extproc/tools/replay.py."
    stale.write_text(f'"""{text}"""\n', encoding="utf-8")
    assert set(missing_paths([stale])) == {"ops/envoy_config.py", "extproc/observability/replay.py"}


def test_the_demo_ports_the_docs_give_are_the_default_policys() -> None:
    policy = yaml.safe_load((REPO / "policies" / "default.yaml").read_text(encoding="utf-8"))
    ports = sorted(int(m["address"].rsplit(":", 1)[1]) for m in policy["models"])
    assert f"`127.0.0.1:{ports[0]}..{ports[-1]}`" in README
    running = (REPO / "docs" / "running.md").read_text(encoding="utf-8")
    assert f"`127.0.0.1:{ports[0]}` .. `{ports[-1]}`" in running
    for server in policy.get("mcp", {}).get("servers", []):
        assert f"`{server['address']}`" in running
