"""Wrappers around a VSR config, unwrapped before the import proper: a Kubernetes / KServe
ConfigMap holding the config as a string, the Helm chart's values file holding it under `config`
(VSR's e2e profiles and deploy/kubernetes/*/semantic-router-values), and v0.3's multi-recipe layout (`recipes` each with
its own `routing`, `entrypoints` naming the router model names and assigning models to a
recipe's decisions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from extproc.tools.vsr_import.reading import VsrImportError, as_list, as_mapping
from extproc.tools.vsr_import.report import ReportItem

_VSR_KEYS = frozenset({"version", "providers", "routing", "recipes", "decisions", "categories", "vllm_endpoints"})


@dataclass(slots=True)
class Prepared:
    config: Mapping[str, Any]
    items: list[ReportItem] = field(default_factory=list)
    assignments: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    model_names: list[str] = field(default_factory=list)
    from_recipe: bool = False  # the config is one of a v0.3 `recipes` list


def prepare(config: Mapping[str, Any], recipe: str | None) -> Prepared:
    out = Prepared(config)
    out.config = _unwrap_helm_values(_unwrap_configmap(config, out), out)
    if "recipes" in out.config:
        out.config = _select_recipe(out.config, recipe, out)
        out.from_recipe = True
    elif recipe is not None:
        raise VsrImportError(f"--recipe {recipe!r}: this config has no `recipes`")
    return out


def _unwrap_configmap(config: Mapping[str, Any], out: Prepared) -> Mapping[str, Any]:
    if str(config.get("kind", "")) != "ConfigMap":
        return config
    for key, value in as_mapping(config.get("data")).items():
        if not isinstance(value, str):
            continue
        try:
            inner = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise VsrImportError(f"ConfigMap data {key!r} is not valid YAML: {exc}") from None
        if isinstance(inner, Mapping) and _VSR_KEYS & set(inner):
            out.items.append(ReportItem("ConfigMap", f"data.{key}", "mapped", "the VSR config held in this key"))
            return inner
    raise VsrImportError("a ConfigMap, but none of its data keys holds a vLLM Semantic Router config")


def _unwrap_helm_values(config: Mapping[str, Any], out: Prepared) -> Mapping[str, Any]:
    """The router config under a Helm values file's `config` key (a mapping, or YAML text), when the
    top level is not itself a VSR config; the chart's other values (resources, image, ...) are
    deployment settings and are named in the report, not read."""
    if _VSR_KEYS & set(config) or "config" not in config:
        return config
    inner = config["config"]
    if isinstance(inner, str):
        try:
            inner = yaml.safe_load(inner)
        except yaml.YAMLError as exc:
            raise VsrImportError(f"Helm values `config` is not valid YAML: {exc}") from None
    if not (isinstance(inner, Mapping) and _VSR_KEYS & set(inner)):
        return config
    others = sorted(str(k) for k in config if k != "config")
    why = "the VSR config under the chart's `config` key" + (
        f"; the chart's other values ({', '.join(others)}) are deployment settings, not read" if others else ""
    )
    out.items.append(ReportItem("Helm values", "config", "mapped", why))
    return inner


def _select_recipe(config: Mapping[str, Any], wanted: str | None, out: Prepared) -> Mapping[str, Any]:
    recipes = [as_mapping(r) for r in as_list(config.get("recipes"))]
    names = [str(r.get("name", i)) for i, r in enumerate(recipes)]
    if not recipes:
        raise VsrImportError("`recipes` is empty")
    if wanted is None:
        index = 0
    elif wanted in names:
        index = names.index(wanted)
    else:
        raise VsrImportError(f"no recipe {wanted!r}; the recipes are {names}")
    chosen = recipes[index]
    others = [n for i, n in enumerate(names) if i != index]
    why = f"recipe {names[index]!r} imported" + (
        f"; the others ({', '.join(others)}) are policies of their own: import each with --recipe NAME"
        if others
        else ""
    )
    out.items.append(ReportItem(f"recipe {names[index]}", f"recipes[{index}]", "mapped", why))
    merged: dict[str, Any] = {k: v for k, v in config.items() if k not in ("recipes", "entrypoints")}
    routing = dict(as_mapping(config.get("routing")))
    routing.update(as_mapping(chosen.get("routing")))
    merged["routing"] = routing
    for i, entry in enumerate(as_list(config.get("entrypoints"))):
        entry = as_mapping(entry)
        if str(entry.get("recipe", names[0])) != names[index]:
            continue
        out.model_names += [str(n) for n in as_list(entry.get("model_names"))]
        for decision, assignment in as_mapping(entry.get("assignments")).items():
            refs = []
            for ref in as_list(as_mapping(assignment).get("models")):
                ref = as_mapping(ref)
                reasoning = as_mapping(ref.get("reasoning"))
                row: dict[str, Any] = {"model": ref.get("model")}
                if reasoning:
                    row["use_reasoning"] = bool(reasoning.get("enabled", True))
                    if reasoning.get("effort"):
                        row["reasoning_effort"] = reasoning["effort"]
                refs.append(row)
            out.assignments[str(decision)] = refs
        out.items.append(
            ReportItem(
                "entrypoint",
                f"entrypoints[{i}]",
                "mapped",
                "its model names as aliases; its assignments as the models of decisions that name none "
                "(weights: no counterpart, the list order is kept)",
            )
        )
    return merged
