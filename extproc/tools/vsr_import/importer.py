"""The whole document: both layouts read in order, decisions prioritised, a default, unreachable ones dropped."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from extproc.policy.load import PolicyLoader
from extproc.signals.registry import SignalCatalog
from extproc.tools.vsr_import.calibration import Embed, calibrate
from extproc.tools.vsr_import.decisions import DecisionMapper
from extproc.tools.vsr_import.layouts import prepare
from extproc.tools.vsr_import.reading import (
    Capabilities,
    VsrDecision,
    VsrImportError,
    as_mapping,
    indexes,
    leaf_signals,
    sanitize_name,
)
from extproc.tools.vsr_import.report import ImportResult
from extproc.tools.vsr_import.vocabulary import CURRENT_TOP, FLAT_TOP, NO_COUNTERPART_TOP


@dataclass(frozen=True, slots=True)
class TopLevel:
    """What a layout's top level hands the rest of the import."""

    decisions_raw: Any
    decisions_path: str
    aliases: list[str]
    cache: dict[str, Any] | None
    default_model: Any
    default_path: str


class Importer(DecisionMapper):
    # -- the whole document
    def run(self) -> ImportResult:
        top = self._current_top() if self.layout == "current" else self._flat_top()
        if not self.models:
            raise VsrImportError(
                "the config names no models (model_config / providers.models / modelCards, or in the flat layout "
                "categories[].model_scores / decisions[].modelRefs / default_model)"
            )
        self._reasoning_families()
        model_names = self._model_cards()
        decisions = self._decisions(top.decisions_raw, top.decisions_path)
        if top.decisions_raw is None and self.layout == "flat":
            decisions += self._legacy_category_decisions(self.config)
        policy = self._policy_head(top, model_names)
        default = self._default(decisions, top.default_model, top.default_path)
        ordered = self._prioritise(decisions)
        policy["signals"] = []
        policy["decisions"] = ordered
        policy["default"] = default
        self._drop_unreachable(policy)
        self._keep_used_signals(policy)
        return ImportResult(policy=policy, items=self.items, layout=self.layout)

    def _current_top(self) -> TopLevel:
        cfg = self.config
        self.fields(cfg, "", CURRENT_TOP, NO_COUNTERPART_TOP)
        routing = as_mapping(cfg.get("routing"))
        self._current_models(cfg, routing)
        self._current_signals(as_mapping(routing.get("signals")))
        self._projections(as_mapping(routing.get("projections")), "routing.projections")
        self.fields(
            routing,
            "routing",
            {"modelCards", "signals", "decisions", "strategy", "projections"},
            {
                "model_bindings": "no counterpart: classifier model bindings",
                "candidate_requirements": "no counterpart: candidate requirements",
                "data_policy": "no counterpart: data policy",
                "fallback": "no counterpart: upstream retries are Envoy's (see envoy-config)",
            },
        )
        self._strategy(routing.get("strategy"), "routing.strategy")
        glob = as_mapping(cfg.get("global"))
        aliases = self._current_global(glob)
        cache = self._store_cache(as_mapping(glob.get("stores")))
        defaults = as_mapping(as_mapping(cfg.get("providers")).get("defaults"))
        effort_key = self._first_key(defaults, "reasoning_effort", "default_reasoning_effort")
        self.reasoning_effort_default = self._effort(
            defaults.get(effort_key), f"providers.defaults.{effort_key}", "default reasoning effort"
        )
        model_key = self._first_key(defaults, "model", "default_model")
        return TopLevel(
            routing.get("decisions"),
            "routing.decisions",
            aliases,
            cache,
            defaults.get(model_key),
            f"providers.defaults.{model_key}",
        )

    def _first_key(self, raw: Mapping[str, Any], key: str, alias: str) -> str:
        """`key`, or VSR's other spelling `alias` when only that is set; both set: `alias` is reported unread."""
        if raw.get(key) is None and raw.get(alias) is not None:
            return alias
        if raw.get(alias) is not None:
            self.unmapped(f"field {alias}", f"providers.defaults.{alias}", f"not read: {key} is set as well")
        return key

    def _store_cache(self, stores: Mapping[str, Any]) -> dict[str, Any] | None:
        """`global.stores.response_cache` or its other name `semantic_cache` as the policy cache."""
        names = [k for k in ("response_cache", "semantic_cache") if k in stores]
        for extra in names[1:]:
            self.unmapped(
                f"global store {extra}", f"global.stores.{extra}", f"not read: {names[0]} is the policy cache"
            )
        return self._cache(as_mapping(stores.get(names[0])), f"global.stores.{names[0]}") if names else None

    def _flat_top(self) -> TopLevel:
        cfg = self.config
        self.fields(cfg, "", FLAT_TOP, NO_COUNTERPART_TOP)
        self._flat_models(cfg)
        self._flat_signals(cfg)
        self._strategy(cfg.get("strategy"), "strategy")
        name = cfg.get("auto_model_name")
        aliases = [str(name)] if name else ["MoM"]
        aliases.append("auto")
        cache = self._cache(as_mapping(cfg.get("semantic_cache")), "semantic_cache")
        self.reasoning_effort_default = self._effort(
            cfg.get("default_reasoning_effort"), "default_reasoning_effort", "default reasoning effort"
        )
        self._prompt_guard(as_mapping(cfg.get("prompt_guard")))
        return TopLevel(cfg.get("decisions"), "decisions", aliases, cache, cfg.get("default_model"), "default_model")

    def _policy_head(self, top: TopLevel, model_names: list[str]) -> dict[str, Any]:
        """Everything of the policy above its signals and decisions."""
        policy: dict[str, Any] = {"version": 1, "name": "imported-from-vsr"}
        policy["description"] = f"Imported from a vLLM Semantic Router config ({self.layout} layout)"
        policy["aliases"] = self._aliases(top.aliases, model_names)
        # A request naming a configured model gets it (VSR sends it there); ours honours the name only when no
        # decision fires. A difference of the two routers, not of this config: docs/migrating-from-vsr.md says so.
        policy["client_models"] = list(model_names)
        if top.cache:
            policy["cache"] = top.cache
        policy["models"] = list(self.model_cards.values())  # LoRA variants the decisions added included
        used_rows = {card.get("reasoning_family") for card in self.model_cards.values()}
        rows = {name: row for name, row in self.family_rows.items() if name in used_rows}
        if rows:
            policy["reasoning_families"] = rows
        return policy

    def _keep_used_signals(self, policy: dict[str, Any]) -> None:
        """The policy's signals: those a kept decision reads; each other one is reported and left out."""
        used = {leaf for d in policy["decisions"] for leaf in leaf_signals(d["when"])}
        by_name = {spec["name"]: spec for spec in self.signals}
        todo = list(used)
        while todo:  # a score's or partition's inputs run for it
            spec = by_name.get(todo.pop(), {})
            for term in [*spec.get("inputs", []), *spec.get("members", [])]:
                if term["signal"] not in used:
                    used.add(term["signal"])
                    todo.append(term["signal"])
        for spec in self.signals:
            if spec["name"] in used:
                policy["signals"].append(spec)
            else:
                self.mapped(
                    f"{spec['type']} signal {spec['name']}",
                    self.signal_paths.get(spec["name"], ""),
                    "used by no imported decision; left out (it would never run)",
                )

    # -- ordering, default, reachability
    def _default(self, decisions: list[VsrDecision], default_model: Any, path: str) -> dict[str, Any]:
        catch_alls = sorted((d for d in decisions if d.when is None), key=lambda d: (-d.priority, d.vsr_name))
        for d in catch_alls:
            decisions.remove(d)
        if catch_alls:
            first = catch_alls[0]
            for other in catch_alls[1:]:
                self.mapped(
                    f"decision {other.vsr_name}",
                    other.path,
                    f"catch-all never reached in VSR either ({first.vsr_name} ranks first): left out",
                )
            self.mapped(
                f"decision {first.vsr_name}",
                first.path,
                "catch-all (no conditions) as the default decision (VSR ranks catch-alls after every real match)",
            )
            if default_model is not None:
                self.mapped("default model", path, f"superseded by the catch-all decision {first.vsr_name}, as in VSR")
            name = sanitize_name(first.vsr_name, self.decision_names, fallback="default")
            return {
                "name": name,
                **{k: v for k, v in first.body.items() if k in ("description", "action", "plugins", "cache")},
            }
        names = list(self.model_cards)
        if default_model is not None and str(default_model) in self.model_cards:
            model = str(default_model)
            self.mapped("default model", path, f"as the default decision routing to {model}")
        else:
            model = names[0]
            why = f"unknown model {default_model!r}" if default_model is not None else "not set"
            self.approx(
                "default model", path, f"approximated: {why}; the default decision routes to the first model, {model}"
            )
        name = sanitize_name("default", self.decision_names)
        return {"name": name, "action": {"type": "route", "models": [model]}}

    def _prioritise(self, decisions: list[VsrDecision]) -> list[dict[str, Any]]:
        """Our decisions in VSR's order (tier, then priority, then name), with unique priorities; guards right above.

        VSR evaluates a lower tier before a higher one whatever their priorities: that is an order, which our
        unique priorities express exactly (renumbered), so tiers need no construct of their own."""
        tiers = self.tiers
        ranked = sorted(decisions, key=lambda d: (tiers.get(d.vsr_name, 0), -d.priority, d.vsr_name))
        if tiers:
            by_priority = sorted(decisions, key=lambda d: (-d.priority, d.vsr_name))
            differs = [d.vsr_name for d in ranked] != [d.vsr_name for d in by_priority]
            self.mapped(
                "decision tiers",
                "decisions[].tier",
                "as priority order: tier first, then priority"
                + ("; this reorders decisions, so priorities are renumbered" if differs else " (the same order)"),
            )
        tied = Counter((tiers.get(d.vsr_name, 0), d.priority) for d in ranked)
        ties = [p for (_, p), n in tied.items() if n > 1]
        for p in sorted(ties, reverse=True):
            names = [d.vsr_name for d in ranked if d.priority == p]
            self.approx(
                f"priority tie at {p}",
                ", ".join(d.path for d in ranked if d.priority == p),
                f"approximated: VSR ranks tied decisions by match confidence, then name; here by name: {names}",
            )
        global_guard = self._global_guard(decisions)
        rows: list[tuple[str, dict[str, Any], VsrDecision | None]] = []
        if global_guard is not None:
            rows.append(("jailbreak_block", global_guard, None))
        for d in ranked:
            for kind, spec in d.guards:
                guard_when = (
                    {"all": [d.when, {"signal": spec["name"]}]} if d.when is not None else {"signal": spec["name"]}
                )
                message = (
                    "Request blocked: jailbreak detected."
                    if kind == "jailbreak"
                    else "Request blocked: personal data not allowed here."
                )
                rows.append(
                    (
                        f"{d.vsr_name}_{kind}_block",
                        {
                            "when": guard_when,
                            "action": {"type": "reject", "status": 403, "message": message, "code": f"{kind}_detected"},
                        },
                        None,
                    )
                )
            rows.append((d.vsr_name, {"when": d.when, **d.body}, d))
        keep = not ties and global_guard is None and all(not d.guards for d in ranked)
        keep = keep and [d.vsr_name for d in ranked] == [d.vsr_name for d in sorted(ranked, key=lambda d: -d.priority)]
        out: list[dict[str, Any]] = []
        for rank, (vsr_name, body, source) in enumerate(rows):
            name = sanitize_name(vsr_name, self.decision_names, fallback="decision")
            priority = source.priority if (keep and source is not None) else 10 * (len(rows) - rank)
            entry: dict[str, Any] = {"name": name}
            if "description" in body:
                entry["description"] = body["description"]
            entry["priority"] = priority
            entry["when"] = body["when"]
            entry["action"] = body["action"]
            for key in ("plugins", "cache"):
                if key in body:
                    entry[key] = body[key]
            out.append(entry)
            self.decision_paths[name] = source.path if source is not None else "(added)"
        if not keep and rows:
            self.mapped(
                "decision priorities",
                "decisions[].priority",
                "renumbered 10, 20, ... in VSR's order (priority, then name) so every priority is unique",
            )
        return out

    def _global_guard(self, decisions: list[VsrDecision]) -> dict[str, Any] | None:
        guard = self.prompt_guard
        if not guard or any(kind == "jailbreak" for d in decisions for kind, _ in d.guards):
            if guard:
                self.mapped("prompt guard", "prompt_guard", "carried by the decisions' jailbreak plugins")
            return None
        try:
            threshold = float(guard.get("threshold") or 0.5)
        except (TypeError, ValueError) as exc:
            self.unmapped("prompt guard", "prompt_guard.threshold", f"could not be read: {exc}")
            return None
        spec = self._register(
            {"name": "prompt_guard", "type": "jailbreak", "threshold": min(max(threshold, 0.01), 1.0)},
            "prompt_guard",
            "prompt guard",
        )
        if spec is None:
            return None
        self.approx(
            "prompt guard",
            "prompt_guard",
            f"approximated as a top-priority reject on our jailbreak detector (threshold {spec['threshold']}); "
            f"VSR's model {guard.get('model_id')!r} is not used",
        )
        return {
            "when": {"signal": spec["name"]},
            "action": {
                "type": "reject",
                "status": 403,
                "message": "Request blocked: jailbreak detected.",
                "code": "jailbreak_detected",
            },
        }

    def _drop_unreachable(self, policy: dict[str, Any]) -> None:
        """Settle what our load-time checks refuse and VSR lets by: decisions that can never fire (VSR never
        picks them either) are left out; text-only models are taken off decisions that only fire on images
        (VSR would send the images to them), and a decision left with no model is left out."""
        for _ in range(2 * len(policy["decisions"]) + 2):
            loader = PolicyLoader(self.catalog, file="<imported>")
            parsed = loader.parse_mapping({**policy, "signals": list(self.signals)})
            if parsed is None:
                return  # a schema problem: `extproc check` on the output reports it precisely
            loader.check(parsed)
            errors = [d for d in loader.diagnostics if d.severity == "error"]
            text_only = [d for d in errors if "only fires on requests with images" in d.message]
            dead = [d for d in errors if "can never be reached" in d.message]
            if text_only:
                refs = {indexes(d.location) for d in text_only}
                for d_index, m_index in sorted(refs, reverse=True):
                    entry = policy["decisions"][d_index]
                    model = entry["action"]["models"].pop(m_index)
                    self.approx(
                        f"decision {entry['name']} model {model}",
                        self.decision_paths.get(entry["name"], "decisions"),
                        "approximated: left off this image-only decision, as it accepts only text",
                    )
                for d_index in sorted({d for d, _ in refs}, reverse=True):
                    if not policy["decisions"][d_index]["action"]["models"]:
                        removed = policy["decisions"].pop(d_index)
                        self.unmapped(
                            f"decision {removed['name']}",
                            self.decision_paths.get(removed["name"], "decisions"),
                            "fires only on images but routes only to text-only models; left out",
                        )
            elif dead:
                index = indexes(dead[-1].location)[0]
                removed = policy["decisions"].pop(index)
                self.unmapped(
                    f"decision {removed['name']}",
                    self.decision_paths.get(removed["name"], "decisions"),
                    "can never fire: higher-priority decisions always match first (in VSR too); left out",
                )
            else:
                return


