"""VSR signals -> our signal specs, each checked by its type's own schema."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from extproc.models.domain_classifier import SUBJECTS
from extproc.signals.domain import LABEL_PATTERN
from extproc.tools.vsr_import.models import ModelMapper
from extproc.tools.vsr_import.reading import as_list, as_mapping, parse_tokens, sanitize_name
from extproc.tools.vsr_import.vocabulary import (
    CANON_SECTIONS,
    DOMAIN_POLICY_KEYS,
    FLAT_UNMAPPED_SECTIONS,
    HAN_RE,
    NEEDS_COMPLEXITY,
    NEEDS_DOMAIN,
    PARTLY_MAPPED_SECTIONS,
    PII_TYPES,
    SECTION_ITEM,
    SECTION_OF_FLAT,
    UNMAPPED_SIGNALS,
)

EMBEDDING_MODEL_KEYS = ("model", "dimension", "quality_priority", "latency_priority")  # VSR's embedding model choice

# Per signal section, the keys of a rule its mapper reads and those known to have no counterpart
# (any other key is reported as unknown before the mapper runs).
SIGNAL_FIELDS: dict[str, tuple[frozenset[str], dict[str, str]]] = {
    "keywords": (
        frozenset(
            {
                "bm25_threshold",
                "case_sensitive",
                "category",
                "description",
                "fuzzy_match",
                "fuzzy_threshold",
                "keywords",
                "method",
                "name",
                "ngram_arity",
                "ngram_threshold",
                "operator",
            }
        ),
        {},
    ),
    "embeddings": (
        frozenset(
            {
                "aggregation_method",
                "candidates",
                "category",
                "description",
                "image_candidates",
                "name",
                "negative_candidates",
                "negative_image_candidates",
                "prototype_scoring",
                "query_modality",
                "threshold",
                "keywords",
                *EMBEDDING_MODEL_KEYS,
            }
        ),
        {},
    ),
    "preference": (frozenset({"description", "examples", "name", "threshold"}), {}),
    "conversation": (frozenset({"description", "feature", "name", "predicate"}), {}),
    "structure": (frozenset({"description", "feature", "name", "predicate"}), {}),
    "kb": (frozenset({"description", "kb", "match", "name", "target", "threshold"}), {}),
    "reask": (frozenset({"description", "lookback_turns", "name", "threshold"}), {}),
    "language": (frozenset({"description", "name", "threshold"}), {}),
    "context": (frozenset({"description", "max_tokens", "min_tokens", "name"}), {}),
    "jailbreak": (
        frozenset(
            {
                "benign_patterns",
                "description",
                "direction",
                "include_history",
                "jailbreak_patterns",
                "method",
                "name",
                "threshold",
            }
        ),
        {},
    ),
    "pii": (frozenset({"description", "include_history", "name", "pii_types_allowed", "threshold"}), {}),
    "input_modality": (frozenset({"description", "modality", "name"}), {}),
    "complexity": (
        frozenset({"composer", "description", "easy", "hard", "name", "threshold"}),
        {
            "prototype_scoring": "no counterpart: prototype scoring",
            "hard_above": "no counterpart: asymmetric bands",
            "easy_below": "no counterpart: asymmetric bands",
        },
    ),
}

CATEGORY_CACHE_KEYS = {"semantic_cache_enabled", "semantic_cache_similarity_threshold"}


def semantic_spec(name: Any, texts: list[str], threshold: float, method: str) -> dict[str, Any]:
    """A VSR rule carried as our `semantic` signal: its texts as the one label's exemplars."""
    return {"name": name, "type": "semantic", "exemplars": {str(name): texts}, "threshold": threshold, "method": method}


# Sections of a signal type a build may lack (issue 22's): (the type, why a rule is not carried without it).
TYPE_NEEDED: dict[str, tuple[str, str]] = {"complexity": ("complexity", NEEDS_COMPLEXITY)}


