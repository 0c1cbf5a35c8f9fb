"""`extproc import-vsr`: the written policy and its report, --strict, --explain, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from extproc.cli import main

CONFIGS = Path(__file__).resolve().parents[1] / "tools" / "vsr_configs"

SIMPLE = {
    "vllm_endpoints": [{"name": "gpu", "address": "127.0.0.1", "port": 8000}],
    "model_config": {"org/coder": {"preferred_endpoints": ["gpu"]}, "org/chat": {"preferred_endpoints": ["gpu"]}},
    "default_model": "org/chat",
    "keyword_rules": [{"name": "code", "operator": "OR", "keywords": ["python", "rust"]}],
    "decisions": [
        {
            "name": "coding",
            "priority": 10,
            "rules": {"operator": "AND", "conditions": [{"type": "keyword", "name": "code"}]},
            "modelRefs": [{"model": "org/coder"}],
            "plugins": [{"type": "system_prompt", "configuration": {"system_prompt": "Write code.", "mode": "insert"}}],
        }
    ],
}


def write(tmp_path: Path, name: str, data: object) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def request(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"model": "auto", "messages": [{"role": "user", "content": text}]}))
    return path


def test_writes_a_policy_that_check_accepts_with_the_report_on_top(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "policy.yaml"
    assert main(["import-vsr", str(CONFIGS / "current.yaml"), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "VSR constructs (current layout)" in printed
    assert "routing.signals.complexity[0]" in printed and "hard-minus-easy margin" in printed
    assert "no counterpart yet" not in printed  # the domain and complexity types and the reasoning fields exist
    text = out.read_text()
    assert text.startswith("# Imported by `extproc import-vsr` from current.yaml.")
    assert "#   complexity signal needs_thinking" in text and "routing.signals.fact_check[0]" in text
    assert "#   domain math" not in text  # mapped exactly: not among the comments
    policy = yaml.safe_load(text)
    assert {"name": "domain", "type": "domain", "labels_map": {"math": "math", "law": "law"}} in policy["signals"]
    assert main(["check", str(out)]) == 0
    assert f"{out}: OK" in capsys.readouterr().out


def test_without_output_the_policy_goes_to_stdout_and_the_report_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["import-vsr", str(write(tmp_path, "vsr.yaml", SIMPLE))]) == 0
    captured = capsys.readouterr()
    policy = yaml.safe_load(captured.out)
    assert [d["name"] for d in policy["decisions"]] == ["coding"]
    assert "mapped exactly" in captured.err and "mapped exactly" not in captured.out.split("\n\n", 1)[1]


def test_strict_fails_on_anything_not_exact_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "policy.yaml"
    assert main(["import-vsr", "--strict", str(CONFIGS / "flat.yaml"), "-o", str(out)]) == 3
    assert not out.exists()
    assert "--strict:" in capsys.readouterr().err
    # A config whose every construct maps exactly passes --strict.
    assert main(["import-vsr", "--strict", str(write(tmp_path, "simple.yaml", SIMPLE)), "-o", str(out)]) == 0
    assert "0 approximated, 0 not carried over" in capsys.readouterr().out
    assert out.exists()


def test_explain_routes_requests_through_the_imported_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path, "simple.yaml", SIMPLE)
    code, chat = request(tmp_path, "code.json", "fix my python script"), request(tmp_path, "hi.json", "hello")
    assert (
        main(["import-vsr", str(config), "-o", str(tmp_path / "p.yaml"), "--explain", str(code), str(chat), "--json"])
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [(d["decision"], d["model"]) for d in lines] == [("coding", "org/coder"), ("default", "org/chat")]
    # The same through `extproc explain --policy` on the written file.
    assert main(["explain", "--policy", str(tmp_path / "p.yaml"), "--json", str(code)]) == 0
    (again,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert again["decision"] == "coding"
    # Without -o the policy goes to a temporary file for explaining; the table form works too.
    assert main(["import-vsr", str(config), "--explain", str(code)]) == 0
    assert "decision: coding" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("decisions: [unclosed", "invalid YAML"),
        ("models: []\nsignals: []\n", "not a vLLM Semantic Router config"),
        ("- just\n- a list\n", "not a vLLM Semantic Router config"),
        ("decisions: []\n", "names no models"),
    ],
)
def test_bad_input_gets_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    out = tmp_path / "policy.yaml"
    assert main(["import-vsr", str(write(tmp_path, "bad.yaml", content)), "-o", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_missing_file_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import-vsr", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


RECIPES = Path(__file__).resolve().parents[1] / "tools" / "vsr_recipes"


def test_a_recipe_config_with_its_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "privacy.yaml"
    config = RECIPES / "privacy" / "config.yaml"
    assert main(["import-vsr", str(config), "--no-calibrate", "--recipe", "default", "-o", str(out)]) == 0
    policy = yaml.safe_load(out.read_text())
    assert {s["type"] for s in policy["signals"]} >= {"score", "feature", "keyword", "semantic"}
    assert "vllm-sr/auto" in policy["aliases"]  # the recipe's entrypoint
    # --no-calibrate: VSR's embedding threshold as written
    assert next(s for s in policy["signals"] if s["name"] == "pii_request")["threshold"] == 0.82
    capsys.readouterr()
    assert main(["import-vsr", str(config), "--no-calibrate", "--recipe", "nope"]) == 2
    assert "no recipe 'nope'; the recipes are ['default']" in capsys.readouterr().err
    assert main(["import-vsr", str(config), "--kb", "privacy_kb"]) == 2
    assert "--kb 'privacy_kb': expected NAME=DIR" in capsys.readouterr().err
