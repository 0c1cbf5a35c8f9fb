"""VSR models, model cards, reasoning families, aliases and the response cache -> our models and cache."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from extproc.policy.schema import CachePolicy
from extproc.tools.vsr_import.reading import (
    VsrModel,
    as_list,
    as_mapping,
    first_error,
    has_vision,
    parse_tokens,
    sanitize_name,
    str_or_none,
)
from extproc.tools.vsr_import.state import ImporterState
from extproc.tools.vsr_import.vocabulary import (
    ADDRESS_RE,
    IDENTIFIER_RE,
    NEEDS_REASONING_FAMILY,
    NO_COUNTERPART_TOP,
    REASONING_FAMILIES,
    VSR_FAMILIES,
)

ENDPOINT_TYPE = "no counterpart: endpoint / backend type (Envoy reaches every upstream the same way)"
QUALITY_SCORE = "no counterpart: quality scores for learned selection"


class ModelMapper(ImporterState):
    # -- models
    def _flat_models(self, cfg: Mapping[str, Any]) -> None:
        backend = as_mapping(cfg.get("backend_models"))  # some flat configs nest both sections here
        if "backend_models" in cfg:
            self.fields(backend, "backend_models", {"vllm_endpoints", "model_config"})
        sections = (("", cfg), ("backend_models.", backend))
        endpoints: dict[str, tuple[str | None, str, str]] = {}  # name -> (address, path, type)
        for prefix, section in sections:
            for i, ep in enumerate(as_list(section.get("vllm_endpoints"))):
                with self.guarded("endpoint", f"{prefix}vllm_endpoints[{i}]"):
                    self._flat_endpoint(ep, f"{prefix}vllm_endpoints[{i}]", endpoints)
        for prefix, section in sections:
            for name, params in as_mapping(section.get("model_config")).items():
                path = f"{prefix}model_config[{name!r}]"
                with self.guarded(f"model {name}", path):
                    self._flat_model(str(name), as_mapping(params), path, endpoints)
        if not self.models:
            self._models_named_by_routes(cfg, endpoints)
        self._read_families(cfg.get("reasoning_families"), "reasoning_families")

    def _read_families(self, raw: Any, path: str) -> None:
        """VSR's `reasoning_families` table (name -> type, parameter), wherever the layout keeps it."""
        for name, fam in as_mapping(raw).items():
            fam = as_mapping(fam)
            self.families[str(name)] = (str(fam.get("type", "")), str(fam.get("parameter", "")))
            self.family_paths[str(name)] = f"{path}.{name}"

    def _flat_endpoint(self, ep: Any, path: str, endpoints: dict[str, tuple[str | None, str, str]]) -> None:
        if not isinstance(ep, Mapping) or not ep.get("name"):
            self.unmapped("endpoint", path, "an endpoint needs a name")
            return
        self.fields(
            ep,
            path,
            {"name", "address", "port", "weight"},
            {
                "models": "no counterpart: the models an endpoint serves come from model_config's preferred_endpoints",
                "type": ENDPOINT_TYPE,
            },
        )
        address = f"{ep.get('address')}:{ep.get('port')}" if ep.get("address") and ep.get("port") else None
        if address is not None and not ADDRESS_RE.match(address):
            self.unmapped(
                f"endpoint {ep['name']}",
                path,
                f"address {address!r} is not host:port (IPv6 and URLs are not carried)",
            )
            address = None
        endpoints[str(ep["name"])] = (address, path, str(ep.get("type") or ""))
        self.mapped(
            f"endpoint {ep['name']}",
            path,
            f"as model address {address} and its cluster" if address else "as a cluster without an address",
        )
        if "weight" in ep:
            self.mapped(f"endpoint {ep['name']} weight", f"{path}.weight", "not needed with one endpoint per cluster")

    def _flat_model(
        self, name: str, params: Mapping[str, Any], path: str, endpoints: dict[str, tuple[str | None, str, str]]
    ) -> None:
        model = VsrModel(vsr_name=name, path=path, upstream_model=name)
        self.fields(
            params,
            path,
            {
                "preferred_endpoints",
                "reasoning_family",
                "description",
                "capabilities",
                "param_size",
                "context_window_size",
                "external_model_ids",
            },
            {
                "pricing": "no counterpart: pricing (routes are ordered lists, not cost-optimised)",
                "loras": "not needed: a LoRA named by a modelRef becomes its own model card",
                "access_key": "no counterpart: upstream credentials belong in Envoy, not the policy",
                "pii_policy": "no counterpart: per-model PII policy (write a decision with a `pii` signal)",
                "api_format": "no counterpart: upstream API format",
                "quality_score": QUALITY_SCORE,
            },
        )
        preferred = [str(p) for p in as_list(params.get("preferred_endpoints"))]
        known = [p for p in preferred if p in endpoints]
        if known:
            model.cluster_hint = known[0]
            model.address = endpoints[known[0]][0]
            if len(known) > 1:
                self.approx(
                    f"model {name} endpoints",
                    f"{path}.preferred_endpoints",
                    f"approximated: routed to {known[0]} only; add the others to its Envoy cluster",
                )
        elif preferred:
            self.unmapped(f"model {name} endpoints", f"{path}.preferred_endpoints", f"unknown endpoint(s) {preferred}")
        elif len(endpoints) == 1:
            only = next(iter(endpoints))
            model.cluster_hint, model.address = only, endpoints[only][0]
        if "external_model_ids" in params:
            kind = endpoints[model.cluster_hint][2] if model.cluster_hint in endpoints else ""
            self._external_model_id(model, params["external_model_ids"], f"{path}.external_model_ids", kind)
        model.reasoning_family = str_or_none(params.get("reasoning_family"))
        model.family_path = f"{path}.reasoning_family"
        model.description = str(params.get("description") or "")
        model.image = has_vision(params.get("capabilities"))
        self._context_window(model, params.get("context_window_size"), f"{path}.context_window_size")
        self.models[name] = model

    def _models_named_by_routes(
        self, cfg: Mapping[str, Any], endpoints: dict[str, tuple[str | None, str, str]]
    ) -> None:
        """Flat configs without model_config: VSR routes to the models its routes name (category model_scores,
        decisions' modelRefs, default_model); each becomes a model with VSR's defaults."""
        named: dict[str, str] = {}  # model -> where it is first named
        for i, cat in enumerate(as_list(cfg.get("categories"))):
            for j, score in enumerate(as_list(as_mapping(cat).get("model_scores"))):
                named.setdefault(str(as_mapping(score).get("model") or ""), f"categories[{i}].model_scores[{j}]")
        for i, d in enumerate(as_list(cfg.get("decisions"))):
            for j, ref in enumerate(as_list(as_mapping(d).get("modelRefs"))):
                named.setdefault(str(as_mapping(ref).get("model") or ""), f"decisions[{i}].modelRefs[{j}]")
        if isinstance(cfg.get("default_model"), str | int | float):
            named.setdefault(str(cfg["default_model"]), "default_model")
        named.pop("", None)
        only = next(iter(endpoints)) if len(endpoints) == 1 else None
        for name, path in named.items():
            model = VsrModel(vsr_name=name, path=path, upstream_model=name, declared=False)
            if only is not None:
                model.cluster_hint, model.address = only, endpoints[only][0]
            self.models[name] = model

    def _external_model_id(self, model: VsrModel, raw: Any, path: str, kind: str) -> None:
        """VSR's `external_model_ids` (backend type -> the upstream's model name) as the card's upstream_model."""
        ids = {str(k): str(v) for k, v in as_mapping(raw).items() if str_or_none(v)}
        if not ids:
            self.unmapped(f"model {model.vsr_name} external model ids", path, "no model id given")
            return
        if kind in ids or len(ids) == 1:
            model.upstream_model = ids.get(kind) or next(iter(ids.values()))
            self.mapped(f"model {model.vsr_name} external model id", path, f"as upstream_model {model.upstream_model}")
            return
        first = next(iter(ids))
        model.upstream_model = ids[first]
        self.approx(
            f"model {model.vsr_name} external model id",
            path,
            f"approximated: the {first} id {ids[first]!r} as upstream_model (one upstream name per model)",
        )

    def _current_models(self, cfg: Mapping[str, Any], routing: Mapping[str, Any]) -> None:
        providers = as_mapping(cfg.get("providers"))
        self.fields(providers, "providers", {"models", "defaults"})
        defaults = as_mapping(providers.get("defaults"))
        self.fields(
            defaults,
            "providers.defaults",
            {"model", "default_model", "reasoning_effort", "default_reasoning_effort", "reasoning_families"},
        )
        self._read_families(defaults.get("reasoning_families"), "providers.defaults.reasoning_families")
        for i, raw in enumerate(as_list(providers.get("models"))):
            with self.guarded("provider model", f"providers.models[{i}]"):
                self._provider_model(raw, f"providers.models[{i}]")
        for i, card in enumerate(as_list(routing.get("modelCards"))):
            with self.guarded("model card", f"routing.modelCards[{i}]"):
                self._model_card(card, f"routing.modelCards[{i}]")

    def _provider_model(self, raw: Any, path: str) -> None:
        if not isinstance(raw, Mapping) or not raw.get("name"):
            self.unmapped("provider model", path, "a provider model needs a name")
            return
        name = str(raw["name"])
        self.fields(
            raw,
            path,
            {"name", "provider_model_id", "backend_refs", "reasoning", "reasoning_family", "external_model_ids"},
            {
                "api_format": "no counterpart: upstream API format",
                "reliability": "no counterpart here: retries and health checks are Envoy cluster settings",
                "control": "no counterpart here: per-model timeouts are Envoy route settings (see envoy-config)",
                "pricing": "no counterpart: pricing",
                "catalog": "no counterpart: VSR's built-in model catalog",
            },
        )
        model = VsrModel(vsr_name=name, path=path, upstream_model=str_or_none(raw.get("provider_model_id")) or name)
        refs = [r for r in as_list(raw.get("backend_refs")) if isinstance(r, Mapping)]
        first: Mapping[str, Any] = {}
        if refs:
            refs_sorted = sorted(enumerate(refs), key=lambda p: -float(p[1].get("weight") or 0))
            first_index, first = refs_sorted[0]
            ref_path = f"{path}.backend_refs[{first_index}]"
            self._backend_ref(model, first, ref_path)
            cluster = model.cluster_hint or name
            for j, other in refs_sorted[1:]:
                self.approx(
                    f"model {name} backend {other.get('name', j)}",
                    f"{path}.backend_refs[{j}]",
                    f"approximated: one address per model; add it to Envoy cluster {cluster}",
                )
        if "external_model_ids" in raw:
            if raw.get("provider_model_id"):
                self.mapped(
                    f"model {name} external model ids",
                    f"{path}.external_model_ids",
                    "not needed: provider_model_id is the upstream model",
                )
            else:
                kind = str(first.get("provider") or first.get("type") or "")
                self._external_model_id(model, raw["external_model_ids"], f"{path}.external_model_ids", kind)
        if raw.get("reasoning_family") is not None:
            model.reasoning_family = str_or_none(raw.get("reasoning_family"))
            model.family_path = f"{path}.reasoning_family"
        reasoning = as_mapping(raw.get("reasoning"))
        if reasoning:
            if reasoning.get("family") is not None:
                model.family_path = f"{path}.reasoning.family"
                model.reasoning_family = str_or_none(reasoning.get("family"))
            if reasoning.get("family") is None and reasoning.get("parameter"):
                self.families[f"{name}-family"] = (
                    str(reasoning.get("type", "")),
                    str(reasoning.get("parameter")),
                )
                self.family_paths[f"{name}-family"] = f"{path}.reasoning"
                model.reasoning_family = f"{name}-family"
        self.models[name] = model

    def _model_card(self, card: Any, path: str) -> None:
        if not isinstance(card, Mapping) or not card.get("name"):
            self.unmapped("model card", path, "a model card needs a name")
            return
        name = str(card["name"])
        found = self.models.get(name)
        model = found if found is not None else VsrModel(vsr_name=name, path=path, upstream_model=name)
        self.models[name] = model
        self.fields(
            card,
            path,
            {
                "name",
                "context_window_size",
                "modalities",
                "capabilities",
                "description",
                "modality",
                "reasoning_family_ref",
            },
            {
                k: "no counterpart: model catalog metadata"
                for k in (
                    "display_name",
                    "publisher",
                    "presentation",
                    "distribution",
                    "family",
                    "revision",
                    "released_at",
                    "knowledge_cutoff",
                    "lifecycle",
                    "param_size",
                    "max_output_tokens",
                    "tags",
                    "loras",
                )
            }
            | {"quality_score": QUALITY_SCORE},
        )
        self._context_window(model, card.get("context_window_size"), f"{path}.context_window_size")
        # A card's `reasoning_family_ref` names a family of providers.defaults.reasoning_families (the
        # model's own `reasoning_family` / `reasoning.family`, when written, wins).
        family_ref = str_or_none(card.get("reasoning_family_ref"))
        if family_ref and not model.reasoning_family:
            model.reasoning_family = family_ref
            model.family_path = f"{path}.reasoning_family_ref"
        inputs = as_mapping(card.get("modalities")).get("input")
        model.image = (
            model.image
            or has_vision(card.get("capabilities"))
            or "image" in [str(x).lower() for x in as_list(inputs)]
            or str(card.get("modality", "")).lower() == "omni"
        )
        model.description = str(card.get("description") or model.description)

    def _backend_ref(self, model: VsrModel, ref: Mapping[str, Any], path: str) -> None:
        self.fields(
            ref,
            path,
            {"name", "endpoint", "base_url", "protocol", "weight", "provider"},
            {
                "api_key_env": "no counterpart: upstream credentials belong in Envoy",
                "api_key": "no counterpart: upstream credentials belong in Envoy",
                "auth_header": "no counterpart: upstream credentials belong in Envoy",
                "auth_prefix": "no counterpart: upstream credentials belong in Envoy",
                "extra_headers": "no counterpart: per-backend headers (use a decision's set_headers)",
                "api_version": "no counterpart: provider API version",
                "chat_path": "no counterpart: upstream path rewriting",
                "type": ENDPOINT_TYPE,
            },
        )
        model.cluster_hint = str_or_none(ref.get("name"))
        endpoint = str_or_none(ref.get("endpoint"))
        if endpoint and ADDRESS_RE.match(endpoint):
            model.address = endpoint
            self.mapped(f"model {model.vsr_name} backend", path, f"as address {endpoint}")
            if str(ref.get("protocol", "http")).lower() == "https":
                self.approx(
                    f"model {model.vsr_name} TLS",
                    f"{path}.protocol",
                    "approximated: TLS to the upstream is Envoy's; the address is carried",
                )
            return
        # An endpoint given as a URL (or host:port/path) is read as base_url is: its host and port.
        for key in ("endpoint", "base_url"):
            url = str_or_none(ref.get(key))
            m = re.match(r"^(?:(https?)://)?([^/:\s]+)(?::(\d{1,5}))?(/.*)?$", url or "")
            if m and (m.group(1) or m.group(3)):
                port = m.group(3) or ("443" if m.group(1) == "https" else "80")
                model.address = f"{m.group(2)}:{port}"
                self.approx(
                    f"model {model.vsr_name} backend",
                    f"{path}.{key}",
                    f"approximated as address {model.address}; TLS and path {m.group(4) or '/'} are Envoy's",
                )
                return
        self.unmapped(f"model {model.vsr_name} backend", path, "no usable endpoint (host:port or URL) or base_url")

    def _context_window(self, model: VsrModel, raw: Any, path: str) -> None:
        if raw is None:
            return
        try:
            value = parse_tokens(raw)
        except ValueError as exc:
            self.unmapped(f"model {model.vsr_name} context window", path, str(exc))
            return
        if value and value > 0:
            model.context_window = value
            self.mapped(f"model {model.vsr_name} context window", path, f"as context_window {value}")

    def _reasoning_families(self) -> None:
        for name, (kind, param) in self.families.items():
            ours = REASONING_FAMILIES.get((kind, param))
            path = self.family_paths.get(name, "reasoning_families")
            if not self.caps.model_reasoning_family:
                self.unmapped(f"reasoning family {name}", path, NEEDS_REASONING_FAMILY)
            elif ours is not None:
                self.mapped(f"reasoning family {name}", path, f"as our {ours} family ({kind}.{param})")
            elif kind == "chat_template_kwargs" and IDENTIFIER_RE.match(param):
                # A thinking switch of another chat template: a row of our own families table, as data.
                row_name = sanitize_name(name, self.family_row_names, fallback="family")
                self.family_rows[row_name] = {"switch": f"chat_template_kwargs.{param}"}
                self.custom_families[name] = row_name
                self.mapped(
                    f"reasoning family {name}",
                    path,
                    f"as reasoning_families.{row_name} (switch chat_template_kwargs.{param})",
                )
            else:
                self.unmapped(
                    f"reasoning family {name}",
                    path,
                    f"no counterpart: {kind}.{param} is none of ours {sorted(set(REASONING_FAMILIES.values()))} "
                    "nor a chat_template_kwargs switch",
                )

    def _family_of(self, vsr_family: str) -> str | None:
        if vsr_family in self.families:
            return REASONING_FAMILIES.get(self.families[vsr_family]) or self.custom_families.get(vsr_family)
        return VSR_FAMILIES.get(vsr_family.lower())

    def _model_cards(self) -> list[str]:
        """Our model cards (by VSR model name), with unique names and Envoy-safe cluster names."""
        self.model_cards = {}
        clusters: dict[str, str | None] = {}  # cluster -> address
        taken: set[str] = set()
        for vsr_name, model in self.models.items():
            card: dict[str, Any] = {"name": vsr_name}
            hint = model.cluster_hint or vsr_name
            base = re.sub(r"[^A-Za-z0-9_.\-]+", "_", hint).strip("_") or "model"
            if base in clusters and clusters[base] == model.address and model.cluster_hint:
                cluster = base  # models served by one endpoint share its cluster
            else:
                cluster = sanitize_name(hint, taken, fallback="model")
            clusters[cluster] = model.address
            card["cluster"] = cluster
            card["modalities"] = ["text", "image"] if model.image else ["text"]
            if model.context_window:
                card["context_window"] = model.context_window
            if model.upstream_model and model.upstream_model != vsr_name:
                card["upstream_model"] = model.upstream_model
            if model.address:
                card["address"] = model.address
            if model.description:
                card["description"] = model.description
            if model.reasoning_family:
                path = model.family_path or model.path
                ours = self._family_of(model.reasoning_family)
                if not self.caps.model_reasoning_family:
                    self.unmapped(f"model {vsr_name} reasoning family", path, NEEDS_REASONING_FAMILY)
                elif ours is None:
                    self.unmapped(
                        f"model {vsr_name} reasoning family",
                        path,
                        f"no counterpart: unknown family {model.reasoning_family!r}",
                    )
                else:
                    card["reasoning_family"] = ours  # issue 22's ModelSpec field
                    self.mapped(f"model {vsr_name} reasoning family", path, f"as reasoning_family {ours}")
            why = f"as model {vsr_name} (cluster {cluster}"
            if not model.declared:
                why = f"named here, no model_config entry: {why}"
            why += f", address {model.address})" if model.address else ", no address: pass --upstream to envoy-config)"
            self.mapped(f"model {vsr_name}", model.path, why)
            self.model_cards[vsr_name] = card
        return list(self.model_cards)

    def _model_variant(self, base: str, lora: str) -> str:
        """A model card for `base` served with a LoRA adapter: same cluster, the adapter as body model."""
        key = (base, lora)
        if key not in self.lora_models:
            name = f"{base}@{lora}"
            card = {k: v for k, v in self.model_cards[base].items() if k != "description"}
            card.update({"name": name, "upstream_model": lora})
            self.model_cards[name] = card
            self.lora_models[key] = name
        return self.lora_models[key]

    def _aliases(self, raw: list[str], model_names: list[str]) -> list[str]:
        out: list[str] = []
        lowered = {n.lower() for n in model_names}
        for alias in raw:
            if alias.lower() in lowered:
                self.unmapped(f"alias {alias}", "auto_model_name", "also a model name: the model wins")
            elif alias not in out:
                out.append(alias)
        self.mapped("auto model names", "auto_model_name(s)", f"as aliases {out}")
        return out or ["vsr-auto"]  # every alias was also a model name

    def _current_global(self, glob: Mapping[str, Any]) -> list[str]:
        router = as_mapping(glob.get("router"))
        for key in glob:
            if key not in ("router", "stores"):
                self.unmapped(
                    f"global {key}",
                    f"global.{key}",
                    "no counterpart here: set in our settings or Envoy, or not offered",
                )
        for key in as_mapping(glob.get("stores")):
            if key not in ("response_cache", "semantic_cache"):
                self.unmapped(f"global store {key}", f"global.stores.{key}", "no counterpart: VSR store")
        aliases: list[str] = [str(a) for a in as_list(router.get("auto_model_names"))]
        if router.get("auto_model_name"):
            aliases.insert(0, str(router["auto_model_name"]))
        if not aliases:
            aliases = ["MoM"]
        aliases.append("auto")
        self.fields(
            router,
            "global.router",
            {"auto_model_name", "auto_model_names", "strategy", "include_config_models_in_list", "clear_route_cache"},
            {
                "config_source": NO_COUNTERPART_TOP["config_source"],
                "fallback": "no counterpart: upstream retries are Envoy's (see envoy-config)",
                "streamed_body": "not needed: our ext_proc filter buffers the body (see envoy-config)",
                "skip_processing": "no counterpart: skip-processing rules",
                "model_selection": NO_COUNTERPART_TOP["model_selection"],
                "learning": "no counterpart: online learning and session pinning settings",
            },
        )
        return aliases

    def _cache(self, raw: Mapping[str, Any], path: str) -> dict[str, Any] | None:
        if not raw:
            return None
        self.fields(
            raw,
            path,
            {"enabled", "similarity_threshold", "ttl_seconds"},
            {
                k: "no counterpart here: the cache backend is set in our settings"
                for k in (
                    "backend_type",
                    "max_entries",
                    "eviction_policy",
                    "embedding_model",
                    "redis",
                    "milvus",
                    "backend_config_path",
                    "polarity_guard",
                    "use_hnsw",
                    "hnsw_m",
                    "hnsw_ef_construction",
                )
            },
        )
        cache: dict[str, Any] = {"enabled": bool(raw.get("enabled", False))}
        ttl = raw.get("ttl_seconds")
        try:
            if raw.get("similarity_threshold") is not None:
                cache["similarity"] = float(raw["similarity_threshold"])
            if isinstance(ttl, int) and ttl > 0:
                cache["ttl_s"] = min(ttl, 30 * 86400)
            CachePolicy.model_validate(cache)
        except (ValueError, TypeError) as exc:
            self.unmapped("semantic cache", path, f"could not be expressed: {first_error(exc)}")
            return None
        if ttl == 0:
            self.approx("cache TTL", f"{path}.ttl_seconds", "approximated: 0 (no expiry) as our longest TTL, 30 days")
            cache["ttl_s"] = 30 * 86400
        self.approx(
            "semantic cache",
            path,
            f"approximated as cache {cache}: the similarity is measured with MiniLM, not VSR's embedding model",
        )
        return cache

    def _prompt_guard(self, guard: Mapping[str, Any]) -> None:
        self.prompt_guard = guard if guard and guard.get("enabled") else None
        if guard and not guard.get("enabled"):
            self.mapped("prompt guard", "prompt_guard", "disabled: nothing to carry")
