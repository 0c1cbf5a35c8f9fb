"""The VSR vocabulary the importer reads: section and field names, and what each maps onto."""

from __future__ import annotations

import re
from typing import Literal, get_args

from extproc.policy.reasoning import BUILTIN_FAMILIES, Effort
from extproc.policy.schema import NAME_PATTERN

Outcome = Literal["mapped", "approximated", "unmapped"]
Layout = Literal["current", "flat"]

NAME_RE = re.compile(NAME_PATTERN)
ADDRESS_RE = re.compile(r"^[^:\s/]+:\d{1,5}$")
IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # one key of chat_template_kwargs
HAN_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
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
    # The Responses API's spelling of the same field: our gpt_oss row writes reasoning_effort on Chat
    # Completions and reasoning.effort on Responses, whichever API the request uses.
    ("reasoning_effort", "reasoning.effort"): "gpt_oss",
}
# VSR family names used without a `reasoning_families` entry -> our built-in family.
VSR_FAMILIES = {
    "qwen3": "qwen3",
    "deepseek": "deepseek",
    "gpt-oss": "gpt_oss",
    "gpt_oss": "gpt_oss",
    "gpt": "gpt_oss",
    "openai": "openai",
}
assert set(REASONING_FAMILIES.values()) | set(VSR_FAMILIES.values()) <= set(BUILTIN_FAMILIES)
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
    "structure": "structure",
    "conversation": "conversation",
    "kb": "kb",
}
# Signal sections we know VSR has and cannot carry.
UNMAPPED_SIGNALS: dict[str, str] = {
    "fact_check": "no counterpart: VSR's fact-check classifier",
    "user_feedback": "no counterpart: VSR's user-feedback classifier",
    "preference": "no counterpart: VSR's LLM-judged route preference (one with `examples` becomes a semantic signal)",
    "latency": "no counterpart: latency (TPOT) signals",
    "structure": "no counterpart: VSR's structure features (our `structure` signal counts code blocks, tools, turns)",
    "modality": "no counterpart: output-modality (AR / diffusion) classification",
    "authz": "no counterpart: role bindings (authorization happens before the router)",
    "safety": "no counterpart: VSR's content-safety classifier",
    "hallucination": "no counterpart: response hallucination detection",
    "kb": "no counterpart: knowledge-base signals",
    "conversation": "no counterpart: conversation features (a count of user messages with gte / gt becomes a "
    "`structure` signal's turns_min)",
    "events": "no counterpart: event signals",
    "metadata": "no counterpart: request metadata predicates",
    "classifier": "no counterpart: VSR classifier deployments (bring a local checkpoint as a `classifier` signal)",
    "projection": "no counterpart: projections (weighted scores and bands)",
}
SECTION_OF_FLAT: dict[str, str] = {
    "keyword_rules": "keywords",
    "embedding_rules": "embeddings",
    "categories": "domains",
    "language_rules": "language",
    "context_rules": "context",
    "complexity_rules": "complexity",
    "jailbreak": "jailbreak",
    "pii": "pii",
    "preference_rules": "preference",
    "reask_rules": "reask",
}
FLAT_UNMAPPED_SECTIONS: dict[str, str] = {
    "fact_check_rules": "fact_check",
    "user_feedback_rules": "user_feedback",
    "latency_rules": "latency",
    "structure_rules": "structure",
    "modality_rules": "modality",
    "role_bindings": "authz",
}
CANON_SECTIONS: dict[str, str] = {
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
SECTION_ITEM = {
    "keywords": "keyword",
    "embeddings": "embedding",
    "domains": "domain",
    "language": "language",
    "context": "context",
    "complexity": "complexity",
    "jailbreak": "jailbreak",
    "pii": "pii",
    "input_modality": "input_modality",
    "preference": "preference",
    "conversation": "conversation",
    "structure": "structure",
    "kb": "kb",
    "reask": "reask",
}
# Sections of UNMAPPED_SIGNALS whose rules carry over in one form (the others are reported with its reason).
PARTLY_MAPPED_SECTIONS = frozenset({"preference", "conversation", "structure", "kb"})
NO_COUNTERPART_TOP = {
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
    # older flat layouts
    "router": "no counterpart: VSR's LoRA / classifier path-selection tuning",
    "metrics": "no counterpart here: metrics are set in our settings",
    "entropy_threshold": "no counterpart: entropy-based reasoning decisions (set reasoning on a decision)",
    "high_entropy_threshold": "no counterpart: entropy-based reasoning decisions (set reasoning on a decision)",
}
FLAT_TOP = {
    "vllm_endpoints",
    "model_config",
    "backend_models",
    "default_model",
    "decisions",
    "reasoning_families",
    "default_reasoning_effort",
    "semantic_cache",
    "prompt_guard",
    "classifier",
    "auto_model_name",
    "strategy",
    *SECTION_OF_FLAT,
    *FLAT_UNMAPPED_SECTIONS,
}
CURRENT_TOP = {"version", "providers", "routing", "global"}
# Per-category policy keys of the flat layout (system prompt mode, cache, jailbreak and PII switches).
DOMAIN_POLICY_KEYS = (
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
