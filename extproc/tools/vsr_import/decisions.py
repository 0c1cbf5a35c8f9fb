"""VSR decisions (rule trees, model refs, reasoning, plugins) -> our decisions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from extproc.policy.schema import CacheSpec, Plugins
from extproc.signals.complexity import LEVELS
from extproc.tools.vsr_import.projections import ProjectionMapper
from extproc.tools.vsr_import.reading import VsrDecision, as_list, as_mapping, first_error
from extproc.tools.vsr_import.vocabulary import LEAF_KINDS, NEEDS_DOMAIN, NEEDS_ROUTE_REASONING, UNMAPPED_SIGNALS


class DecisionMapper(ProjectionMapper):
    # -- decisions
    def _decisions(self, raw: Any, path: str) -> list[VsrDecision]:
        out: list[VsrDecision] = []
        for i, d in enumerate(as_list(raw)):
            with self.guarded("decision", f"{path}[{i}]"):
                dpath = f"{path}[{i}]"
                if not isinstance(d, Mapping) or not d.get("name"):
                    self.unmapped("decision", dpath, "a decision needs a name")
                    continue
                decision = self._decision(d, dpath)
                if decision is not None:
                    out.append(decision)
        return out

    def _decision(self, d: Mapping[str, Any], path: str) -> VsrDecision | None:
        vsr_name = str(d["name"])
        item = f"decision {vsr_name}"
        self.fields(
            d,
            path,
            {"name", "description", "priority", "rules", "modelRefs", "plugins", "algorithm", "action", "tier"},
            {
                k: "no counterpart: " + k
                for k in (
                    "output_contract",
                    "output_contract_spec",
                    "annotations",
                    "candidateIterations",
                    "emits",
                    "adaptations",
                )
            },
        )
        try:
            priority = int(d.get("priority") or 0)
        except (TypeError, ValueError):
            self.unmapped(item, f"{path}.priority", f"priority {d.get('priority')!r} is not an integer")
            return None
        if d.get("tier") is not None:
            try:
                self.tiers[vsr_name] = int(d["tier"])
            except (TypeError, ValueError):
                self.unmapped(f"{item} tier", f"{path}.tier", f"tier {d['tier']!r} is not an integer")
        rules = d.get("rules")
        when: dict[str, Any] | None
        if rules is None or (isinstance(rules, Mapping) and not rules.get("conditions") and "type" not in rules):
            when = None  # VSR: an empty rule set matches everything (a catch-all)
        else:
            notes: list[str] = []
            when = self._condition(rules, f"{path}.rules", True, notes)
            if when is None:
                return None
            if "const" in when:
                if not when["const"]:
                    self.unmapped(item, path, "its rule is always false here (it tests bands of a constant score)")
                    return None
                notes.append("its rule is always true here (it tests bands of a constant score): a catch-all")
                when = None
            if notes:
                self.approx(f"{item} rules", f"{path}.rules", "approximated: " + "; ".join(notes))
            else:
                self.mapped(f"{item} rules", f"{path}.rules", "as a rule tree (AND/OR/NOT as all/any/not)")
            if isinstance(rules, Mapping) and rules.get("on_unknown"):
                self.approx(
                    f"{item} on_unknown",
                    f"{path}.rules.on_unknown",
                    "approximated: each signal's on_error decides unknowns",
                )
        body: dict[str, Any] = {}
        if d.get("description"):
            body["description"] = str(d["description"])
        answers = any(
            str(as_mapping(p).get("type", "")).replace("-", "_") == "fast_response"
            and as_mapping(as_mapping(p).get("configuration")).get("enabled") is not False
            for p in as_list(d.get("plugins"))
        )  # VSR answers these itself: no model is needed
        models = self._model_refs(d, path, item, needs_model=not answers)
        if models is None:
            return None
        body["action"] = {"type": "route", "models": models}
        reasoning = self._route_reasoning(self.reasoning_of_refs, path, item)
        if reasoning is not None:
            body["action"]["reasoning"] = reasoning
        selection = self._algorithm(d.get("algorithm"), f"{path}.algorithm", item)
        if selection is not None and len(models) > 1:
            body["action"]["selection"] = selection
        guards = self._plugins(d, path, item, body)
        self.mapped(item, path, f"as decision (priority from {priority})")
        return VsrDecision(vsr_name, path, priority, when, body, guards)

    def _condition(self, raw: Any, path: str, positive: bool, notes: list[str]) -> dict[str, Any] | None:
        if not isinstance(raw, Mapping):
            self.unmapped("rule", path, f"a rule must be a mapping, got {raw!r}")
            return None
        if "operator" not in raw and "conditions" not in raw:
            return self._leaf(raw, path)
        op = str(raw.get("operator", "AND")).upper()
        children_raw = as_list(raw.get("conditions"))
        if op not in ("AND", "OR", "NOT"):
            self.unmapped("rule", f"{path}.operator", f"unknown operator {raw.get('operator')!r}")
            return None
        if not children_raw:
            self.unmapped("rule", path, f"an empty {op} inside a rule tree")
            return None
        if op == "NOT":
            if len(children_raw) != 1:
                notes.append(f"NOT over {len(children_raw)} conditions read as NOT (any of them)")
                inner: Any = {"operator": "OR", "conditions": children_raw}
            else:
                inner = children_raw[0]
            child = self._condition(
                inner, f"{path}.conditions[0]" if len(children_raw) == 1 else path, not positive, notes
            )
            if child is not None and "const" in child:
                return {"const": not child["const"]}
            return None if child is None else {"not": child}
        children = [self._condition(c, f"{path}.conditions[{i}]", positive, notes) for i, c in enumerate(children_raw)]
        constants = [c["const"] for c in children if c is not None and "const" in c]
        if constants:  # fold constant branches: AND with a false one is false, OR with a true one true
            absorbing = op == "OR"
            if absorbing in constants:
                return {"const": absorbing}
            children = [c for c in children if c is None or "const" not in c]
            if not children:
                return {"const": not absorbing}
        kept = [c for c in children if c is not None]
        if len(kept) < len(children):
            # Dropping an unknown child where that can only make the tree fire less is sound. An OR
            # under a NOT is the other case: VSR recipes exclude other lanes with NOT(any of ...), and
            # dropping the decision would lose its lane. There the unmapped leaf reads as never
            # matching (VSR's classifier not firing), so the decision fires more often; the report
            # says so. A positive AND with an unmapped branch is still left out.
            sound = (op == "OR") == positive
            if not kept or not (sound or op == "OR"):
                return None
            effect = "fires less often" if sound else "fires more often: read as never matching under a NOT"
            notes.append(f"{len(children) - len(kept)} unmapped branch(es) of an {op} left out ({effect})")
        if len(kept) == 1:
            return kept[0]
        return {"all" if op == "AND" else "any": kept}

    def _leaf(self, raw: Mapping[str, Any], path: str) -> dict[str, Any] | None:
        kind_raw = str(raw.get("type", "")).lower()
        name = str(raw.get("name", ""))
        self.fields(raw, path, {"type", "name", "label", "predicate"})
        section = LEAF_KINDS.get(kind_raw, kind_raw)
        if section == "complexity" and ":" in name:
            rule, level = name.rsplit(":", 1)
            leaf = self.leaves.get(("complexity", rule))
            if leaf is not None and level in LEVELS:
                return self._composed({**leaf, "label": level}, rule, path)
            if leaf is not None:
                why = f"unknown complexity level {level!r} (the levels: {', '.join(LEVELS)})"
            else:
                why = self.leaf_missing.get(("complexity", rule), f"unknown complexity signal {rule!r}")
        else:
            leaf = self.leaves.get((section, name))
            if leaf is not None:
                return dict(leaf)
            if (section, name) in self.constants:
                return {"const": self.constants[(section, name)]}
            if section in UNMAPPED_SIGNALS:
                why = self.leaf_missing.get((section, name), UNMAPPED_SIGNALS[section])
            else:
                why = self.leaf_missing.get((section, name), f"unknown {kind_raw or '(no type)'} signal {name!r}")
        self.unmapped(f"rule leaf {kind_raw}:{name}", path, why)
        return None

    def _composed(self, leaf: dict[str, Any], rule: str, path: str) -> dict[str, Any]:
        """A complexity level gated by its signal's VSR `composer`: all of [the level, its conditions]."""
        composer = self.complexity_composers.get(rule)
        if not composer:
            return leaf
        notes: list[str] = []
        gate = self._condition(composer, f"{path} (composer of {rule})", True, notes)
        if gate is None or gate.get("const") is True:
            return leaf  # a composer none of whose conditions carried over leaves the level ungated (reported)
        if gate.get("const") is False:
            return {"const": False}
        return {"all": [leaf, gate]}

    def _model_refs(self, d: Mapping[str, Any], path: str, item: str, needs_model: bool = True) -> list[str] | None:
        refs: list[Mapping[str, Any]] = [r for r in as_list(d.get("modelRefs")) if isinstance(r, Mapping)]
        if not refs and str(d.get("name")) in self.assignments:
            refs = list(self.assignments[str(d["name"])])
            self.mapped(f"{item} models", f"entrypoints.assignments.{d['name']}", "the entrypoint's assignment")
        models: list[str] = []
        reasoning: list[tuple[Any, Any]] = []
        for j, ref in enumerate(refs):
            with self.guarded(f"{item} model ref", f"{path}.modelRefs[{j}]"):
                rpath = f"{path}.modelRefs[{j}]"
                self.fields(
                    ref,
                    rpath,
                    {
                        "model",
                        "lora_name",
                        "use_reasoning",
                        "reasoning_effort",
                        "reasoning_description",
                        "reasoning_mode",
                    },
                    {"weight": "no counterpart: weights of learned selection (the list order is kept)"},
                )
                name = str(ref.get("model", ""))
                if name not in self.model_cards:
                    self.unmapped(f"{item} model {name}", rpath, "unknown model")
                    continue
                target = self._model_variant(name, str(ref["lora_name"])) if ref.get("lora_name") else name
                if ref.get("lora_name"):
                    self.mapped(
                        f"{item} LoRA {ref['lora_name']}",
                        f"{rpath}.lora_name",
                        f"as model card {target} (upstream model {ref['lora_name']})",
                    )
                if target not in models:
                    models.append(target)
                reasoning.append((ref.get("use_reasoning"), ref.get("reasoning_effort")))
        action = as_mapping(d.get("action"))
        if action:
            self.fields(action, f"{path}.action", {"type", "destination"})
            dest = str(action.get("destination", ""))
            if action.get("type") == "route" and dest in self.model_cards:
                models = [dest, *[m for m in models if m != dest]]
                self.mapped(f"{item} action", f"{path}.action", f"as route to {dest} first")
            else:
                self.unmapped(f"{item} action", f"{path}.action", f"unknown action or destination {dict(action)}")
        if not models and not needs_model:
            self.reasoning_of_refs = []
            return models  # the fast_response plugin makes the action
        if not models:
            self.unmapped(item, f"{path}.modelRefs", "no known model to route to: decision dropped")
            return None
        self.mapped(f"{item} models", f"{path}.modelRefs", f"as ordered route models {models}")
        self.reasoning_of_refs = reasoning
        return models

    def _route_reasoning(
        self,
        reasoning: list[tuple[Any, Any]],
        path: str,
        item: str,
        paths: tuple[str, str] = ("modelRefs[0].use_reasoning", "modelRefs[0].reasoning_effort"),
    ) -> dict[str, Any] | None:
        """modelRefs' use_reasoning / reasoning_effort -> the route's `reasoning` (issue 22's RouteAction field);
        `paths`: where the first setting's two fields are, below `path`."""
        if not reasoning or all(use is None and effort is None for use, effort in reasoning):
            return None
        rpath = f"{path}.{paths[0]}"
        if not self.caps.route_reasoning:
            self.unmapped(f"{item} reasoning", rpath, NEEDS_ROUTE_REASONING)
            return None
        use, raw_effort = reasoning[0]
        if use is not None and not isinstance(use, bool):
            self.unmapped(f"{item} reasoning", rpath, f"not carried over: use_reasoning {use!r} is not true or false")
            use = None
        setting: dict[str, Any] = {"mode": "keep" if use is None else ("on" if use else "off")}
        effort = self._effort(raw_effort, f"{path}.{paths[1]}", f"{item} reasoning effort")
        effort = effort or self.reasoning_effort_default
        if use and effort:
            setting["effort"] = effort
        if setting["mode"] == "keep":
            if any(u is not None for u, _ in reasoning[1:]):
                self.approx(
                    f"{item} reasoning",
                    rpath,
                    "approximated: the first model sets no reasoning, so none is set for any model of the route",
                )
            elif use is None:
                self.mapped(f"{item} reasoning", rpath, "use_reasoning unset: the client's reasoning fields pass")
            return None  # the client's own reasoning fields pass untouched, as with no setting at all
        if len({(u, e) for u, e in reasoning}) > 1:
            self.approx(
                f"{item} reasoning",
                rpath,
                f"approximated: the first model's setting {setting} for every model of the route",
            )
        else:
            self.mapped(f"{item} reasoning", rpath, f"as route reasoning {setting}")
        return setting

    def _algorithm(self, raw: Any, path: str, item: str) -> str | None:
        """VSR's model-selection algorithm as a route `selection` (docs/selection.md): static ->
        ordered, latency-aware -> latency, multi-factor -> its heaviest of cost and latency (its
        quality factor has no counterpart); the learned ones (Elo, RouterDC, AutoMix, ...) -> ordered."""
        algo = as_mapping(raw)
        if not algo:
            return None
        kind = str(algo.get("type", "static")).lower().replace("-", "_")
        if kind == "static":
            self.mapped(f"{item} algorithm", path, "as the ordered model list (first model that fits)")
            return None
        if kind in ("latency_aware", "latency"):
            self.mapped(f"{item} algorithm", path, "as selection: latency (observed, decayed time to first byte)")
            return "latency"
        if kind in ("multi_factor", "multifactor"):
            factors = as_mapping(algo.get("weights") or algo.get("factors") or algo.get("multi_factor"))
            cost, latency = _weight(factors, "cost"), _weight(factors, "latency")
            chosen = "cost" if cost >= latency and cost > 0 else "latency"
            self.approx(
                f"{item} algorithm",
                path,
                f"approximated: multi-factor selection as selection: {chosen} (its heaviest of cost {cost:g} and "
                f"latency {latency:g}); the quality factor has no counterpart",
            )
            return chosen
        self.approx(
            f"{item} algorithm",
            path,
            f"approximated: {kind} selection as the ordered model list (first model that fits)",
        )
        return None

    def _plugins(
        self, d: Mapping[str, Any], path: str, item: str, body: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        """A decision's VSR plugins onto `body` (plugins, cache, action); the guard decisions they ask for."""
        guards: list[tuple[str, dict[str, Any]]] = []
        plugins: dict[str, Any] = {}
        headers: dict[str, str] = {}
        for k, plugin in enumerate(as_list(d.get("plugins"))):
            with self.guarded(f"{item} plugin", f"{path}.plugins[{k}]"):
                ppath = f"{path}.plugins[{k}]"
                plugin = as_mapping(plugin)
                kind = str(plugin.get("type", "")).replace("-", "_")
                conf = as_mapping(plugin.get("configuration"))
                self.fields(plugin, ppath, {"type", "configuration"})
                pitem = f"{item} plugin {plugin.get('type')}"
                if conf.get("enabled") is False:
                    self.mapped(pitem, ppath, "disabled: nothing to carry")
                elif kind == "system_prompt":
                    self._system_prompt_plugin(conf, ppath, pitem, plugins)
                elif kind == "header_mutation":
                    self._header_plugin(conf, ppath, pitem, headers)
                elif kind in ("semantic_cache", "response_cache"):
                    self._cache_plugin(conf, ppath, pitem, body)
                elif kind == "fast_response":
                    self._fast_response_plugin(conf, ppath, pitem, body)
                elif kind in ("jailbreak", "pii"):
                    known = {"enabled", "threshold", "include_history"} | (
                        {"pii_types_allowed"} if kind == "pii" else set()
                    )
                    self.fields(conf, f"{ppath}.configuration", known)
                    spec = self._guard_signal(kind, conf, ppath, pitem)
                    if spec is not None:
                        guards.append((kind, spec))
                else:
                    self.unmapped(pitem, ppath, f"no counterpart: VSR's {plugin.get('type')} plugin")
        if headers:
            plugins["set_headers"] = headers
        if plugins:
            body["plugins"] = plugins
        if body["action"]["type"] != "route" and "cache" in body:
            del body["cache"]
        return guards

    def _system_prompt_plugin(self, conf: Mapping[str, Any], ppath: str, pitem: str, plugins: dict[str, Any]) -> None:
        self.fields(conf, f"{ppath}.configuration", {"enabled", "system_prompt", "mode"})
        content = str(conf.get("system_prompt") or "")
        mode = str(conf.get("mode") or "replace").lower()
        if not content or mode not in ("insert", "replace"):
            self.unmapped(pitem, ppath, f"needs a system_prompt and mode insert|replace, got mode {mode!r}")
            return
        plugins["system_prompt"] = {"content": content, "mode": mode}
        self.mapped(pitem, ppath, f"as system_prompt plugin (mode {mode})")

    def _header_plugin(self, conf: Mapping[str, Any], ppath: str, pitem: str, headers: dict[str, str]) -> None:
        self.fields(conf, f"{ppath}.configuration", {"add", "update", "delete"})
        for op in ("add", "update"):
            for h, pair in enumerate(as_list(conf.get(op))):
                pair = as_mapping(pair)
                hpath = f"{ppath}.configuration.{op}[{h}]"
                hname, value = str(pair.get("name", "")), str(pair.get("value", ""))
                try:
                    Plugins.model_validate({"set_headers": {hname: value}})
                except ValidationError as exc:
                    self.unmapped(f"{pitem} {op} {hname}", hpath, exc.errors()[0]["msg"].removeprefix("Value error, "))
                    continue
                headers[hname.lower()] = value
                if op == "add":
                    self.approx(
                        f"{pitem} add {hname}",
                        hpath,
                        "approximated as set_headers (replaces a client-sent header of that name)",
                    )
                else:
                    self.mapped(f"{pitem} update {hname}", hpath, "as set_headers")
        for h, hname in enumerate(as_list(conf.get("delete"))):
            self.unmapped(
                f"{pitem} delete {hname}",
                f"{ppath}.configuration.delete[{h}]",
                "no counterpart: our plugins cannot remove request headers (Envoy's header_mutation can)",
            )

    def _cache_plugin(self, conf: Mapping[str, Any], ppath: str, pitem: str, body: dict[str, Any]) -> None:
        self.fields(
            conf,
            f"{ppath}.configuration",
            {"enabled", "similarity_threshold", "ttl_seconds", "semantic"},
            {k: "no counterpart: " + k for k in ("mode", "scope", "request_controls", "personalized", "revision")},
        )
        cache: dict[str, Any] = {"enabled": bool(conf.get("enabled", True))}
        similarity = conf.get("similarity_threshold", as_mapping(conf.get("semantic")).get("similarity_threshold"))
        if similarity is not None:
            cache["similarity"] = float(similarity)
        ttl = conf.get("ttl_seconds")
        if ttl == 0:
            cache["enabled"] = False  # VSR: a TTL of 0 means "do not cache"
        elif isinstance(ttl, int) and ttl > 0:
            cache["ttl_s"] = min(ttl, 30 * 86400)
        try:
            CacheSpec.model_validate(cache)
        except ValidationError as exc:
            self.unmapped(pitem, ppath, f"could not be expressed: {first_error(exc)}")
            return
        body["cache"] = cache
        self.approx(pitem, ppath, f"approximated as cache {cache}: similarity measured with MiniLM")

    def _fast_response_plugin(self, conf: Mapping[str, Any], ppath: str, pitem: str, body: dict[str, Any]) -> None:
        self.fields(conf, f"{ppath}.configuration", {"enabled", "message"})
        message = str(conf.get("message") or "This request was answered by the router.")
        body["action"] = {"type": "clarify", "message": message}
        self.mapped(pitem, ppath, "as a clarify action (the message is returned as the assistant's reply)")

    def _guard_signal(self, kind: str, conf: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        """A per-decision jailbreak / PII plugin: its signal, for a reject decision right above."""
        name = f"{kind}_guard"
        if kind == "jailbreak":
            threshold = float(conf.get("threshold") or 0.5)
            spec: dict[str, Any] | None = {
                "name": name,
                "type": "jailbreak",
                "threshold": min(max(threshold, 0.01), 1.0),
            }
            self.approx(
                item,
                path,
                "approximated as a reject decision just above it on our jailbreak detector (not VSR's classifier)",
            )
        else:
            spec = self._pii_spec(name, conf, path, item)
        if spec is None:
            return None
        return self._register(spec, path, item)

    def _category_cache(self, cat: Mapping[str, Any], path: str, item: str, body: dict[str, Any]) -> None:
        """A category's semantic_cache_enabled / semantic_cache_similarity_threshold as its decision's cache."""
        keys = [k for k in ("semantic_cache_enabled", "semantic_cache_similarity_threshold") if k in cat]
        if not keys:
            return
        cache: dict[str, Any] = {}
        if "semantic_cache_enabled" in cat:
            cache["enabled"] = bool(cat["semantic_cache_enabled"])
        threshold = cat.get("semantic_cache_similarity_threshold")
        try:
            if threshold is not None:
                if isinstance(threshold, bool):
                    raise ValueError(f"similarity {threshold!r} is not a number")
                cache["similarity"] = float(threshold)
            CacheSpec.model_validate(cache)
        except (ValueError, TypeError) as exc:
            self.unmapped(f"{item} cache", f"{path}.{keys[0]}", f"could not be expressed: {first_error(exc)}")
            return
        body["cache"] = cache
        self.approx(
            f"{item} cache",
            f"{path}.{keys[0]}",
            f"approximated as the decision's cache {cache}: similarity measured with MiniLM",
        )

    def _legacy_category_decisions(self, cfg: Mapping[str, Any]) -> list[VsrDecision]:
        """Flat configs without `decisions`: each category routes to its models by score."""
        out: list[VsrDecision] = []
        for i, cat in enumerate(as_list(cfg.get("categories"))):
            with self.guarded("category route", f"categories[{i}]"):
                cat = as_mapping(cat)
                scores = sorted(
                    (s for s in as_list(cat.get("model_scores")) if isinstance(s, Mapping)),
                    key=lambda s: -float(s.get("score") or 0),
                )
                name = str(cat.get("name", i))
                leaf = self.leaves.get(("domains", name))
                path = f"categories[{i}]"
                if not scores:
                    continue
                if leaf is None:
                    self.unmapped(
                        f"category route {name}",
                        f"{path}.model_scores",
                        self.leaf_missing.get(("domains", name), NEEDS_DOMAIN),
                    )
                    continue
                models = [str(s["model"]) for s in scores if str(s.get("model")) in self.model_cards]
                if not models:
                    self.unmapped(f"category route {name}", f"{path}.model_scores", "no known model")
                    continue
                body: dict[str, Any] = {"action": {"type": "route", "models": models}}
                if cat.get("system_prompt"):
                    body["plugins"] = {
                        "system_prompt": {
                            "content": str(cat["system_prompt"]),
                            "mode": str(cat.get("system_prompt_mode") or "replace"),
                        }
                    }
                top = next(j for j, s in enumerate(as_list(cat.get("model_scores"))) if s is scores[0])
                reasoning = self._route_reasoning(
                    [(scores[0].get("use_reasoning"), cat.get("reasoning_effort"))],
                    path,
                    f"category route {name}",
                    (f"model_scores[{top}].use_reasoning", "reasoning_effort"),
                )
                if reasoning is not None:
                    body["action"]["reasoning"] = reasoning
                self._category_cache(cat, path, f"category route {name}", body)
                self.mapped(
                    f"category route {name}", f"{path}.model_scores", f"as decision routing to {models} (by score)"
                )
                out.append(VsrDecision(name, path, 0, dict(leaf), body))
        return out


def _weight(factors: Mapping[str, Any], name: str) -> float:
    """A multi-factor weight by name (`cost`, `cost_weight`), 0 when absent or not a number."""
    for key in (name, f"{name}_weight"):
        value = factors.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return 0.0
