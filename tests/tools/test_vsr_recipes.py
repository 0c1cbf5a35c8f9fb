"""VSR's maintained recipes, imported with import-vsr and judged by VSR's own probes.

The probes (each variant's `expected_decision`) go through the imported policy with real signals,
in process, exactly as a client's request would: nothing here knows an answer. The floors are the
figures the import reaches today; a change that loses probes fails here, and the report names them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from extproc.models.registry import ModelRegistry
from extproc.settings import Settings
from extproc.tools.vsr_import import import_vsr
from extproc.tools.vsr_import.probes import load_probes, score_recipe
from tests.suite_env import SUITE_ENVIRON

RECIPES = Path(__file__).parent / "vsr_recipes"
# recipe -> probes that must be decided as VSR expects (of the total)
FLOORS = {
    "accuracy": 11,
    "agent": 18,
    "balance": 54,
    "feedback": 19,
    "knowledge": 13,
    "mom-v1": 212,  # 211 before its attack after 528 KB of padding was read (issue 47: scans read the tail)
    "multi-objective": 111,
    "privacy": 19,
}


@pytest.fixture(scope="module")
def shared_models() -> ModelRegistry:
    """One registry for every recipe: MiniLM and the domain classifier load once, not per recipe."""
    return ModelRegistry()


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_recipe_probes_are_decided_as_vsr_expects(name: str, shared_models: ModelRegistry) -> None:
    folder = RECIPES / name
    settings = Settings.load(None, environ=SUITE_ENVIRON)
    score = score_recipe(name, folder / "config.yaml", folder / "probes.yaml", settings, models=shared_models)
    misses = [f"{o.probe.variant}: expected {o.probe.expected}, got {o.decided}" for o in score.misses()]
    assert score.error is None, score.error
    assert score.passed >= FLOORS[name], f"{score.passed}/{score.total}; misses:\n" + "\n".join(misses)


def test_probes_file_reads_every_variant_shape() -> None:
    probes = load_probes(RECIPES / "privacy" / "probes.yaml")
    assert len(probes) == 21
    image = next(p for p in probes if p.variant == "private_image_understanding")
    parts = image.body["messages"][0]["content"]
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")
    tools = next(p for p in probes if p.variant == "filtered_tool_scope")
    assert [t["function"]["name"] for t in tools.body["tools"]] == ["local_search", "send_to_cloud"]


def test_the_privacy_recipe_imports_its_projections_and_assignments() -> None:
    config = yaml.safe_load((RECIPES / "privacy" / "config.yaml").read_text(encoding="utf-8"))
    result = import_vsr(config)
    signals = {s["name"]: s for s in result.policy["signals"]}
    band = signals["security_policy_band"]
    assert band["type"] == "score" and [b["name"] for b in band["bands"]] == [
        "policy_security_standard",
        "policy_security_local_only",
    ]
    # keyword confidence is VSR's 1-for-a-match; the kb input without its knowledge base is left out
    assert {"signal": "prompt_injection_markers", "weight": 0.48, "value": "match"} in band["inputs"]
    assert signals["override_directive_dense"]["measure"] == "density"
    decisions = {d["name"]: d for d in result.policy["decisions"]}
    assert decisions["local_security_containment"]["action"]["models"] == ["local/private-qwen"]  # the assignment
    # privacy_override_active reads a score with no carried input: a constant false band, folded away
    assert decisions["cloud_frontier_reasoning"]["when"]["all"][-1] == {
        "signal": "security_policy_band",
        "label": "policy_security_standard",
    }
    assert "vllm-sr/auto" in result.policy["aliases"]
    assert any("left out (counts as 0)" in i.why for i in result.items)


def test_a_configmap_and_a_recipe_choice() -> None:
    text = (RECIPES / "privacy" / "config.yaml").read_text(encoding="utf-8")
    wrapped = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "vsr"}, "data": {"config.yaml": text}}
    result = import_vsr(wrapped)
    assert any(i.item == "ConfigMap" and i.path == "data.config.yaml" for i in result.items)
    assert len(result.policy["decisions"]) == 5
    from extproc.tools.vsr_import import VsrImportError

    with pytest.raises(VsrImportError, match="no recipe 'nope'"):
        import_vsr(yaml.safe_load(text), recipe="nope")
    with pytest.raises(VsrImportError, match="none of its data keys"):
        import_vsr({"kind": "ConfigMap", "data": {"other": "a: 1"}})


def test_a_complexity_composer_gates_the_rule_leaves_and_domains_read_the_top_subject() -> None:
    config = yaml.safe_load((RECIPES / "balance" / "config.yaml").read_text(encoding="utf-8"))
    result = import_vsr(config)
    signals = {s["name"]: s for s in result.policy["signals"]}
    assert signals["domain"]["threshold"] == 0.0  # a recipe's domains give none: the top subject
    decisions = {d["name"]: d for d in result.policy["decisions"]}
    # legal_risk is gated by `law` in VSR: its medium level alone must not make a request legal
    gated = {"all": [{"signal": "legal_risk", "label": "medium"}, {"signal": "domain", "label": "law"}]}
    assert gated in decisions["premium_legal"]["when"]["all"][1]["any"]
    assert signals["low_question_density"]["measure"] == "density"  # density over a regex is carried


def test_each_probe_goes_to_the_recipe_its_model_names() -> None:
    from extproc.tools.vsr_import.probes import entrypoint_recipes

    config = yaml.safe_load((RECIPES / "multi-objective" / "config.yaml").read_text(encoding="utf-8"))
    recipes = entrypoint_recipes(config)
    assert recipes["vllm-sr/mom-flash-v1"] == "speed-first"
    assert recipes["vllm-sr/mom-private-v1"] == "privacy-first"
    probes = load_probes(RECIPES / "multi-objective" / "probes.yaml")
    assert {recipes[str(p.body["model"])] for p in probes} == {
        "balanced",
        "speed-first",
        "cost-first",
        "accuracy-first",
        "privacy-first",
    }
    padded = next(p for p in probes if p.variant == "long_pii_full_scan")
    text = padded.body["messages"][0]["content"]
    assert text.startswith("Routine benign") and text.endswith("this is confidential.")
    loop = next(p for p in probes if p.variant == "ordinary_tool_result")
    assert loop.body["messages"][1]["tool_calls"][0]["id"] == "call-1"
    assert loop.body["messages"][2]["tool_call_id"] == "call-1"


def test_mom_v1_probes_are_sized_as_vsr_sizes_them() -> None:
    """The built-in recipe's long-context probes: `padding` around a query splits its copies, and a
    `generated_text` block fills a message to its byte target (the context bands read the size)."""
    from extproc.protocol.openai import parse_request

    probes = {p.variant: p for p in load_probes(RECIPES / "mom-v1" / "probes.yaml")}
    assert len(probes) == 223
    around = probes["balance_over_240k_text_guard__boundary_orchestration_tools_collision"]
    text = around.body["messages"][0]["content"]
    query = "Break this into independent workstreams, then use the inventory lookup tool."
    assert text.count("Text now.") == 4500 and query in text
    assert not text.startswith(query) and not text.endswith(query)  # padding on both sides
    boundary = probes["balance_over_240k_image_guard__image_at_first_over_240k_token"].body
    parts = boundary["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["text", "text", "image_url"]  # inserted at content_index 1
    assert sum(len(p["text"].encode()) for p in parts if p["type"] == "text") == 960001
    tokens = parse_request(boundary).estimated_tokens()
    assert 240001 <= tokens < 240100  # just over the 240K band's edge, as the probe intends
    later = probes["accuracy_text_tool_result_synthesis__text_tool_result_from_120k_to_240k"].body["messages"]
    assert later[3]["content"][0]["text"].startswith("Synthesize") and len(later[3]["content"]) == 2
    assert probes["vault_sensitive__explicit_identifier"].body["model"] == "vllm-sr/mom-v1-vault"


def test_tool_loop_conversation_features_are_carried() -> None:
    """VSR's tool-loop sources: active_tool_loop (an outstanding call included), assistant_tool_call,
    assistant_tool_cycle (a completed call), and messages of role non_user."""
    mom = yaml.safe_load((RECIPES / "mom-v1" / "config.yaml").read_text(encoding="utf-8"))
    signals = {s["name"]: s for s in import_vsr(mom, recipe="accuracy").policy["signals"]}
    assert signals["accuracy_active_tool_loop"]["source"] == "tool_turns"
    assert signals["accuracy_has_tool_result"]["source"] == "tool_results"
    agent = yaml.safe_load((RECIPES / "agent" / "config.yaml").read_text(encoding="utf-8"))
    signals = {s["name"]: s for s in import_vsr(agent).policy["signals"]}
    assert signals["active_tool_use"]["source"] == "tool_calls"
    assert signals["completed_tool_cycle"]["source"] == "tool_results"
    assert signals["heavy_non_user"]["roles"] == ["system", "assistant", "tool"]