class SignalMapper(ModelMapper):
    # -- signals
    def _flat_signals(self, cfg: Mapping[str, Any]) -> None:
        classifier = as_mapping(cfg.get("classifier"))
        self.category_model = as_mapping(classifier.get("category_model"))  # the domain signal reads it
        for key, section in SECTION_OF_FLAT.items():
            if key in cfg:
                self._section(section, as_list(cfg[key]), key)
        for key, kind in FLAT_UNMAPPED_SECTIONS.items():
            for i, raw in enumerate(as_list(cfg.get(key))):
                name = str(as_mapping(raw).get("name", i))
                self.unmapped(f"{kind} signal {name}", f"{key}[{i}]", UNMAPPED_SIGNALS[kind])
                self.leaf_missing[(kind, name)] = UNMAPPED_SIGNALS[kind]
        if "keyword_rules" in classifier:  # an older place of the keyword rules
            self._section("keywords", as_list(classifier["keyword_rules"]), "classifier.keyword_rules")
        for key in classifier:
            if key not in ("category_model", "pii_model", "keyword_rules"):
                self.unmapped(f"classifier {key}", f"classifier.{key}", "no counterpart: MCP / external classifiers")
        pii_model = as_mapping(classifier.get("pii_model"))
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
            section = CANON_SECTIONS.get(key)
            path = f"routing.signals.{key}"
            if section is None:
                self.unmapped(f"unknown key {key}", path, "unknown key: not a VSR signal type this importer knows")
                continue
            if section in UNMAPPED_SIGNALS and section not in PARTLY_MAPPED_SECTIONS:
                for i, item in enumerate(as_list(raw)):
                    name = str(as_mapping(item).get("name", i))
                    self.unmapped(f"{section} signal {name}", f"{path}[{i}]", UNMAPPED_SIGNALS[section])
                    self.leaf_missing[(section, name)] = UNMAPPED_SIGNALS[section]
                continue
            self._section(section, as_list(raw), path)

    def _section(self, section: str, rules: list[Any], path: str) -> None:
        if section == "domains":
            self._domains(rules, path)
            return
        for i, raw in enumerate(rules):
            with self.guarded(f"{SECTION_ITEM[section]} signal", f"{path}[{i}]"):
                rpath = f"{path}[{i}]"
                if isinstance(raw, Mapping) and not raw.get("name") and raw.get("category"):
                    raw = {**raw, "name": raw["category"]}  # older rules: `category` names the rule
                if not isinstance(raw, Mapping) or not raw.get("name"):
                    self.unmapped(f"{SECTION_ITEM[section]} signal", rpath, "a signal needs a name")
                    continue
                name = str(raw["name"])
                item = f"{SECTION_ITEM[section]} signal {name}"
                needed = TYPE_NEEDED.get(section)
                if needed is not None and needed[0] not in self.caps.signal_types:
                    self.unmapped(item, rpath, needed[1])
                    self.leaf_missing[(section, name)] = needed[1]
                    continue
                known, dropped = SIGNAL_FIELDS[section]
                self.fields(raw, rpath, known, dropped)
                build = getattr(self, f"_sig_{section}")
                spec = build(raw, rpath, item)
                if spec is None:
                    self.leaf_missing.setdefault((section, name), f"{item} was not carried over")
                    continue
                spec = self._register(spec, rpath, item, fallback=f"{SECTION_ITEM[section]}_{i}")
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
        if "operator" not in raw:
            self.approx(f"{item} operator", path, "approximated: no operator (VSR requires one) read as OR")
        operator = str(raw.get("operator", "OR")).upper()
        mode = {"AND": "all", "OR": "any", "NOR": "none"}.get(operator)
        if mode is None:
            self.unmapped(item, f"{path}.operator", f"unknown keyword operator {raw.get('operator')!r} (AND, OR, NOR)")
            return None
        keywords = list(dict.fromkeys(str(k) for k in as_list(raw.get("keywords")) if str(k)))
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
            # Chinese keywords match inside Chinese text: the keyword signal puts no boundary beside CJK.
            if all(HAN_RE.search(k) for k in keywords):
                spec["whole_word"] = False
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
        if str(raw.get("query_modality", "text")).lower() != "text":
            self.unmapped(item, f"{path}.query_modality", "no counterpart: image/audio query embeddings")
            return None
        key = "candidates" if "candidates" in raw or "keywords" not in raw else "keywords"  # older rules: keywords
        candidates = [str(c) for c in as_list(raw.get(key)) if str(c).strip()]
        if not candidates:
            self.unmapped(item, f"{path}.{key}", "no text candidates")
            return None
        aggregation = str(raw.get("aggregation_method") or "max").lower()
        method = {"max": "max", "any": "max", "mean": "centroid", "avg": "centroid", "average": "centroid"}.get(
            aggregation, "max"
        )
        threshold = float(raw.get("threshold", 0.5))
        spec = semantic_spec(raw["name"], candidates, threshold, method)
        notes = [
            f"approximated as semantic signal (method {method}, threshold {threshold}): similarity from MiniLM, "
            "not VSR's embedding model, so re-tune the threshold"
        ]
        if key == "keywords":
            notes.append("its keywords as the candidates")
        if method == "centroid":
            notes.append(f"{aggregation} of similarities as similarity to the candidates' centroid")
        elif aggregation not in ("max", "any"):
            notes.append(f"unknown aggregation {aggregation!r} as max")
        dropped = [k for k in ("image_candidates", "negative_candidates", "negative_image_candidates") if raw.get(k)]
        if dropped:
            notes.append(f"{', '.join(dropped)} not carried")
        if raw.get("prototype_scoring"):
            notes.append("prototype scoring not carried")
        chosen = [k for k in EMBEDDING_MODEL_KEYS if k in raw]
        if chosen:
            notes.append(f"VSR's embedding model choice ({', '.join(chosen)}) not carried")
        self.approx(item, path, "; ".join(notes))
        return spec

    def _sig_preference(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        examples = [str(c) for c in as_list(raw.get("examples")) if str(c).strip()]
        if not examples:
            self.unmapped(item, path, UNMAPPED_SIGNALS["preference"])
            return None
        threshold = float(raw.get("threshold", 0.5))
        self.approx(
            item,
            path,
            f"approximated as semantic signal (method max, threshold {threshold}) on its examples: similarity "
            "from MiniLM, not VSR's preference scoring, and each preference fires on its own: re-tune the threshold",
        )
        return semantic_spec(raw["name"], examples, threshold, "max")

    def _sig_language(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        code = re.split(r"[-_]", str(raw["name"]).strip().lower())[0]
        if len(code) != 2 or not code.isalpha():
            self.unmapped(item, path, f"{raw['name']!r} is not an ISO 639-1 language code")
            return None
        threshold = float(raw.get("threshold") or 0.3)  # VSR: 0 means its default, 0.3
        self.mapped(item, path, f"as language signal (languages [{code}], min_confidence {threshold})")
        return {"name": f"language_{code}", "type": "language", "languages": [code], "min_confidence": threshold}

    def _sig_context(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
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
        return self._pii_spec(str(raw["name"]), raw, path, item)

    def _pii_spec(self, name: str, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        allowed = {str(t).upper() for t in as_list(raw.get("pii_types_allowed"))}
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
        if str(raw.get("modality", "")).lower() != "image":
            self.unmapped(item, path, f"no counterpart: {raw.get('modality')!r} input (images only)")
            return None
        self.mapped(item, path, "as modality signal (at least one image)")
        return {"name": raw["name"], "type": "modality"}

    # -- issue 22's signal types: mapped only when the catalog has them --------------------------
    def _domains(self, rules: list[Any], path: str) -> None:
        if "domain" not in self.caps.signal_types:
            for i, raw in enumerate(rules):
                name = str(as_mapping(raw).get("name", i))
                self.unmapped(f"domain {name}", f"{path}[{i}]", NEEDS_DOMAIN)
                self.leaf_missing[("domains", name)] = NEEDS_DOMAIN
            return
        labels_map: dict[str, str] = {}  # subject of the shipped classifier -> VSR domain name
        names: list[str] = []
        for i, raw in enumerate(rules):
            raw = as_mapping(raw)
            if not raw.get("name"):
                continue
            if self._domain_rule(raw, f"{path}[{i}]", labels_map):
                names.append(str(raw["name"]))
            else:
                self.leaf_missing[("domains", str(raw["name"]))] = f"domain {raw['name']} was not carried over"
        spec: dict[str, Any] = {"name": "domain", "type": "domain", "labels_map": labels_map}
        self._domain_classifier_settings(spec)
        registered = self._register(spec, path, "domain signal")
        for name in names:
            if registered is None:
                self.leaf_missing[("domains", name)] = "the domain signal could not be expressed"
            else:
                self.leaves[("domains", name)] = {"signal": registered["name"], "label": name}

    def _domain_rule(self, raw: Mapping[str, Any], path: str, labels_map: dict[str, str]) -> bool:
        """One VSR domain as labels of our one domain signal (added to `labels_map`); False: not carried."""
        name = str(raw["name"])
        legacy = self.layout == "flat" and "decisions" not in self.config  # categories route by model_scores
        self.fields(
            raw,
            path,
            {"name", "description", "mmlu_categories"}
            | ({"model_scores", "system_prompt", "system_prompt_mode", "reasoning_effort"} if legacy else set())
            | (CATEGORY_CACHE_KEYS if legacy and raw.get("model_scores") else set()),  # on the category's decision
            {
                "model_scores": "no counterpart: per-domain model scores (the decisions choose the models)",
                "system_prompt": "no counterpart: per-domain system prompts (put it on a decision)",
                **{k: "no counterpart: per-domain policy (put it on a decision)" for k in DOMAIN_POLICY_KEYS},
            },
        )
        if not LABEL_PATTERN.match(name):
            self.unmapped(f"domain {name}", path, f"not carried over: a label must match {LABEL_PATTERN.pattern}")
            return False
        subjects = [str(x) for x in as_list(raw.get("mmlu_categories"))] or [name]
        # A subject written with underscores (VSR's all-in-one config: `computer_science`) is read as
        # the classifier's spelling; VSR itself matches the label as written, so this is approximated.
        respelled = {x: x.replace("_", " ") for x in subjects if x not in SUBJECTS and x.replace("_", " ") in SUBJECTS}
        if respelled:
            subjects = [respelled.get(x, x) for x in subjects]
            self.approx(
                f"domain {name} subjects",
                f"{path}.mmlu_categories" if raw.get("mmlu_categories") else f"{path}.name",
                f"approximated: read {sorted(respelled)} as the classifier's subjects "
                f"{sorted(respelled.values())} (VSR compares the label as written)",
            )
        # Left unset, the shipped classifier runs: a domain is the subjects of it that it names.
        known = [x for x in subjects if x in SUBJECTS]
        if not known:
            self.unmapped(
                f"domain {name}",
                path,
                f"not carried over: names none of the shipped classifier's subjects ({', '.join(SUBJECTS)})",
            )
            return False
        for subject in known:
            labels_map[subject] = name
        if len(known) < len(subjects):
            self.approx(
                f"domain {name}",
                path,
                f"approximated as label {name!r} of the domain signal from {known}; "
                f"not subjects of the shipped classifier: {sorted(set(subjects) - set(known))}",
            )
        else:
            self.mapped(f"domain {name}", path, f"as label {name!r} of the domain signal")
        return True

    def _domain_classifier_settings(self, spec: dict[str, Any]) -> None:
        """The flat layout's `classifier.category_model` onto the domain signal `spec`."""
        model = self.category_model
        mpath = "classifier.category_model"
        threshold = model.get("threshold")
        if threshold is None and self.from_recipe:
            # A v0.3 recipe gives its domains no threshold: a domain leaf is the classifier's top subject
            # (as VSR's signal reads it). Our default 0.5 would almost never fire: the shipped classifier
            # spreads its probability over 14 subjects (a clear math question tops out near 0.25).
            spec["threshold"] = 0.0
            self.approx(
                "domain threshold",
                "routing.signals.domains",
                "no threshold in the recipe: the domain signal's label is the classifier's top subject (threshold 0)",
            )
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

    def _sig_complexity(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        examples: dict[str, list[str]] = {}
        for level in ("hard", "easy"):
            texts = [
                c for c in as_list(as_mapping(raw.get(level)).get("candidates")) if isinstance(c, str) and c.strip()
            ]
            if not texts:
                self.unmapped(
                    item, f"{path}.{level}", f"not carried over: no {level} candidates (text) to compare with"
                )
                return None
            examples[level] = texts
        spec: dict[str, Any] = {"name": raw["name"], "type": "complexity", **examples}
        composer = as_mapping(raw.get("composer"))
        if composer:
            # VSR gates the levels by the composer's conditions (e.g. code difficulty only for computer
            # science); the decisions' leaves NAME:LEVEL read all of [the level, those conditions].
            self.complexity_composers[str(raw["name"])] = composer
            self.approx(
                f"{item} composer",
                f"{path}.composer",
                "approximated: a rule leaf NAME:LEVEL reads all of [the level, the composer's conditions]; a "
                "score's complexity input is not gated (it counts the level whatever the composer says)",
            )
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
