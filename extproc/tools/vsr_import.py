"""Import a vLLM Semantic Router (VSR) configuration as a policy, with a report of what did not carry.

`import_vsr(config)` is pure: a parsed VSR config (a mapping) in, a policy mapping and report
items out. It reads both of VSR's published layouts:

- current: `providers.models` (backends, provider model ids, reasoning families),
  `routing.modelCards`, `routing.signals` by type, `routing.decisions` with `rules` trees and
  `modelRefs`, `global` (router aliases, the response cache);
- flat (older): top-level `vllm_endpoints`, `model_config`, `default_model`, `categories`,
  `keyword_rules`, `embedding_rules`, `decisions`, `reasoning_families`, `semantic_cache`,
  `prompt_guard`.

Every construct read becomes one report item: mapped exactly, approximated (with what it became),
or not carried over (with why). Keys the importer does not know are reported, never ignored.

Rule trees keep their meaning where they can: an unmapped leaf makes its subtree unknown; an
`OR` (or an `AND` under a `NOT`) may drop unknown children, which only makes the decision fire
less often than VSR's (reported as approximated); anything else drops the decision.

The `domain` and `complexity` signals, a route's `reasoning` and a model's `reasoning_family` are
mapped onto their real specs (extproc.signals.domain, extproc.signals.complexity,
extproc.policy.reasoning), every value checked against them first: a value they would refuse is a
report item, never part of the policy. `Capabilities` still lets a build without those types report
them as "no counterpart yet".
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import yaml
from pydantic import ValidationError

from extproc.models.domain_classifier import SUBJECTS
from extproc.policy.load import PolicyLoader
from extproc.policy.reasoning import BUILTIN_FAMILIES, Effort
from extproc.policy.schema import NAME_PATTERN, CachePolicy, CacheSpec, ModelSpec, Plugins, RouteAction
from extproc.signals.complexity import LEVELS
from extproc.signals.domain import LABEL_PATTERN
from extproc.signals.registry import SignalCatalog

Outcome = Literal["mapped", "approximated", "unmapped"]
Layout = Literal["current", "flat"]

_NAME = re.compile(NAME_PATTERN)
_ADDRESS = re.compile(r"^[^:\s/]+:\d{1,5}$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # one key of chat_template_kwargs
_HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
NEEDS_DOMAIN = "no counterpart yet (needs the domain signal type, issue 22)"
NEEDS_COMPLEXITY = "no counterpart yet (needs the complexity signal type, issue 22)"
NEEDS_ROUTE_REASONING = "no counterpart yet (needs the route `reasoning` setting, issue 22)"
NEEDS_REASONING_FAMILY = "no counterpart yet (needs the model `reasoning_family` field, issue 22)"

# VSR PII type -> our pattern detector's kind (extproc.detectors.pii.PII_KINDS).
PII_TYPES: dict[str, str] = {
    "EMAIL_ADDRESS": "email",
    "PHONE_NUMBER": "phone",
    "CREDIT_CARD": "credit_card",
    "US_SSN": "us_ssn",
    "IBAN_CODE": "iban",
}
# VSR reasoning family (type, parameter) -> our reasoning family name.
REASONING_FAMILIES: dict[tuple[str, str], str] = {
    ("chat_template_kwargs", "enable_thinking"): "qwen3",
    ("chat_template_kwargs", "thinking"): "deepseek",
    ("reasoning_effort", "reasoning_effort"): "gpt_oss",
}
# VSR family names used without a `reasoning_families` entry -> our built-in family.
_BUILTIN_FAMILIES = {
    "qwen3": "qwen3",
    "deepseek": "deepseek",
    "gpt-oss": "gpt_oss",
    "gpt_oss": "gpt_oss",
    "gpt": "gpt_oss",
    "openai": "openai",
}
assert set(REASONING_FAMILIES.values()) | set(_BUILTIN_FAMILIES.values()) <= set(BUILTIN_FAMILIES)
EFFORTS: tuple[str, ...] = get_args(Effort)

# Leaf `type:` in a VSR rule -> the signal section it names.
LEAF_KINDS: dict[str, str] = {
    "keyword": "keywords",
    "embedding": "embeddings",
    "domain": "domains",
    "language": "language",
    "context": "context",
    "complexity": "complexity",
    "jailbreak": "jailbreak",
    "pii": "pii",
    "input_modality": "input_modality",
}
# Signal sections we know VSR has and cannot carry.
UNMAPPED_SIGNALS: dict[str, str] = {
    "fact_check": "no counterpart: VSR's fact-check classifier",
    "user_feedback": "no counterpart: VSR's user-feedback classifier",
    "preference": "no counterpart: VSR's LLM-judged route preference",
    "reask": "no counterpart: VSR's repeated-question detector",
    "latency": "no counterpart: latency (TPOT) signals",
    "structure": "no counterpart: VSR's structure features (our `structure` signal counts code blocks, tools, turns)",
    "modality": "no counterpart: output-modality (AR / diffusion) classification",
    "authz": "no counterpart: role bindings (authorization happens before the router)",
    "safety": "no counterpart: VSR's content-safety classifier",
    "hallucination": "no counterpart: response hallucination detection",
    "kb": "no counterpart: knowledge-base signals",
    "conversation": "no counterpart: conversation features (our `structure` signal has turns_min and tools)",
    "events": "no counterpart: event signals",
    "metadata": "no counterpart: request metadata predicates",
    "classifier": "no counterpart: VSR classifier deployments (bring a local checkpoint as a `classifier` signal)",
    "projection": "no counterpart: projections (weighted scores and bands)",
}
_SECTION_OF_FLAT: dict[str, str] = {
    "keyword_rules": "keywords",
    "embedding_rules": "embeddings",
    "categories": "domains",
    "language_rules": "language",
    "context_rules": "context",
    "complexity_rules": "complexity",
    "jailbreak": "jailbreak",
    "pii": "pii",
}
_FLAT_UNMAPPED_SECTIONS: dict[str, str] = {
    "fact_check_rules": "fact_check",
    "user_feedback_rules": "user_feedback",
    "preference_rules": "preference",
    "latency_rules": "latency",
    "structure_rules": "structure",
    "modality_rules": "modality",
    "role_bindings": "authz",
    "reask_rules": "reask",
}
_CANON_SECTIONS: dict[str, str] = {
    "keywords": "keywords",
    "embeddings": "embeddings",
    "domains": "domains",
    "language": "language",
    "context": "context",
    "complexity": "complexity",
    "jailbreak": "jailbreak",
    "pii": "pii",
    "input_modality": "input_modality",
    "fact_check": "fact_check",
    "user_feedbacks": "user_feedback",
    "preferences": "preference",
    "reasks": "reask",
    "structure": "structure",
    "modality": "modality",
    "role_bindings": "authz",
    "safety": "safety",
    "hallucination": "hallucination",
    "kb": "kb",
    "conversation": "conversation",
    "events": "events",
    "metadata": "metadata",
    "classifiers": "classifier",
    "latency": "latency",
}
_SECTION_ITEM = {
    "keywords": "keyword",
    "embeddings": "embedding",
    "domains": "domain",
    "language": "language",
    "context": "context",
    "complexity": "complexity",
    "jailbreak": "jailbreak",
    "pii": "pii",
    "input_modality": "input_modality",
}
_NO_COUNTERPART_TOP = {
    # flat layout
    "bert_model": "no counterpart: the similarity model is ours (MiniLM), set in settings",
    "embedding_models": "no counterpart: embedding models are set in our settings",
    "tools": "no counterpart: automatic tool selection",
    "api": "no counterpart: VSR's classification API",
    "observability": "no counterpart here: tracing and metrics are set in our settings",
    "response_api": "no counterpart here: conversation state is set in our settings",
    "router_replay": "no counterpart here: our decision log and `extproc replay`",
    "looper": "no counterpart: multi-model looper",
    "external_models": "no counterpart: external LLM classifiers",
    "hallucination_mitigation": "no counterpart: hallucination mitigation",
    "feedback_detector": "no counterpart: user-feedback detector",
    "model_selection": "no counterpart: learned model selection (routes use their ordered model list)",
    "clear_route_cache": "not needed: our router always clears Envoy's route cache",
    "config_source": "no counterpart: policies are files (reloaded while serving)",
    "mom_registry": "no counterpart: model download registry (models load from local directories)",
    "include_config_models_in_list": "not needed: /v1/models lists the policy's models",
    # current layout
    "listeners": "no counterpart here: Envoy listeners come from `extproc envoy-config` (127.0.0.1:8801)",
    "evaluation": "no counterpart: benchmark records",
    "entrypoints": "no counterpart: per-model-name recipes (one policy per router)",
    "recipes": "no counterpart: recipes (import each as its own policy)",
}
_FLAT_TOP = {
    "vllm_endpoints",
    "model_config",
    "default_model",
    "decisions",
    "reasoning_families",
    "default_reasoning_effort",
    "semantic_cache",
    "prompt_guard",
    "classifier",
    "auto_model_name",
    "strategy",
    *_SECTION_OF_FLAT,
    *_FLAT_UNMAPPED_SECTIONS,
}
_CURRENT_TOP = {"version", "providers", "routing", "global"}
# Per-category policy keys of the flat layout (system prompt mode, cache, jailbreak and PII switches).
_DOMAIN_POLICY_KEYS = (
    "system_prompt_enabled",
    "system_prompt_mode",
    "semantic_cache_enabled",
    "semantic_cache_similarity_threshold",
    "jailbreak_enabled",
    "jailbreak_threshold",
    "pii_enabled",
    "pii_threshold",
    "reasoning_effort",
    "reasoning_description",
    "use_reasoning",
)


@dataclass(frozen=True, slots=True)
class ReportItem:
    """One VSR construct and what became of it."""

    item: str  # what it is, e.g. "keyword signal code_words"
    path: str  # where it sits in the VSR config, e.g. "routing.signals.keywords[0]"
    outcome: Outcome
    why: str  # "as ...", "approximated as ...", "no counterpart ...", "needs a model directory ..."


@dataclass(slots=True)
class ImportResult:
    policy: dict[str, Any]
    items: list[ReportItem]
    layout: Layout

    def counts(self) -> dict[str, int]:
        counted = Counter(i.outcome for i in self.items)
        return {k: counted.get(k, 0) for k in ("mapped", "approximated", "unmapped")}

    def not_exact(self) -> list[ReportItem]:
        return [i for i in self.items if i.outcome != "mapped"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What our policy schema can express beyond the base language (filled by other issues)."""

    signal_types: frozenset[str]
    route_reasoning: bool = False
    model_reasoning_family: bool = False

    @classmethod
    def of_schema(cls, catalog: SignalCatalog | None = None) -> Capabilities:
        catalog = catalog or SignalCatalog()
        return cls(
            signal_types=frozenset(catalog.names()),
            route_reasoning="reasoning" in RouteAction.model_fields,
            model_reasoning_family="reasoning_family" in ModelSpec.model_fields,
        )


