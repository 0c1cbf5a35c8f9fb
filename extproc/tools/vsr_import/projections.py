"""VSR v0.3's derived and feature signals -> ours: `structure` and `conversation` features as
`feature` signals, `kb` as `kb` signals (exemplars from a knowledge-base folder), and
`projections` (weighted `scores`, softmax `partitions`, threshold-band `mappings`) as `score`
and `partition` signals whose bands the decisions' `type: projection` leaves test."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from extproc.models.domain_classifier import SUBJECTS
from extproc.tools.vsr_import.reading import as_list, as_mapping
from extproc.tools.vsr_import.signals import SignalMapper
from extproc.tools.vsr_import.vocabulary import LEAF_KINDS

# VSR feature source type -> our feature `source` (counts of request items).
_ITEM_SOURCES = {"message": "messages", "image_content": "images", "tool_definition": "tools", "tools": "tools"}
_PREDICATE_KEYS = ("gt", "gte", "lt", "lte", "eq")
BUILTIN_SUBJECT_KB = "mmlu_kb"


class ProjectionMapper(SignalMapper):
    kb_dirs: Mapping[str, Path] = {}
    base_dir: Path | None = None

    # -- features
    def _feature(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        feature = as_mapping(raw.get("feature"))
        source = as_mapping(feature.get("source"))
        measure = str(feature.get("type", "")).lower()
        kind = str(source.get("type", "")).lower()
        spec: dict[str, Any] = {"name": raw["name"], "type": "feature"}
        if measure not in ("count", "exists", "density", "sequence"):
            self.unmapped(item, f"{path}.feature.type", f"no counterpart: feature {measure!r}")
            return None
        spec["measure"] = measure
        if kind in _ITEM_SOURCES:
            spec["source"] = _ITEM_SOURCES[kind]
            role = str(source.get("role") or "").lower()
            if role == "non_user":  # VSR: every message the user did not send
                spec["roles"] = ["system", "assistant", "tool"]
            elif role:
                spec["roles"] = [{"developer": "system"}.get(role, role)]
        elif kind == "active_tool_loop":
            # VSR: the client is inside a tool loop, an outstanding assistant tool call included. Ours
            # counts the messages carrying a tool call or a tool result anywhere in the request.
            spec["source"] = "tool_turns"
            why = f"approximated as feature signal ({measure} of tool_turns: messages with a tool call or result)"
            self.approx(item, path, why)
            return self._predicate(raw, spec, path, item)
        elif kind == "assistant_tool_call":
            spec["source"] = "tool_calls"
        elif kind == "assistant_tool_cycle":
            # VSR: completed cycles (an assistant tool call answered by its tool result); a tool
            # result answers a call, so ours counts the messages carrying a tool result.
            spec["source"] = "tool_results"
            why = f"approximated as feature signal ({measure} of tool_results: a result stands for its call)"
            self.approx(item, path, why)
            return self._predicate(raw, spec, path, item)
        elif kind == "regex":
            spec["regex"] = _python_regex(str(source.get("pattern", "")))
        elif kind == "keyword_set":
            spec["keywords"] = [str(k) for k in as_list(source.get("keywords"))]
        elif kind == "sequence":
            spec["sequences"] = [[str(m) for m in as_list(seq)] for seq in as_list(source.get("sequences"))]
        else:
            self.unmapped(item, f"{path}.feature.source", f"no counterpart: feature source {kind!r}")
            return None
        if measure == "count" and kind == "keyword_set":
            spec["keywords"] = spec.get("keywords", [])
        out = self._predicate(raw, spec, path, item)
        if out is not None:
            self.mapped(item, path, f"as feature signal ({measure} of {spec.get('source', kind)})")
        return out

    def _predicate(
        self, raw: Mapping[str, Any], spec: dict[str, Any], path: str, item: str
    ) -> dict[str, Any] | None:
        """The feature's predicate (`gt` ... `eq`, `range`) onto `spec`; None (reported) for unknown keys."""
        predicate = as_mapping(raw.get("predicate"))
        unknown = [k for k in predicate if k not in (*_PREDICATE_KEYS, "range")]
        if unknown:
            self.unmapped(item, f"{path}.predicate", f"no counterpart: predicate keys {unknown}")
            return None
        for key in _PREDICATE_KEYS:
            if key in predicate:
                spec[key] = float(predicate[key])
        window = as_mapping(predicate.get("range"))
        for ours, theirs in (("gte", "min"), ("lte", "max")):
            if theirs in window:
                spec[ours] = float(window[theirs])
        return spec

    def _sig_structure(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        return self._feature(raw, path, item)

    def _sig_conversation(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        return self._feature(raw, path, item)

    def _sig_reask(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        lookback = int(raw.get("lookback_turns", 1))
        threshold = float(raw.get("threshold", 0.8))
        self.approx(
            item,
            path,
            f"approximated as reask signal (lookback {lookback}, threshold {threshold:g}): the turns' likeness is "
            "lexical (shared words over the shorter turn's words), not VSR's embedding similarity",
        )
        return {"name": raw["name"], "type": "reask", "lookback_turns": lookback, "threshold": threshold}

    # -- knowledge bases
    def _sig_kb(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        kb_name = str(raw.get("kb", ""))
        folder = self._kb_folder(kb_name)
        target = as_mapping(raw.get("target"))
        if folder is None and kb_name == BUILTIN_SUBJECT_KB and str(target.get("value")) in SUBJECTS:
            self._subject_kb(raw, path, item, str(target["value"]))
            return None
        if folder is None:
            self.unmapped(
                item,
                f"{path}.kb",
                f"knowledge base {kb_name!r}: its exemplars are not in the config (VSR ships them beside its "
                f"router); give the folder holding its labels.json with --kb {kb_name}=DIR",
            )
            return None
        labels, groups = read_kb(folder)
        spec: dict[str, Any] = {"name": raw["name"], "type": "kb", "labels": labels, "groups": groups}
        if target:
            spec["target"] = {"kind": str(target.get("kind", "label")), "value": str(target.get("value", ""))}
        match = str(raw.get("match", "best")).lower()
        spec["match"] = "threshold" if match == "threshold" else "best"
        if raw.get("threshold") is not None:
            spec["threshold"] = float(raw["threshold"])
        self.approx(
            item,
            path,
            f"approximated as kb signal over {folder} ({len(labels)} labels, {len(groups)} groups): similarity from "
            "MiniLM, not VSR's embedding model",
        )
        return spec

    def _subject_kb(self, raw: Mapping[str, Any], path: str, item: str, subject: str) -> None:
        """VSR's built-in `mmlu_kb` groups exemplars by the 14 MMLU-Pro subjects: the subjects our shipped
        domain classifier answers. Its `match: best` label is the classifier's top subject (one shared
        signal, every rule a label of it)."""
        name = BUILTIN_SUBJECT_KB
        if name not in self.signal_names:
            spec = {"name": name, "type": "domain", "threshold": 0.0}
            if self._register(spec, path, f"built-in knowledge base {name}") is None:
                return
        self.leaves[("kb", str(raw["name"]))] = {"signal": name, "label": subject}
        self.approx(
            item,
            path,
            f"approximated as label {subject!r} of the domain signal {name} (top subject): VSR's built-in {name} "
            "holds exemplars of the same 14 subjects our shipped domain classifier reads",
        )

    def _kb_folder(self, name: str) -> Path | None:
        if name in self.kb_dirs:
            return self.kb_dirs[name]
        if self.base_dir is not None:
            for candidate in (self.base_dir / "knowledge_bases" / name, self.base_dir / "knowledge_bases"):
                if (candidate / "labels.json").is_file():
                    return candidate
        return None

    # -- projections
    def _projections(self, raw: Mapping[str, Any], path: str) -> None:
        scores: dict[str, dict[str, Any]] = {}
        for i, score in enumerate(as_list(raw.get("scores"))):
            with self.guarded("projection score", f"{path}.scores[{i}]"):
                spec = self._score(as_mapping(score), f"{path}.scores[{i}]")
                if spec is not None:
                    scores[str(score["name"])] = spec
        for i, part in enumerate(as_list(raw.get("partitions"))):
            with self.guarded("projection partition", f"{path}.partitions[{i}]"):
                self._partition(as_mapping(part), f"{path}.partitions[{i}]")
        for i, mapping in enumerate(as_list(raw.get("mappings"))):
            with self.guarded("projection mapping", f"{path}.mappings[{i}]"):
                self._mapping(as_mapping(mapping), f"{path}.mappings[{i}]", scores)
        for key in raw:
            if key not in ("scores", "partitions", "mappings"):
                self.unmapped(f"projection {key}", f"{path}.{key}", "unknown key: not a VSR projection kind")

    def _input(self, raw: Mapping[str, Any], path: str, item: str) -> dict[str, Any] | None:
        kind = str(raw.get("type", "")).lower()
        name = str(raw.get("name", ""))
        section = LEAF_KINDS.get(kind, kind)
        label: str | None = None
        if section == "complexity" and ":" in name:
            name, label = name.rsplit(":", 1)
        leaf = self.leaves.get((section, name))
        if leaf is None:
            why = self.leaf_missing.get((section, name), f"no counterpart for a {kind or '(no type)'} input")
            self.approx(
                f"{item} input {kind}:{raw.get('name', raw.get('metric', ''))}", path, f"left out (counts as 0): {why}"
            )
            return None
        term: dict[str, Any] = {"signal": leaf["signal"], "weight": float(raw.get("weight", 1.0))}
        if label is not None or leaf.get("label") is not None:
            term["label"] = label if label is not None else leaf["label"]
        source = str(raw.get("value_source", "")).lower()
        if source in ("confidence", "score") and section == "keywords":
            # VSR's keyword confidence is 1 for a match; ours is the share of the keywords found.
            term["value"] = "match"
        elif source in ("confidence", "score"):
            term["value"] = source
        elif label is not None:
            term["value"] = "match"
        return term

    def _score(self, raw: Mapping[str, Any], path: str) -> dict[str, Any] | None:
        name = str(raw.get("name", ""))
        item = f"projection score {name}"
        method = str(raw.get("method", "weighted_sum")).lower()
        if method != "weighted_sum":
            self.unmapped(item, f"{path}.method", f"no counterpart: score method {method!r} (weighted_sum only)")
            return None
        inputs = [
            self._input(as_mapping(t), f"{path}.inputs[{j}]", item) for j, t in enumerate(as_list(raw.get("inputs")))
        ]
        kept = [t for t in inputs if t is not None]
        if not kept:
            # No input carries over: the score is 0 for every request, so its bands are constants.
            self.approx(item, path, "approximated: no input has a counterpart, so the score is always 0")
            return {"name": name, "type": "score", "inputs": [], "constant": 0.0}
        self.mapped(item, path, f"as score signal ({len(kept)} of {len(inputs)} inputs)")
        return {"name": name, "type": "score", "inputs": kept}

    def _partition(self, raw: Mapping[str, Any], path: str) -> None:
        name = str(raw.get("name", ""))
        item = f"projection partition {name}"
        members = [
            self._input(as_mapping(m), f"{path}.members[{j}]", item)
            for j, m in enumerate(as_list(raw.get("members") or raw.get("inputs")))
        ]
        kept = [{**m, "value": m.get("value", "score")} for m in members if m is not None]
        if len(kept) < 2:
            self.unmapped(item, path, "fewer than two members carry over")
            return
        spec: dict[str, Any] = {"name": name, "type": "partition", "members": kept}
        if raw.get("temperature") is not None:
            spec["temperature"] = float(raw["temperature"])
        registered = self._register(spec, path, item)
        if registered is None:
            return
        for member in kept:
            label = f"{member['signal']}[{member['label']}]" if member.get("label") else member["signal"]
            self.leaves[("partition", label)] = {"signal": registered["name"], "label": label}
        self.leaves[("projection", name)] = {"signal": registered["name"]}
        self.approx(item, path, "approximated as partition signal (softmax over its members' scores)")

    def _mapping(self, raw: Mapping[str, Any], path: str, scores: dict[str, dict[str, Any]]) -> None:
        name = str(raw.get("name", ""))
        item = f"projection mapping {name}"
        source = scores.get(str(raw.get("source", "")))
        if source is None:
            self.unmapped(item, f"{path}.source", f"its score {raw.get('source')!r} did not carry over")
            return
        method = str(raw.get("method", "threshold_bands")).lower()
        if method != "threshold_bands":
            self.unmapped(item, f"{path}.method", f"no counterpart: mapping method {method!r}")
            return
        bands = []
        for output in as_list(raw.get("outputs")):
            out = as_mapping(output)
            bands.append(
                {"name": str(out["name"]), **{k: float(out[k]) for k in ("gt", "gte", "lt", "lte") if k in out}}
            )
        if "constant" in source:
            self._constant_bands(item, path, bands, source["constant"])
            return
        spec = {**source, "name": name if name else source["name"], "bands": bands}
        registered = self._register(spec, path, item)
        if registered is None:
            return
        for band in bands:
            output = str(band["name"])
            self.leaves[("projection", output)] = {"signal": registered["name"], "label": output}
        note = "; its calibration only reshapes the output's confidence, not the band" if raw.get("calibration") else ""
        self.mapped(item, path, f"as the bands of score signal {registered['name']}{note}")

    def _constant_bands(self, item: str, path: str, bands: list[dict[str, Any]], value: float) -> None:
        from extproc.signals.derived import Band

        for band in bands:
            holds = Band.model_validate(band).contains(value)
            self.constants[("projection", band["name"])] = holds
        self.approx(item, path, f"approximated: its score is always {value:g}, so each band is a constant")


def read_kb(folder: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """A VSR knowledge-base folder: labels.json's exemplars, and groups from taxonomy.json
    (`category_to_tier`: each tier a group of its categories; `tier_groups` as given)."""
    data = json.loads((folder / "labels.json").read_text(encoding="utf-8"))
    labels = {
        str(name): [str(t) for t in as_list(as_mapping(body).get("exemplars")) if str(t).strip()]
        for name, body in as_mapping(data.get("labels")).items()
    }
    labels = {k: v for k, v in labels.items() if v}
    groups: dict[str, list[str]] = {}
    taxonomy_path = folder / "taxonomy.json"
    if taxonomy_path.is_file():
        taxonomy = json.loads(taxonomy_path.read_text(encoding="utf-8"))
        for category, tier in as_mapping(taxonomy.get("category_to_tier")).items():
            if category in labels:
                groups.setdefault(str(tier), []).append(str(category))
        for group, members in as_mapping(taxonomy.get("tier_groups")).items():
            kept = [str(m) for m in as_list(members) if m in labels]
            if kept and group not in labels:
                groups[str(group)] = kept
    return labels, {g: m for g, m in groups.items() if g not in labels}


def _python_regex(pattern: str) -> str:
    """Go RE2 and Python `re` agree on what VSR's recipes write; `(?i)` must lead in both."""
    return pattern
