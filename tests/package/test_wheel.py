"""The package works outside the repository: a built wheel, installed without an editable link,
finds its default policy and routes a request from an unrelated directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout, installed (its files, no dependencies) into a target folder.

    Built from a copy of the tree without the editable install's leftovers: an `extproc.egg-info`
    (its SOURCES.txt) or a `build/lib` from an earlier build put excluded files back into the wheel,
    which a release build from a clean clone would not hold."""
    source = tmp_path_factory.mktemp("source") / "extproc-src"
    leftovers = shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "*.so"
    )
    shutil.copytree(REPO, source, ignore=leftovers, symlinks=True)
    wheels = tmp_path_factory.mktemp("wheels")
    built = run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(source)],
        cwd=source,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("extproc-*.whl")
    target = tmp_path_factory.mktemp("site")
    installed = run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)], REPO)
    assert installed.returncode == 0, installed.stderr
    return target


def extproc(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The installed copy comes first on the path; the venv still provides the dependencies.
    env = {k: v for k, v in os.environ.items() if not k.startswith("VSR_")}
    env["PYTHONPATH"] = str(target)
    return run([sys.executable, "-m", "extproc", *args], cwd=cwd, env=env)


def test_the_wheel_carries_the_default_policy(installed: Path) -> None:
    shipped = installed / "extproc" / "data" / "policies" / "default.yaml"
    assert shipped.is_file() and not shipped.is_symlink()
    assert (installed / "extproc" / "server" / "console" / "index.html").is_file()
    assert (installed / "extproc" / "models" / "weights" / "attack_classifier" / "lexical.safetensors").is_file()
    assert shipped.read_text(encoding="utf-8") == (REPO / "policies" / "default.yaml").read_text(encoding="utf-8")


def test_the_wheel_leaves_the_test_tooling_out(installed: Path) -> None:
    # Tiny checkpoints, OCR scenes and the OCR quantizer that calibrates on them serve the tests
    # and the weights' makers, who run them from the source tree.
    assert not (installed / "extproc" / "testing").exists()
    assert (installed / "extproc" / "tools" / "__init__.py").is_file()


def test_the_wheel_leaves_training_rows_and_offline_pieces_out(installed: Path) -> None:
    package = installed / "extproc"
    assert sorted(str(p.relative_to(package)) for p in package.rglob("*.jsonl")) == []
    assert not (package / "observability" / "replay.py").exists()  # the CLI's: it lives in tools/
    assert (package / "tools" / "replay.py").is_file()
    # What the source tree holds and the wheel leaves out, so the check above checks something.
    assert (REPO / "extproc" / "tools" / "attack_everyday_written.jsonl").is_file()
    assert (REPO / "extproc" / "models" / "weights" / "domain_classifier" / "extra_train.jsonl").is_file()
    assert (REPO / "extproc" / "models" / "weights" / "domain_classifier" / "head_train.jsonl").is_file()


def test_retraining_from_the_wheel_says_it_needs_a_checkout(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "train.jsonl").write_text('{"text": "hello", "label": "benign"}\n', encoding="utf-8")
    for command in ("train-classifier", "train-domain"):
        refused = extproc(installed, tmp_path, command, "--data", str(tmp_path))
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "needs a source checkout" in refused.stderr


def test_check_and_explain_run_from_elsewhere_without_a_policy_argument(installed: Path, tmp_path: Path) -> None:
    located = run(
        [sys.executable, "-c", "import extproc; print(extproc.__file__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(installed)},
    )
    assert Path(located.stdout.strip()).is_relative_to(installed), "the installed copy, not the checkout, must run"

    checked = extproc(installed, tmp_path, "check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "default.yaml: OK" in checked.stdout

    request = tmp_path / "req.json"
    request.write_text(json.dumps({"model": "auto", "messages": [{"role": "user", "content": "Find the bug:\n```python\nx = 1 / 0\n```"}]}))
    explained = extproc(installed, tmp_path, "explain", "--json", str(request))
    assert explained.returncode == 0, explained.stdout + explained.stderr
    result = json.loads(explained.stdout.splitlines()[-1])
    assert result["decision"] == "code_security_review" and result["cluster"] == "code_security"


def test_repository_tools_say_what_they_miss_outside_a_checkout(installed: Path, tmp_path: Path) -> None:
    deployed = extproc(installed, tmp_path, "envoy-config", "--out-dir", str(tmp_path / "envoy"), "--deploy")
    assert deployed.returncode == 2
    assert "needs a source checkout" in deployed.stderr
    # Rendering the Envoy config itself needs only the (shipped) policy.
    assert (tmp_path / "envoy" / "envoy.yaml").is_file()