class VsrImportError(ValueError):
    """The input is not a VSR configuration at all (nothing could be imported)."""


def detect_layout(config: Mapping[str, Any]) -> Layout:
    if any(k in config for k in ("routing", "providers", "global", "listeners")):
        return "current"
    if any(k in config for k in _FLAT_TOP):
        return "flat"
    raise VsrImportError(
        "not a vLLM Semantic Router config: expected `routing` / `providers` (current layout) or "
        "`model_config` / `vllm_endpoints` / `decisions` / `categories` (flat layout) at the top level"
    )


def import_vsr(
    config: Mapping[str, Any], *, capabilities: Capabilities | None = None, catalog: SignalCatalog | None = None
) -> ImportResult:
    """The policy a VSR config describes, and a report item for every construct read."""
    if not isinstance(config, Mapping):
        raise VsrImportError("a VSR config must be a YAML mapping")
    catalog = catalog or SignalCatalog()
    caps = capabilities or Capabilities.of_schema(catalog)
    importer = _Importer(config, caps, catalog)
    return importer.run()


def sanitize_name(raw: str, taken: set[str], *, fallback: str = "item") -> str:
    """`raw` as a policy name ([A-Za-z0-9_.-]), unique among `taken` (which it joins)."""
    base = re.sub(r"[^A-Za-z0-9_.\-]+", "_", raw).strip("_") or fallback
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def parse_tokens(raw: Any) -> int | None:
    """VSR token counts: 8192, "32K", "1.5M"."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        raise ValueError(f"invalid token count {raw!r}")
    if isinstance(raw, int | float):
        return int(raw)
    text = str(raw).strip().upper()
    scale = 1
    if text.endswith("K"):
        scale, text = 1000, text[:-1]
    elif text.endswith("M"):
        scale, text = 1_000_000, text[:-1]
    try:
        return int(float(text) * scale)
    except ValueError:
        raise ValueError(f"invalid token count {raw!r}") from None


# -- the importer ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Model:
    vsr_name: str
    path: str
    upstream_model: str | None = None
    address: str | None = None
    cluster_hint: str | None = None
    context_window: int | None = None
    image: bool = False
    description: str = ""
    reasoning_family: str | None = None


@dataclass(slots=True)
class _Decision:
    vsr_name: str
    path: str
    priority: int
    when: dict[str, Any] | None  # None: catch-all (no conditions)
    body: dict[str, Any]  # action, plugins, cache, description (our fields)
    guards: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (kind, decision body) above it


class _Importer:
    def __init__(self, config: Mapping[str, Any], caps: Capabilities, catalog: SignalCatalog) -> None:
        self.config = config
        self.caps = caps
        self.catalog = catalog
        self.layout: Layout = detect_layout(config)
        self.items: list[ReportItem] = []
        self.models: dict[str, _Model] = {}  # VSR model name -> card
        self.lora_models: dict[tuple[str, str], str] = {}
        self.signals: list[dict[str, Any]] = []  # our signal specs, in order
        self.signal_names: set[str] = set()
        self.leaves: dict[tuple[str, str], dict[str, Any]] = {}  # (section, VSR name) -> our leaf
        self.leaf_missing: dict[tuple[str, str], str] = {}  # (section, VSR name) -> why unmapped
        self.used_signals: set[str] = set()
        self.signal_paths: dict[str, str] = {}
        self.decision_names: set[str] = set()
        self.reasoning_effort_default: str | None = None
        self.families: dict[str, tuple[str, str]] = {}
        self.custom_families: dict[str, str] = {}  # VSR family name -> our families-table row
        self.family_rows: dict[str, dict[str, str]] = {}  # our row name -> ReasoningFamily fields
        self.family_row_names: set[str] = set(BUILTIN_FAMILIES)  # a row of ours never replaces a built-in one
        self.model_cards: dict[str, dict[str, Any]] = {}
        self.prompt_guard: Mapping[str, Any] | None = None
        self.category_model: Mapping[str, Any] = {}
        self.reasoning_of_refs: list[tuple[Any, Any]] = []
        self.decision_paths: dict[str, str] = {}  # our decision name -> its VSR path

    # -- reporting
    def mapped(self, item: str, path: str, why: str) -> None:
        self.items.append(ReportItem(item, path, "mapped", why))

    def approx(self, item: str, path: str, why: str) -> None:
        self.items.append(ReportItem(item, path, "approximated", why))

    def unmapped(self, item: str, path: str, why: str) -> None:
        self.items.append(ReportItem(item, path, "unmapped", why))

    def fields(
        self, raw: Mapping[str, Any], path: str, known: Iterable[str], dropped: Mapping[str, str] | None = None
    ) -> None:
        """Report the keys of `raw` that are neither read (`known`) nor known to have no counterpart."""
        known_set = set(known)
        for key in raw:
            if key in known_set:
                continue
            if dropped and key in dropped:
                self.unmapped(f"field {key}", _join(path, key), dropped[key])
            else:
                self.unmapped(
                    f"unknown key {key}", _join(path, key), "unknown key: not a VSR field this importer knows"
                )

    @contextlib.contextmanager
    def guarded(self, item: str, path: str) -> Iterator[None]:
        """Whatever a malformed construct raises becomes a report item; the import goes on."""
        try:
            yield
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            self.unmapped(item, path, f"could not be read: {exc}")

    # -- the whole document
    def run(self) -> ImportResult:
        cfg = self.config
        if self.layout == "current":
            self.fields(cfg, "", _CURRENT_TOP, _NO_COUNTERPART_TOP)
            routing = _mapping(cfg.get("routing"))
            self._current_models(cfg, routing)
            self._current_signals(_mapping(routing.get("signals")))
            self.fields(
                routing,
                "routing",
                {"modelCards", "signals", "decisions", "strategy"},
                {
                    "model_bindings": "no counterpart: classifier model bindings",
                    "projections": UNMAPPED_SIGNALS["projection"],
                    "candidate_requirements": "no counterpart: candidate requirements",
                    "data_policy": "no counterpart: data policy",
                    "fallback": "no counterpart: upstream retries are Envoy's (see envoy-config)",
                },
            )
            self._strategy(routing.get("strategy"), "routing.strategy")
            decisions_raw, decisions_path = routing.get("decisions"), "routing.decisions"
            glob = _mapping(cfg.get("global"))
            aliases = self._current_global(glob)
            cache = self._cache(
                _mapping(_mapping(glob.get("stores")).get("response_cache")), "global.stores.response_cache"
            )
            defaults = _mapping(_mapping(cfg.get("providers")).get("defaults"))
            default_model = defaults.get("model")
            self.reasoning_effort_default = self._effort(
                defaults.get("reasoning_effort"), "providers.defaults.reasoning_effort", "default reasoning effort"
            )
            default_path = "providers.defaults.model"
        else:
            self.fields(cfg, "", _FLAT_TOP, _NO_COUNTERPART_TOP)
            self._flat_models(cfg)
            self._flat_signals(cfg)
            self._strategy(cfg.get("strategy"), "strategy")
            decisions_raw, decisions_path = cfg.get("decisions"), "decisions"
            name = cfg.get("auto_model_name")
            aliases = [str(name)] if name else ["MoM"]
            aliases.append("auto")
            cache = self._cache(_mapping(cfg.get("semantic_cache")), "semantic_cache")
            default_model = cfg.get("default_model")
            self.reasoning_effort_default = self._effort(
                cfg.get("default_reasoning_effort"), "default_reasoning_effort", "default reasoning effort"
            )
            default_path = "default_model"
            self._prompt_guard(_mapping(cfg.get("prompt_guard")))
        if not self.models:
            raise VsrImportError("the config names no models (model_config / providers.models / modelCards)")
        self._reasoning_families()
        model_names = self._model_cards()
        decisions = self._decisions(decisions_raw, decisions_path)
        if decisions_raw is None and self.layout == "flat":
            decisions += self._legacy_category_decisions(cfg)
        policy: dict[str, Any] = {"version": 1, "name": "imported-from-vsr"}
        policy["description"] = f"Imported from a vLLM Semantic Router config ({self.layout} layout)"
        policy["aliases"] = self._aliases(aliases, model_names)
        # A request naming a configured model gets it (VSR sends it there); ours honours the name only when no
        # decision fires. A difference of the two routers, not of this config: docs/migrating-from-vsr.md says so.
        policy["client_models"] = list(model_names)
        if cache:
            policy["cache"] = cache
        policy["models"] = list(self.model_cards.values())  # LoRA variants the decisions added included
        used_rows = {card.get("reasoning_family") for card in self.model_cards.values()}
        rows = {name: row for name, row in self.family_rows.items() if name in used_rows}
        if rows:
            policy["reasoning_families"] = rows
        default = self._default(decisions, default_model, default_path)
        ordered = self._prioritise(decisions)
        policy["signals"] = []
        policy["decisions"] = ordered
        policy["default"] = default
        self._drop_unreachable(policy)
        used = {leaf for d in policy["decisions"] for leaf in _leaf_signals(d["when"])}
        for spec in self.signals:
            if spec["name"] in used:
                policy["signals"].append(spec)
            else:
                self.mapped(
                    f"{spec['type']} signal {spec['name']}",
                    self.signal_paths.get(spec["name"], ""),
                    "used by no imported decision; left out (it would never run)",
                )
        return ImportResult(policy=policy, items=self.items, layout=self.layout)

    def _effort(self, raw: Any, path: str, item: str) -> str | None:
        """A VSR reasoning effort as one of ours; anything else is reported and left out."""
        if raw is None:
            return None
        if isinstance(raw, str) and raw.lower() in EFFORTS:
            return raw.lower()
        self.unmapped(item, path, f"not carried over: effort {raw!r} is none of {', '.join(EFFORTS)}")
        return None

    def _strategy(self, raw: Any, path: str) -> None:
        if raw is None:
            return
        if str(raw).lower() == "priority":
            self.mapped("decision strategy", path, "as priority order (highest priority wins)")
        else:
            self.approx("decision strategy", path, f"approximated: {raw!r} as priority order")

    # -- models
    def _flat_models(self, cfg: Mapping[str, Any]) -> None:
        endpoints: dict[str, tuple[str | None, str]] = {}
        raw_endpoints = cfg.get("vllm_endpoints") or []
        for i, ep in enumerate(_list(raw_endpoints)):
            with self.guarded("endpoint", f"vllm_endpoints[{i}]"):
                path = f"vllm_endpoints[{i}]"
                if not isinstance(ep, Mapping) or not ep.get("name"):
                    self.unmapped("endpoint", path, "an endpoint needs a name")
                    continue
                self.fields(ep, path, {"name", "address", "port", "weight"})
                address = f"{ep.get('address')}:{ep.get('port')}" if ep.get("address") and ep.get("port") else None
                if address is not None and not _ADDRESS.match(address):
                    self.unmapped(
                        f"endpoint {ep['name']}",
                        path,
                        f"address {address!r} is not host:port (IPv6 and URLs are not carried)",
                    )
                    address = None
                endpoints[str(ep["name"])] = (address, path)
                self.mapped(
                    f"endpoint {ep['name']}",
                    path,
                    f"as model address {address} and its cluster" if address else "as a cluster without an address",
                )
                if "weight" in ep:
                    self.mapped(
                        f"endpoint {ep['name']} weight", f"{path}.weight", "not needed with one endpoint per cluster"
                    )
        for name, params in _mapping(cfg.get("model_config")).items():
            with self.guarded(f"model {name}", f"model_config[{name!r}]"):
                path = f"model_config[{name!r}]"
                params = _mapping(params)
                model = _Model(vsr_name=str(name), path=path, upstream_model=str(name))
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
                    },
                    {
                        "pricing": "no counterpart: pricing (routes are ordered lists, not cost-optimised)",
                        "loras": "not needed: a LoRA named by a modelRef becomes its own model card",
                        "access_key": "no counterpart: upstream credentials belong in Envoy, not the policy",
                        "pii_policy": "no counterpart: per-model PII policy (write a decision with a `pii` signal)",
                        "api_format": "no counterpart: upstream API format",
                        "quality_score": "no counterpart: quality scores for learned selection",
                    },
                )
                preferred = [str(p) for p in _list(params.get("preferred_endpoints"))]
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
                    self.unmapped(
                        f"model {name} endpoints", f"{path}.preferred_endpoints", f"unknown endpoint(s) {preferred}"
                    )
                elif len(endpoints) == 1:
                    only = next(iter(endpoints))
                    model.cluster_hint, model.address = only, endpoints[only][0]
                model.reasoning_family = _str_or_none(params.get("reasoning_family"))
                model.description = str(params.get("description") or "")
                model.image = _has_vision(params.get("capabilities"))
                self._context_window(model, params.get("context_window_size"), f"{path}.context_window_size")
                self.models[str(name)] = model
        for name, fam in _mapping(cfg.get("reasoning_families")).items():
            fam = _mapping(fam)
            self.families[str(name)] = (str(fam.get("type", "")), str(fam.get("parameter", "")))

    def _current_models(self, cfg: Mapping[str, Any], routing: Mapping[str, Any]) -> None:
        providers = _mapping(cfg.get("providers"))
        self.fields(providers, "providers", {"models", "defaults"})
        self.fields(_mapping(providers.get("defaults")), "providers.defaults", {"model", "reasoning_effort"})
        for i, raw in enumerate(_list(providers.get("models"))):
            with self.guarded("provider model", f"providers.models[{i}]"):
                path = f"providers.models[{i}]"
                if not isinstance(raw, Mapping) or not raw.get("name"):
                    self.unmapped("provider model", path, "a provider model needs a name")
                    continue
                name = str(raw["name"])
                self.fields(
                    raw,
                    path,
                    {"name", "provider_model_id", "backend_refs", "reasoning"},
                    {
                        "api_format": "no counterpart: upstream API format",
                        "reliability": "no counterpart here: retries and health checks are Envoy cluster settings",
                        "pricing": "no counterpart: pricing",
                        "external_model_ids": "no counterpart: external model ids",
                        "catalog": "no counterpart: VSR's built-in model catalog",
                    },
                )
                model = _Model(
                    vsr_name=name, path=path, upstream_model=_str_or_none(raw.get("provider_model_id")) or name
                )
                refs = [r for r in _list(raw.get("backend_refs")) if isinstance(r, Mapping)]
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
                reasoning = _mapping(raw.get("reasoning"))
                if reasoning:
                    model.reasoning_family = _str_or_none(reasoning.get("family"))
                    if reasoning.get("family") is None and reasoning.get("parameter"):
                        self.families[f"{name}-family"] = (
                            str(reasoning.get("type", "")),
                            str(reasoning.get("parameter")),
                        )
                        model.reasoning_family = f"{name}-family"
                self.models[name] = model
        for i, card in enumerate(_list(routing.get("modelCards"))):
            with self.guarded("model card", f"routing.modelCards[{i}]"):
                path = f"routing.modelCards[{i}]"
                if not isinstance(card, Mapping) or not card.get("name"):
                    self.unmapped("model card", path, "a model card needs a name")
                    continue
                name = str(card["name"])
                found = self.models.get(name)
                model = found if found is not None else _Model(vsr_name=name, path=path, upstream_model=name)
                self.models[name] = model
                self.fields(
                    card,
                    path,
                    {"name", "context_window_size", "modalities", "capabilities", "description", "modality"},
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
                    },
                )
                self._context_window(model, card.get("context_window_size"), f"{path}.context_window_size")
                inputs = _mapping(card.get("modalities")).get("input")
                model.image = (
                    model.image
                    or _has_vision(card.get("capabilities"))
                    or "image" in [str(x).lower() for x in _list(inputs)]
                    or str(card.get("modality", "")).lower() == "omni"
                )
                model.description = str(card.get("description") or model.description)

    def _backend_ref(self, model: _Model, ref: Mapping[str, Any], path: str) -> None:
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
            },
        )
        model.cluster_hint = _str_or_none(ref.get("name"))
        endpoint = _str_or_none(ref.get("endpoint"))
        if endpoint and _ADDRESS.match(endpoint):
            model.address = endpoint
            self.mapped(f"model {model.vsr_name} backend", path, f"as address {endpoint}")
            if str(ref.get("protocol", "http")).lower() == "https":
                self.approx(
                    f"model {model.vsr_name} TLS",
                    f"{path}.protocol",
                    "approximated: TLS to the upstream is Envoy's; the address is carried",
                )
            return
        base_url = _str_or_none(ref.get("base_url"))
        if base_url:
            m = re.match(r"^(https?)://([^/:\s]+)(?::(\d+))?(/.*)?$", base_url)
            if m:
                port = m.group(3) or ("443" if m.group(1) == "https" else "80")
                model.address = f"{m.group(2)}:{port}"
                self.approx(
                    f"model {model.vsr_name} backend",
                    f"{path}.base_url",
                    f"approximated as address {model.address}; TLS and path {m.group(4) or '/'} are Envoy's",
                )
                return
        self.unmapped(f"model {model.vsr_name} backend", path, "no usable endpoint (host:port) or base_url")

    def _context_window(self, model: _Model, raw: Any, path: str) -> None:
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
            path = f"reasoning_families.{name}" if self.layout == "flat" else "providers.models[].reasoning"
            if not self.caps.model_reasoning_family:
                self.unmapped(f"reasoning family {name}", path, NEEDS_REASONING_FAMILY)
            elif ours is not None:
                self.mapped(f"reasoning family {name}", path, f"as our {ours} family ({kind}.{param})")
            elif kind == "chat_template_kwargs" and _IDENTIFIER.match(param):
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
        return _BUILTIN_FAMILIES.get(vsr_family.lower())

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
                path = f"{model.path}.reasoning_family" if self.layout == "flat" else f"{model.path}.reasoning.family"
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
        router = _mapping(glob.get("router"))
        for key in glob:
            if key not in ("router", "stores"):
                self.unmapped(
                    f"global {key}",
                    f"global.{key}",
                    "no counterpart here: set in our settings or Envoy, or not offered",
                )
        for key in _mapping(glob.get("stores")):
            if key != "response_cache":
                self.unmapped(f"global store {key}", f"global.stores.{key}", "no counterpart: VSR store")
        aliases: list[str] = [str(a) for a in _list(router.get("auto_model_names"))]
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
                "config_source": _NO_COUNTERPART_TOP["config_source"],
                "fallback": "no counterpart: upstream retries are Envoy's (see envoy-config)",
                "streamed_body": "not needed: our ext_proc filter buffers the body (see envoy-config)",
                "skip_processing": "no counterpart: skip-processing rules",
                "model_selection": _NO_COUNTERPART_TOP["model_selection"],
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
            self.unmapped("semantic cache", path, f"could not be expressed: {_first_error(exc)}")
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

    # -- signals
    def _flat_signals(self, cfg: Mapping[str, Any]) -> None:
        classifier = _mapping(cfg.get("classifier"))
        self.category_model = _mapping(classifier.get("category_model"))  # the domain signal reads it
        for key, section in _SECTION_OF_FLAT.items():
            if key in cfg:
                self._section(section, _list(cfg[key]), key)
        for key, kind in _FLAT_UNMAPPED_SECTIONS.items():
            for i, raw in enumerate(_list(cfg.get(key))):
                name = str(_mapping(raw).get("name", i))
                self.unmapped(f"{kind} signal {name}", f"{key}[{i}]", UNMAPPED_SIGNALS[kind])
                self.leaf_missing[(kind, name)] = UNMAPPED_SIGNALS[kind]
        for key in classifier:
            if key not in ("category_model", "pii_model"):
                self.unmapped(f"classifier {key}", f"classifier.{key}", "no counterpart: MCP / external classifiers")
        pii_model = _mapping(classifier.get("pii_model"))
        if pii_model.get("model_id"):
            self.approx(
                "PII model",
                "classifier.pii_model",
                "approximated: our PII patterns (email, phone, cards, SSN, IBAN, passport); names and places need a "
                "`pii.ner` checkpoint directory",
            )

    def _current_signals(self, signals: Mapping[str, Any]) -> None:
        self.category_model = {}
        for key, raw in signals.items():
            section = _CANON_SECTIONS.get(key)
            path = f"routing.signals.{key}"
            if section is None:
                self.unmapped(f"unknown key {key}", path, "unknown key: not a VSR signal type this importer knows")
                continue
            if section in UNMAPPED_SIGNALS:
                for i, item in enumerate(_list(raw)):
                    name = str(_mapping(item).get("name", i))
                    self.unmapped(f"{section} signal {name}", f"{path}[{i}]", UNMAPPED_SIGNALS[section])
                    self.leaf_missing[(section, name)] = UNMAPPED_SIGNALS[section]
                continue
            self._section(section, _list(raw), path)

    def _section(self, section: str, rules: list[Any], path: str) -> None:
        if section == "domains":
            self._domains(rules, path)
            return
        for i, raw in enumerate(rules):
            with self.guarded(f"{_SECTION_ITEM[section]} signal", f"{path}[{i}]"):
                rpath = f"{path}[{i}]"
                if not isinstance(raw, Mapping) or not raw.get("name"):
                    self.unmapped(f"{_SECTION_ITEM[section]} signal", rpath, "a signal needs a name")
                    continue
                name = str(raw["name"])
                item = f"{_SECTION_ITEM[section]} signal {name}"
                build = getattr(self, f"_sig_{section}")
                spec = build(raw, rpath, item)
                if spec is None:
                    self.leaf_missing.setdefault((section, name), f"{item} was not carried over")
                    continue
                spec = self._register(spec, rpath, item, fallback=f"{_SECTION_ITEM[section]}_{i}")
                if spec is None:
                    self.leaf_missing[(section, name)] = f"{item} was not carried over"
                    continue
                self.leaves[(section, name)] = {"signal": spec["name"]}

    def _register(self, spec: dict[str, Any], path: str, item: str, fallback: str = "signal") -> dict[str, Any] | None:
        """Validate `spec` with its type's own schema; add it under a unique name."""
        wanted = str(spec["name"])
        spec["name"] = sanitize_name(wanted, self.signal_names, fallback=fallback)
        entry = self.catalog.get(spec["type"])
        if entry is None:
            self.unmapped(item, path, f"no counterpart: signal type {spec['type']!r} is not in this build")
            self.signal_names.discard(spec["name"])
            return None
        try:
            entry.spec.model_validate(spec)
        except ValidationError as exc:
            problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            self.unmapped(item, path, f"could not be expressed: {problem}")
            self.signal_names.discard(spec["name"])
            return None
        self.signals.append(spec)
        self.signal_paths[spec["name"]] = path
        if spec["name"] != wanted:
            self.mapped(f"signal name {wanted}", path, f"renamed {spec['name']} (policy names: unique, [A-Za-z0-9_.-])")
        return spec

    def _sig_keywords(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        self.fields(
            raw,
            path,
            {
                "name",
                "operator",
                "keywords",
                "case_sensitive",
                "method",
                "description",
                "fuzzy_match",
                "fuzzy_threshold",
                "bm25_threshold",
                "ngram_threshold",
                "ngram_arity",
            },
        )
        if "operator" not in raw:
            self.approx(f"{item} operator", path, "approximated: no operator (VSR requires one) read as OR")
        operator = str(raw.get("operator", "OR")).upper()
        mode = {"AND": "all", "OR": "any", "NOR": "none"}.get(operator)
        if mode is None:
            self.unmapped(item, f"{path}.operator", f"unknown keyword operator {raw.get('operator')!r} (AND, OR, NOR)")
            return None
        keywords = list(dict.fromkeys(str(k) for k in _list(raw.get("keywords")) if str(k)))
        if not keywords:
            self.unmapped(item, f"{path}.keywords", "no keywords")
            return None
        method = str(raw.get("method") or "").lower()
        spec: dict[str, Any] = {"name": raw["name"], "type": "keyword", "keywords": keywords, "mode": mode}
        spec["case_sensitive"] = bool(raw.get("case_sensitive", False))
        notes: list[str] = []
        if method == "regex":
            spec.update(regex=True, whole_word=False)
            notes.append("regular expressions (Go RE2 syntax read as Python `re`)")
        else:
            han = [bool(_HAN.search(k)) for k in keywords]
            if all(han):
                spec["whole_word"] = False
            elif any(han):
                notes.append("approx: keywords with Chinese characters now need word boundaries too")
            if method in ("bm25", "ngram", "fuzzy") or raw.get("fuzzy_match"):
                notes.append(f"approx: {method or 'fuzzy'} matching as exact whole-word matching")
        why = f"as keyword signal (mode {mode}, case_sensitive {spec['case_sensitive']}"
        why += ", regex)" if spec.get("regex") else ")"
        approx = [n.removeprefix("approx: ") for n in notes if n.startswith("approx: ")]
        if approx:
            self.approx(item, path, f"approximated {why}: " + "; ".join(approx))
        else:
            self.mapped(item, path, why + (f"; {notes[0]}" if notes else ""))
        return spec

    def _sig_embeddings(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        self.fields(
            raw,
            path,
            {
                "name",
                "threshold",
                "candidates",
                "aggregation_method",
                "description",
                "query_modality",
                "image_candidates",
                "negative_candidates",
                "negative_image_candidates",
                "prototype_scoring",
            },
        )
        if str(raw.get("query_modality", "text")).lower() != "text":
            self.unmapped(item, f"{path}.query_modality", "no counterpart: image/audio query embeddings")
            return None
        candidates = [str(c) for c in _list(raw.get("candidates")) if str(c).strip()]
        if not candidates:
            self.unmapped(item, f"{path}.candidates", "no text candidates")
            return None
        aggregation = str(raw.get("aggregation_method") or "max").lower()
        method = {"max": "max", "any": "max", "mean": "centroid"}.get(aggregation)
        if method is None:
            self.unmapped(item, f"{path}.aggregation_method", f"unknown aggregation {aggregation!r}")
            return None
        threshold = float(raw.get("threshold", 0.5))
        spec = {
            "name": raw["name"],
            "type": "semantic",
            "exemplars": {str(raw["name"]): candidates},
            "threshold": threshold,
            "method": method,
        }
        notes = [
            f"approximated as semantic signal (method {method}, threshold {threshold}): similarity from MiniLM, "
            "not VSR's embedding model, so re-tune the threshold"
        ]
        if aggregation == "mean":
            notes.append("mean of similarities as similarity to the candidates' centroid")
        dropped = [k for k in ("image_candidates", "negative_candidates", "negative_image_candidates") if raw.get(k)]
        if dropped:
            notes.append(f"{', '.join(dropped)} not carried")
        if raw.get("prototype_scoring"):
            notes.append("prototype scoring not carried")
        self.approx(item, path, "; ".join(notes))
        return spec

    def _sig_language(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        self.fields(raw, path, {"name", "description", "threshold"})
        code = re.split(r"[-_]", str(raw["name"]).strip().lower())[0]
        if len(code) != 2 or not code.isalpha():
            self.unmapped(item, path, f"{raw['name']!r} is not an ISO 639-1 language code")
            return None
        threshold = float(raw.get("threshold") or 0.3)  # VSR: 0 means its default, 0.3
        self.mapped(item, path, f"as language signal (languages [{code}], min_confidence {threshold})")
        return {"name": f"language_{code}", "type": "language", "languages": [code], "min_confidence": threshold}

    def _sig_context(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        self.fields(raw, path, {"name", "description", "min_tokens", "max_tokens"})
        try:
            lo, hi = parse_tokens(raw.get("min_tokens")), parse_tokens(raw.get("max_tokens"))
        except ValueError as exc:
            self.unmapped(item, path, str(exc))
            return None
        spec: dict[str, Any] = {"name": raw["name"], "type": "context"}
        if lo is not None:
            spec["min_tokens"] = lo
        if hi is not None:
            spec["max_tokens"] = hi
        self.mapped(item, path, f"as context signal [{lo}, {hi}] tokens (both count estimated prompt tokens)")
        return spec

    def _sig_jailbreak(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        self.fields(
            raw,
            path,
            {
                "name",
                "threshold",
                "description",
                "method",
                "include_history",
                "jailbreak_patterns",
                "benign_patterns",
                "direction",
            },
        )
        if str(raw.get("direction", "request")).lower() == "response":
            self.unmapped(item, f"{path}.direction", "no counterpart: jailbreak scoring of the model's answer")
            return None
        threshold = float(raw.get("threshold") or 0.5)
        spec: dict[str, Any] = {"name": raw["name"], "type": "jailbreak", "threshold": min(max(threshold, 0.01), 1.0)}
        why = f"approximated as jailbreak signal (threshold {spec['threshold']}): our detector, not VSR's classifier"
        if raw.get("jailbreak_patterns") or raw.get("benign_patterns"):
            why += "; its contrastive patterns are not carried (add them as a semantic signal)"
        self.approx(item, path, why)
        return spec

    def _sig_pii(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        self.fields(raw, path, {"name", "threshold", "include_history", "pii_types_allowed", "description"})
        return self._pii_spec(str(raw["name"]), raw, path, item)

    def _pii_spec(self, name: str, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        allowed = {str(t).upper() for t in _list(raw.get("pii_types_allowed"))}
        allow = sorted({PII_TYPES[t] for t in allowed if t in PII_TYPES})
        if len(allow) == len(set(PII_TYPES.values())):
            self.unmapped(item, path, "every PII type we detect is allowed: the check could never fire")
            return None
        spec: dict[str, Any] = {"name": name, "type": "pii", "allow": allow}
        if raw.get("threshold") is not None:
            spec["min_score"] = float(raw["threshold"])
        self.approx(
            item,
            path,
            f"approximated as pii signal (allow {allow}): our PII patterns, not VSR's model; names, places, dates and "
            "addresses need a `pii.ner` checkpoint directory",
        )
        return spec

    def _sig_input_modality(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        self.fields(raw, path, {"name", "description", "modality"})
        if str(raw.get("modality", "")).lower() != "image":
            self.unmapped(item, path, f"no counterpart: {raw.get('modality')!r} input (images only)")
            return None
        self.mapped(item, path, "as modality signal (at least one image)")
        return {"name": raw["name"], "type": "modality"}

    # -- issue 22's signal types: mapped only when the catalog has them --------------------------
    def _domains(self, rules: list[Any], path: str) -> None:
        if "domain" not in self.caps.signal_types:
            for i, raw in enumerate(rules):
                name = str(_mapping(raw).get("name", i))
                self.unmapped(f"domain {name}", f"{path}[{i}]", NEEDS_DOMAIN)
                self.leaf_missing[("domains", name)] = NEEDS_DOMAIN
            return
        labels_map: dict[str, str] = {}
        names: list[str] = []
        for i, raw in enumerate(rules):
            raw = _mapping(raw)
            if not raw.get("name"):
                continue
            name = str(raw["name"])
            names.append(name)
            legacy = self.layout == "flat" and "decisions" not in self.config  # categories route by model_scores
            self.fields(
                raw,
                f"{path}[{i}]",
                {"name", "description", "mmlu_categories"}
                | ({"model_scores", "system_prompt", "system_prompt_mode", "reasoning_effort"} if legacy else set()),
                {
                    "model_scores": "no counterpart: per-domain model scores (the decisions choose the models)",
                    "system_prompt": "no counterpart: per-domain system prompts (put it on a decision)",
                    **{k: "no counterpart: per-domain policy (put it on a decision)" for k in _DOMAIN_POLICY_KEYS},
                },
            )
            if not LABEL_PATTERN.match(name):
                self.unmapped(
                    f"domain {name}", f"{path}[{i}]", f"not carried over: a label must match {LABEL_PATTERN.pattern}"
                )
                names.pop()
                continue
            subjects = [str(x) for x in _list(raw.get("mmlu_categories"))] or [name]
            # Left unset, the shipped classifier runs: a domain is the subjects of it that it names.
            known = [x for x in subjects if x in SUBJECTS]
            if not known:
                self.unmapped(
                    f"domain {name}",
                    f"{path}[{i}]",
                    f"not carried over: names none of the shipped classifier's subjects ({', '.join(SUBJECTS)})",
                )
                names.pop()
                continue
            for subject in known:
                labels_map[subject] = name
            if len(known) < len(subjects):
                self.approx(
                    f"domain {name}",
                    f"{path}[{i}]",
                    f"approximated as label {name!r} of the domain signal from {known}; "
                    f"not subjects of the shipped classifier: {sorted(set(subjects) - set(known))}",
                )
            else:
                self.mapped(f"domain {name}", f"{path}[{i}]", f"as label {name!r} of the domain signal")
        spec: dict[str, Any] = {"name": "domain", "type": "domain", "labels_map": labels_map}
        model = self.category_model
        mpath = "classifier.category_model"
        threshold = model.get("threshold")
        if threshold is not None:
            if isinstance(threshold, int | float) and not isinstance(threshold, bool) and 0 <= threshold <= 1:
                spec["threshold"] = float(threshold)
                self.mapped("domain threshold", f"{mpath}.threshold", f"as the domain signal's threshold {threshold}")
            else:
                self.unmapped(
                    "domain threshold", f"{mpath}.threshold", f"not carried over: {threshold!r} is not in [0, 1]"
                )
        fallback = model.get("fallback_category")
        if fallback is not None:
            if isinstance(fallback, str) and LABEL_PATTERN.match(fallback):
                spec["fallback"] = fallback
                self.mapped(
                    "domain fallback", f"{mpath}.fallback_category", f"as the domain signal's fallback {fallback!r}"
                )
            else:
                self.unmapped(
                    "domain fallback", f"{mpath}.fallback_category", f"not carried over: {fallback!r} is not a label"
                )
        if model.get("model_id"):
            self.unmapped(
                "domain classifier model",
                "classifier.category_model.model_id",
                f"needs a model directory: VSR names {model['model_id']!r}; set the domain signal's model_dir to a "
                "local checkpoint (left unset, the shipped classifier runs)",
            )
        registered = self._register(spec, path, "domain signal")
        for name in names:
            if registered is None:
                self.leaf_missing[("domains", name)] = "the domain signal could not be expressed"
            else:
                self.leaves[("domains", name)] = {"signal": registered["name"], "label": name}

    def _sig_complexity(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        if "complexity" not in self.caps.signal_types:
            self.unmapped(item, path, NEEDS_COMPLEXITY)
            self.leaf_missing[("complexity", str(raw["name"]))] = NEEDS_COMPLEXITY
            return None
        self.fields(
            raw,
            path,
            {"name", "threshold", "description", "hard", "easy"},
            {
                "prototype_scoring": "no counterpart: prototype scoring",
                "composer": "no counterpart: composer",
                "hard_above": "no counterpart: asymmetric bands",
                "easy_below": "no counterpart: asymmetric bands",
            },
        )
        examples: dict[str, list[str]] = {}
        for level in ("hard", "easy"):
            texts = [c for c in _list(_mapping(raw.get(level)).get("candidates")) if isinstance(c, str) and c.strip()]
            if not texts:
                self.unmapped(
                    item, f"{path}.{level}", f"not carried over: no {level} candidates (text) to compare with"
                )
                return None
            examples[level] = texts
        spec: dict[str, Any] = {"name": raw["name"], "type": "complexity", **examples}
        threshold = raw.get("threshold")
        if threshold is not None:
            # VSR: hard when (best hard similarity - best easy similarity) passes the threshold, easy when the
            # opposite does, else medium; our margin has the same form, with a band on either side.
            if isinstance(threshold, int | float) and not isinstance(threshold, bool) and 0 <= threshold <= 2:
                spec["thresholds"] = {"hard": float(threshold), "easy": float(threshold)}
            else:
                self.unmapped(
                    f"{item} threshold", f"{path}.threshold", f"not carried over: {threshold!r} is not in [0, 2]"
                )
        self.approx(
            item,
            path,
            "approximated as complexity signal: the same hard-minus-easy margin and bands, over MiniLM "
            "similarities (VSR's embedding model differs): re-tune the thresholds",
        )
        return spec

    # -- decisions
    def _decisions(self, raw: Any, path: str) -> list[_Decision]:
        out: list[_Decision] = []
        for i, d in enumerate(_list(raw)):
            with self.guarded("decision", f"{path}[{i}]"):
                dpath = f"{path}[{i}]"
                if not isinstance(d, Mapping) or not d.get("name"):
                    self.unmapped("decision", dpath, "a decision needs a name")
                    continue
                decision = self._decision(d, dpath)
                if decision is not None:
                    out.append(decision)
        return out

    def _decision(self, d: Mapping[str, Any], path: str) -> _Decision | None:
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
        if d.get("tier"):
            self.approx(
                f"{item} tier", f"{path}.tier", "approximated: tiers are not carried; priority alone orders decisions"
            )
        rules = d.get("rules")
        when: dict[str, Any] | None
        if rules is None or (isinstance(rules, Mapping) and not rules.get("conditions") and "type" not in rules):
            when = None  # VSR: an empty rule set matches everything (a catch-all)
        else:
            notes: list[str] = []
            when = self._condition(rules, f"{path}.rules", True, notes)
            if when is None:
                return None
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
        models = self._model_refs(d, path, item)
        if models is None:
            return None
        body["action"] = {"type": "route", "models": models}
        reasoning = self._route_reasoning(self.reasoning_of_refs, path, item)
        if reasoning is not None:
            body["action"]["reasoning"] = reasoning
        self._algorithm(d.get("algorithm"), f"{path}.algorithm", item)
        guards = self._plugins(d, path, item, body)
        self.mapped(item, path, f"as decision (priority from {priority})")
        return _Decision(vsr_name, path, priority, when, body, guards)

    def _condition(self, raw: Any, path: str, positive: bool, notes: list[str]) -> dict[str, Any] | None:
        if not isinstance(raw, Mapping):
            self.unmapped("rule", path, f"a rule must be a mapping, got {raw!r}")
            return None
        if "operator" not in raw and "conditions" not in raw:
            return self._leaf(raw, path)
        op = str(raw.get("operator", "AND")).upper()
        children_raw = _list(raw.get("conditions"))
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
            return None if child is None else {"not": child}
        children = [self._condition(c, f"{path}.conditions[{i}]", positive, notes) for i, c in enumerate(children_raw)]
        kept = [c for c in children if c is not None]
        if len(kept) < len(children):
            # Dropping an unknown child is sound only where it can make the tree fire less, never more.
            may_drop = (op == "OR") == positive
            if not kept or not may_drop:
                return None
            notes.append(f"{len(children) - len(kept)} unmapped branch(es) of an {op} left out (fires less often)")
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
                return {**leaf, "label": level}
            if leaf is not None:
                why = f"unknown complexity level {level!r} (the levels: {', '.join(LEVELS)})"
            else:
                why = self.leaf_missing.get(("complexity", rule), f"unknown complexity signal {rule!r}")
        else:
            leaf = self.leaves.get((section, name))
            if leaf is not None:
                return dict(leaf)
            if section in UNMAPPED_SIGNALS:
                why = self.leaf_missing.get((section, name), UNMAPPED_SIGNALS[section])
            else:
                why = self.leaf_missing.get((section, name), f"unknown {kind_raw or '(no type)'} signal {name!r}")
        self.unmapped(f"rule leaf {kind_raw}:{name}", path, why)
        return None

    def _model_refs(self, d: Mapping[str, Any], path: str, item: str) -> list[str] | None:
        refs = [r for r in _list(d.get("modelRefs")) if isinstance(r, Mapping)]
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
        action = _mapping(d.get("action"))
        if action:
            self.fields(action, f"{path}.action", {"type", "destination"})
            dest = str(action.get("destination", ""))
            if action.get("type") == "route" and dest in self.model_cards:
                models = [dest, *[m for m in models if m != dest]]
                self.mapped(f"{item} action", f"{path}.action", f"as route to {dest} first")
            else:
                self.unmapped(f"{item} action", f"{path}.action", f"unknown action or destination {dict(action)}")
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

    def _algorithm(self, raw: Any, path: str, item: str) -> None:
        algo = _mapping(raw)
        if not algo:
            return
        kind = str(algo.get("type", "static"))
        if kind == "static":
            self.mapped(f"{item} algorithm", path, "as the ordered model list (first model that fits)")
        else:
            self.approx(
                f"{item} algorithm",
                path,
                f"approximated: {kind} selection as the ordered model list (first model that fits)",
            )

    def _plugins(
        self, d: Mapping[str, Any], path: str, item: str, body: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        guards: list[tuple[str, dict[str, Any]]] = []
        plugins: dict[str, Any] = {}
        headers: dict[str, str] = {}
        for k, plugin in enumerate(_list(d.get("plugins"))):
            with self.guarded(f"{item} plugin", f"{path}.plugins[{k}]"):
                ppath = f"{path}.plugins[{k}]"
                plugin = _mapping(plugin)
                kind = str(plugin.get("type", "")).replace("-", "_")
                conf = _mapping(plugin.get("configuration"))
                self.fields(plugin, ppath, {"type", "configuration"})
                pitem = f"{item} plugin {plugin.get('type')}"
                if conf.get("enabled") is False:
                    self.mapped(pitem, ppath, "disabled: nothing to carry")
                    continue
                if kind == "system_prompt":
                    self.fields(conf, f"{ppath}.configuration", {"enabled", "system_prompt", "mode"})
                    content = str(conf.get("system_prompt") or "")
                    mode = str(conf.get("mode") or "replace").lower()
                    if not content or mode not in ("insert", "replace"):
                        self.unmapped(pitem, ppath, f"needs a system_prompt and mode insert|replace, got mode {mode!r}")
                        continue
                    plugins["system_prompt"] = {"content": content, "mode": mode}
                    self.mapped(pitem, ppath, f"as system_prompt plugin (mode {mode})")
                elif kind == "header_mutation":
                    self.fields(conf, f"{ppath}.configuration", {"add", "update", "delete"})
                    for op in ("add", "update"):
                        for h, pair in enumerate(_list(conf.get(op))):
                            pair = _mapping(pair)
                            hpath = f"{ppath}.configuration.{op}[{h}]"
                            hname, value = str(pair.get("name", "")), str(pair.get("value", ""))
                            try:
                                Plugins.model_validate({"set_headers": {hname: value}})
                            except ValidationError as exc:
                                self.unmapped(
                                    f"{pitem} {op} {hname}", hpath, exc.errors()[0]["msg"].removeprefix("Value error, ")
                                )
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
                    for h, hname in enumerate(_list(conf.get("delete"))):
                        self.unmapped(
                            f"{pitem} delete {hname}",
                            f"{ppath}.configuration.delete[{h}]",
                            "no counterpart: our plugins cannot remove request headers (Envoy's header_mutation can)",
                        )
                elif kind in ("semantic_cache", "response_cache"):
                    self.fields(
                        conf,
                        f"{ppath}.configuration",
                        {"enabled", "similarity_threshold", "ttl_seconds", "semantic"},
                        {
                            k: "no counterpart: " + k
                            for k in ("mode", "scope", "request_controls", "personalized", "revision")
                        },
                    )
                    cache: dict[str, Any] = {"enabled": bool(conf.get("enabled", True))}
                    similarity = conf.get(
                        "similarity_threshold", _mapping(conf.get("semantic")).get("similarity_threshold")
                    )
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
                        self.unmapped(pitem, ppath, f"could not be expressed: {_first_error(exc)}")
                        continue
                    body["cache"] = cache
                    self.approx(pitem, ppath, f"approximated as cache {cache}: similarity measured with MiniLM")
                elif kind == "fast_response":
                    self.fields(conf, f"{ppath}.configuration", {"enabled", "message"})
                    message = str(conf.get("message") or "This request was answered by the router.")
                    body["action"] = {"type": "clarify", "message": message}
                    self.mapped(pitem, ppath, "as a clarify action (the message is returned as the assistant's reply)")
                elif kind == "jailbreak":
                    self.fields(conf, f"{ppath}.configuration", {"enabled", "threshold", "include_history"})
                    spec = self._guard_signal("jailbreak", conf, ppath, pitem)
                    if spec is not None:
                        guards.append(("jailbreak", spec))
                elif kind == "pii":
                    self.fields(
                        conf, f"{ppath}.configuration", {"enabled", "threshold", "include_history", "pii_types_allowed"}
                    )
                    spec = self._guard_signal("pii", conf, ppath, pitem)
                    if spec is not None:
                        guards.append(("pii", spec))
                else:
                    self.unmapped(pitem, ppath, f"no counterpart: VSR's {plugin.get('type')} plugin")
        if headers:
            plugins["set_headers"] = headers
        if plugins:
            body["plugins"] = plugins
        if body["action"]["type"] != "route" and "cache" in body:
            del body["cache"]
        return guards

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

    def _legacy_category_decisions(self, cfg: Mapping[str, Any]) -> list[_Decision]:
        """Flat configs without `decisions`: each category routes to its models by score."""
        out: list[_Decision] = []
        for i, cat in enumerate(_list(cfg.get("categories"))):
            with self.guarded("category route", f"categories[{i}]"):
                cat = _mapping(cat)
                scores = sorted(
                    (s for s in _list(cat.get("model_scores")) if isinstance(s, Mapping)),
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
                top = next(j for j, s in enumerate(_list(cat.get("model_scores"))) if s is scores[0])
                reasoning = self._route_reasoning(
                    [(scores[0].get("use_reasoning"), cat.get("reasoning_effort"))],
                    path,
                    f"category route {name}",
                    (f"model_scores[{top}].use_reasoning", "reasoning_effort"),
                )
                if reasoning is not None:
                    body["action"]["reasoning"] = reasoning
                self.mapped(
                    f"category route {name}", f"{path}.model_scores", f"as decision routing to {models} (by score)"
                )
                out.append(_Decision(name, path, 0, dict(leaf), body))
        return out

    # -- ordering, default, reachability
    def _default(self, decisions: list[_Decision], default_model: Any, path: str) -> dict[str, Any]:
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

    def _prioritise(self, decisions: list[_Decision]) -> list[dict[str, Any]]:
        """Our decisions in VSR's order (priority, then name), with unique priorities; guards right above."""
        ranked = sorted(decisions, key=lambda d: (-d.priority, d.vsr_name))
        ties = [p for p, n in Counter(d.priority for d in ranked).items() if n > 1]
        for p in sorted(ties, reverse=True):
            names = [d.vsr_name for d in ranked if d.priority == p]
            self.approx(
                f"priority tie at {p}",
                ", ".join(d.path for d in ranked if d.priority == p),
                f"approximated: VSR ranks tied decisions by match confidence, then name; here by name: {names}",
            )
        global_guard = self._global_guard(decisions)
        rows: list[tuple[str, dict[str, Any], _Decision | None]] = []
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

    def _global_guard(self, decisions: list[_Decision]) -> dict[str, Any] | None:
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
                refs = {_indexes(d.location) for d in text_only}
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
                index = _indexes(dead[-1].location)[0]
                removed = policy["decisions"].pop(index)
                self.unmapped(
                    f"decision {removed['name']}",
                    self.decision_paths.get(removed["name"], "decisions"),
                    "can never fire: higher-priority decisions always match first (in VSR too); left out",
                )
            else:
                return


def _indexes(location: str) -> tuple[int, int]:
    """The decision index and (if any) the model index of a `decisions[3].action.models[1]` location."""
    found = [int(n) for n in re.findall(r"\[(\d+)\]", location)]
    return found[0], (found[1] if len(found) > 1 else -1)


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(map(str, err['loc'])) or 'value'}: {str(err['msg']).removeprefix('Value error, ')}"
    return str(exc)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _mapping(raw: Any) -> Mapping[str, Any]:
    return raw if isinstance(raw, Mapping) else {}


def _list(raw: Any) -> list[Any]:
    return list(raw) if isinstance(raw, list | tuple) else []


def _str_or_none(raw: Any) -> str | None:
    return None if raw is None or raw == "" else str(raw)


def _has_vision(capabilities: Any) -> bool:
    return any(str(c).lower() in ("vision", "multimodal", "image_input") for c in _list(capabilities))


def _leaf_signals(when: Any) -> Iterable[str]:
    if isinstance(when, Mapping):
        if "signal" in when:
            yield str(when["signal"])
        for key in ("all", "any"):
            for child in _list(when.get(key)):
                yield from _leaf_signals(child)
        if "not" in when:
            yield from _leaf_signals(when["not"])


# -- rendering ----------------------------------------------------------------------------------


def _one_line(text: str) -> str:
    """Names and values from the VSR config, safe inside a one-line comment (no line breaks, no controls)."""
    return re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]+", " ", text)


def report_table(items: Iterable[ReportItem]) -> str:
    rows = [(_one_line(i.item), _one_line(i.path), _one_line(i.why)) for i in items]
    if not rows:
        return "(nothing approximated or left out)"
    w1 = min(max(len(r[0]) for r in rows), 48)
    w2 = min(max(len(r[1]) for r in rows), 48)
    lines = [f"{'item':<{w1}}  {'VSR path':<{w2}}  why", f"{'-' * w1}  {'-' * w2}  ---"]
    lines += [f"{a:<{w1}}  {b:<{w2}}  {c}" for a, b, c in rows]
    return "\n".join(lines)


def summary_line(result: ImportResult) -> str:
    c = result.counts()
    total = sum(c.values())
    return (
        f"{total} VSR constructs ({result.layout} layout): {c['mapped']} mapped exactly, "
        f"{c['approximated']} approximated, {c['unmapped']} not carried over"
    )


class _PlainDumper(yaml.SafeDumper):
    """Writes shared sub-trees out in full: no YAML anchors and aliases in a policy a person reads."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render_policy(result: ImportResult, source: str = "") -> str:
    """The policy as YAML, the report at the top as comments."""
    head = [
        f"# Imported by `extproc import-vsr`{f' from {_one_line(source)}' if source else ''}.",
        f"# {summary_line(result)}",
    ]
    not_exact = result.not_exact()
    if not_exact:
        head.append("# Approximated or not carried over:")
        head += [f"#   {line}" if line else "#" for line in report_table(not_exact).splitlines()]
    body = yaml.dump(
        result.policy, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False
    )
    return "\n".join(head) + "\n\n" + body
