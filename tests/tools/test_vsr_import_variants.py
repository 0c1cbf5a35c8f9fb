"""`import_vsr` on layout and key variants found in VSR's own repository (issue v50: every router
config of vllm-project/semantic-router run through `extproc import-vsr`): a Helm values file holding
the config under `config`, a model card's `reasoning_family_ref`, and a domain subject written with
underscores. Fixtures: tests/tools/vsr_configs/variants (each names its source, commit and trims)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from extproc.policy.load import check_text, compile_text
from extproc.signals.base import BuildContext
from extproc.tools.vsr_import import ImportResult, VsrImportError, import_vsr, render_policy

VARIANTS = Path(__file__).parent / "vsr_configs" / "variants"


def load(name: str) -> dict[str, Any]:
    raw = yaml.safe_load((VARIANTS / name).read_text(encoding="utf-8"))
    assert isinstance(raw, dict)
    return raw


def passes_check(result: ImportResult, ctx: BuildContext) -> None:
    text = render_policy(result, "test")
    assert [d.format() for d in check_text(text, ctx) if d.severity == "error"] == []
    compile_text(text, ctx)


@pytest.mark.parametrize("name", sorted(p.name for p in VARIANTS.glob("*.yaml")))
def test_every_variant_imports_to_a_policy_check_accepts(name: str, build_ctx: BuildContext) -> None:
    result = import_vsr(load(name))
    assert not [i for i in result.items if "unknown key" in i.why]
    passes_check(result, build_ctx)


# -- a Helm chart's values file ---------------------------------------------------------------------


def test_a_helm_values_file_is_read_through_its_config_key() -> None:
    result = import_vsr(load("helm_values.yaml"))
    helm = [i for i in result.items if i.item == "Helm values"]
    assert [(i.path, i.outcome) for i in helm] == [("config", "mapped")]
    assert "resources" in helm[0].why  # the chart's own values are named, not read
    assert [d["name"] for d in result.policy["decisions"]] == ["complexity_hard_routing"]
    assert result.policy["default"]["name"] == "default-route"  # the catch-all
    assert [m["name"] for m in result.policy["models"]] == ["general-expert"]


def test_helm_config_given_as_yaml_text_is_read_too() -> None:
    values = load("helm_values.yaml")
    as_text = {**values, "config": yaml.safe_dump(values["config"])}
    assert import_vsr(as_text).policy == import_vsr(values).policy


def test_a_values_file_without_a_vsr_config_is_still_refused() -> None:
    # Negative control: `config` alone does not make a values file a VSR config.
    with pytest.raises(VsrImportError, match="not a vLLM Semantic Router config"):
        import_vsr({"config": {"image": "nginx", "replicas": 2}, "resources": {}})
    with pytest.raises(VsrImportError, match="not valid YAML"):
        import_vsr({"config": "routing: [unclosed"})


# -- a model card's reasoning_family_ref -------------------------------------------------------------


def test_a_cards_reasoning_family_ref_names_the_models_family() -> None:
    result = import_vsr(load("card_reasoning_family_ref.yaml"))
    (model,) = result.policy["models"]
    assert model["reasoning_family"] == "qwen3"
    family = [i for i in result.items if i.path == "routing.modelCards[0].reasoning_family_ref"]
    assert [i.outcome for i in family] == ["mapped"]


def test_without_the_ref_the_model_has_no_family_and_the_models_own_family_wins() -> None:
    config = load("card_reasoning_family_ref.yaml")
    del config["routing"]["modelCards"][0]["reasoning_family_ref"]
    assert "reasoning_family" not in import_vsr(config).policy["models"][0]  # negative control
    config = load("card_reasoning_family_ref.yaml")
    config["providers"]["defaults"]["reasoning_families"]["deepseek"] = {
        "type": "chat_template_kwargs",
        "parameter": "thinking",
    }
    config["providers"]["models"][0]["reasoning_family"] = "deepseek"
    assert import_vsr(config).policy["models"][0]["reasoning_family"] == "deepseek"


# -- a subject written with underscores --------------------------------------------------------------


def test_an_underscored_subject_is_read_as_the_classifiers_subject_and_reported() -> None:
    result = import_vsr(load("underscore_subject.yaml"))
    (domain,) = [s for s in result.policy["signals"] if s["type"] == "domain"]
    assert domain["labels_map"] == {"other": "other", "computer science": "computer_science"}
    assert "computer_science_decision" in [d["name"] for d in result.policy["decisions"]]
    respelled = [i for i in result.items if i.path == "categories[1].mmlu_categories"]
    assert [i.outcome for i in respelled] == ["approximated"]
    assert "computer_science" in respelled[0].why


def test_an_underscored_name_that_is_no_subject_is_still_not_carried() -> None:
    # Negative control: only a respelling that IS a subject of the classifier is read.
    config = load("underscore_subject.yaml")
    config["categories"][1] = {"name": "computer_vision", "mmlu_categories": ["computer_vision"]}
    result = import_vsr(config)
    (domain,) = [s for s in result.policy["signals"] if s["type"] == "domain"]
    assert domain["labels_map"] == {"other": "other"}
    assert [i.outcome for i in result.items if i.path == "categories[1]"] == ["unmapped"]