def import_vsr(
    config: Mapping[str, Any],
    *,
    capabilities: Capabilities | None = None,
    catalog: SignalCatalog | None = None,
    recipe: str | None = None,
    kb_dirs: Mapping[str, Path] | None = None,
    base_dir: Path | None = None,
    embed: Embed | None = None,
) -> ImportResult:
    """The policy a VSR config describes, and a report item for every construct read.

    `recipe`: which of a multi-recipe config's recipes (default: the first); `kb_dirs`: knowledge-base
    folders by name (labels.json, taxonomy.json); `embed`: the text embedder, to calibrate embedding
    thresholds VSR tuned to its own encoder from the recipe's own candidates (None: kept as written)."""
    if not isinstance(config, Mapping):
        raise VsrImportError("a VSR config must be a YAML mapping")
    prepared = prepare(config, recipe)
    catalog = catalog or SignalCatalog()
    caps = capabilities or Capabilities.of_schema(catalog)
    importer = Importer(prepared.config, caps, catalog)
    importer.kb_dirs = dict(kb_dirs or {})
    importer.base_dir = base_dir
    importer.from_recipe = prepared.from_recipe
    importer.assignments = prepared.assignments
    importer.items.extend(prepared.items)
    result = importer.run()
    if prepared.model_names:
        aliases = result.policy.setdefault("aliases", [])
        aliases.extend(n for n in prepared.model_names if n not in aliases)
    if embed is not None:
        calibrate(result, embed)
    return result
