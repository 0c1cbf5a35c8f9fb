"""`extproc check` as people run it: every problem in one run, no models loaded unless asked;
`extproc explain` fails on a request file the router cannot read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from extproc.cli import main

REPO = Path(__file__).resolve().parents[2]

THREE_ERRORS = """
version: 1
models:
  - {name: small, cluster: small_cluster}
  - {name: vlm, cluster: vlm_cluster, modalities: [text, image]}
signals:
  - {name: jailbreak, type: jailbreak}
  - {name: code, type: code}
decisions:
  - name: block
    priority: 100
    when: {signal: jailbreak}
    action: {type: reject, message: "blocked"}
    colour: red
  - name: code_review
    priority: 50
    when: {signal: code}
    action: {type: route, models: [vlm]}
  - name: also_code
    priority: 50
    when: {signal: jailbrake}
    action: {type: route, models: [vlm]}
  - name: never
    priority: 10
    when: {all: [{signal: code}, {not: {signal: jailbreak}}]}
    action: {type: route, models: [vlm]}
default:
  action: {type: route, models: [small]}
"""

# Run in a fresh interpreter, so what the check imports is what `extproc check` imports.
PROBE = """
import sys
from extproc.cli import main
code = main(sys.argv[1:])
heavy = sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'onnxruntime', 'rapidocr', 'lingua'})
print('HEAVY', ','.join(heavy), file=sys.stderr)
sys.exit(code)
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("VSR_")}
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def test_check_reports_every_problem_in_one_run_without_loading_models(tmp_path: Path) -> None:
    policy = tmp_path / "three.yaml"
    policy.write_text(THREE_ERRORS)
    result = _run("check", str(policy))
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "decisions[0].colour: error: unknown field" in out
    assert "decisions[2].priority: error: duplicate priority 50 (also decisions[1])" in out
    assert "decisions[2].when: error: unknown signal 'jailbrake'; did you mean 'jailbreak'?" in out
    assert "decision 'never' can never be reached: decision 'code_review' has a higher priority" in out
    assert f"{policy}: 4 error(s)" in result.stderr
    # No model library was even imported (the builtin jailbreak signal is pattern-based; the
    # default policy's classifier and vision signals are checked without their models).
    assert [line for line in result.stderr.splitlines() if line.startswith("HEAVY")] == ["HEAVY "]


def test_check_of_the_default_policy_loads_no_model() -> None:
    result = _run("check", "policies/default.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "policies/default.yaml: OK" in result.stdout
    heavy_line = [line for line in result.stderr.splitlines() if line.startswith("HEAVY")]
    assert heavy_line == ["HEAVY "], result.stderr
    assert "unavailable" not in result.stderr  # no "signal ... is unavailable" warnings without --models


def test_check_with_models_builds_them_through_the_real_loaders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "lang.yaml"
    policy.write_text(
        "models: [{name: m, cluster: c}]\n"
        "signals: [{name: lang, type: language, languages: [en, de]}]\n"
        "decisions: [{name: german, priority: 1, when: {signal: lang, label: dee}, "
        "action: {type: route, models: [m]}}]\n"
        "default: {action: {type: route, models: [m]}}\n"
    )
    # Without --models the language detector is not loaded: its labels are not checked, and the
    # output says so.
    assert main(["check", str(policy)]) == 0
    out = capsys.readouterr().out
    assert "note: the labels rules name for signal 'lang' were not checked" in out and "--models" in out
    # With --models the detector loads and the misspelt label is an error.
    assert main(["check", "--models", str(policy)]) == 1
    out = capsys.readouterr().out
    assert "signal 'lang' has no label 'dee'; did you mean 'de'?" in out


def test_explain_fails_on_a_malformed_request_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"model": "auto", "messages": [{"role": "user", "content": "hello"}]}))
    bad.write_text('{"model": "auto", "messages": [')
    policy = str(REPO / "policies" / "examples" / "privacy_guard.yaml")
    assert main(["explain", "--policy", policy, str(good)]) == 0
    capsys.readouterr()
    assert main(["explain", "--policy", policy, "--json", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    assert f"{bad}: not a valid request: request body is not valid JSON" in captured.err
    assert len(captured.out.splitlines()) == 2  # both files still explained
