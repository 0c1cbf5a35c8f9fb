"""Load a policy file: YAML -> schema -> semantic checks -> built signals, with precise diagnostics.

Every problem is reported with the file, the line, the path in the document and what is
wrong, and all of them at once: an operator fixing a policy should not play whack-a-mole.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ValidationError

from extproc.policy.capabilities import capability_findings
from extproc.policy.conditions import All, Any_, Condition, ConditionError, Leaf, Not, leaves, parse_condition
from extproc.policy.derived_check import derived_findings, with_inputs
from extproc.policy.reachability import contradictions, reachable, shadowing
from extproc.policy.schema import Decision, DefaultDecision, ModelSpec, Policy, ToolRule
from extproc.policy.yaml_lines import YAML_LOADER as _YAML_LOADER
from extproc.policy.yaml_lines import YamlLines as _Lines
from extproc.signals.base import BuildContext, Signal, SignalSpecBase
from extproc.signals.derived import DerivedSignal
from extproc.signals.registry import SignalCatalog, SignalType

Path_ = tuple[str | int, ...]
Severity = Literal["error", "warning", "note"]  # a note: a check that could not run, and why
# Top-level lists whose broken items are set aside so the rest of the policy is still checked.
_ITEM_SECTIONS = ("models", "signals", "decisions", "tool_rules")
_INVALID_WHEN = "<invalid>"  # the leaf standing in for a rule that did not parse


def did_you_mean(name: str, known: Iterable[str], what: str) -> str:
    """`unknown signal 'jailbrake'; did you mean 'jailbreak'?`, or the known names when none is close."""
    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f"unknown {what} {name!r}; did you mean {close[0]!r}?"
    if not names:
        return f"unknown {what} {name!r}; there are none"
    return f"unknown {what} {name!r}; known: {', '.join(names)}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Severity
    location: str
    message: str
    file: str = "<policy>"
    line: int | None = None

    def format(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        loc = f" {self.location}:" if self.location else ""
        return f"{where}:{loc} {self.severity}: {self.message}"


class PolicyError(Exception):
    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        errors = [d for d in diagnostics if d.severity == "error"]
        super().__init__("\n".join(d.format() for d in errors) or "invalid policy")


@dataclass(slots=True)
class CompiledPolicy:
    """A validated policy with its signals built: what the router evaluates."""

    spec: Policy
    signals: dict[str, Signal]  # only the signals some decision references, in declaration order
    version: str  # content hash: identifies the policy in logs and replays
    path: Path | None = None
    decisions: list[Decision] = field(default_factory=list)  # highest priority first
    tool_rules: list[ToolRule] = field(default_factory=list)  # highest priority first
    tool_signals: dict[str, Signal] = field(default_factory=dict)  # the signals tool rules read
    aliases: frozenset[str] = frozenset()
    warnings: list[Diagnostic] = field(default_factory=list)
    derived: dict[str, DerivedSignal] = field(default_factory=dict)  # computed by the engine, never dispatched

    @property
    def default(self) -> DefaultDecision:
        return self.spec.default

    def model(self, name: str) -> ModelSpec | None:
        return self.spec.model(name)


def format_loc(loc: Iterable[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _cond_path(text: str) -> Path_:
    """'all[1].not[0]' -> ('all', 1, 'not', 0); a rule that is one leaf ('when') -> ()"""
    if text == "when":
        return ()
    out: list[str | int] = []
    for part in text.replace("[", ".[").split("."):
        if not part:
            continue
        if part.startswith("[") and part.endswith("]") and part[1:-1].isdigit():
            out.append(int(part[1:-1]))
        else:
            out.append(part)
    return tuple(out)


class PolicyLoader:
    """Reads, validates and builds a policy. One instance per load."""

    def __init__(self, catalog: SignalCatalog | None = None, file: str = "<policy>") -> None:
        self.catalog = catalog or SignalCatalog()
        self.file = file
        self.diagnostics: list[Diagnostic] = []
        self.lines = _Lines("")
        # After broken items were set aside: section -> original index of each kept item, so later
        # checks report the file's own indices.
        self._kept: dict[str, list[int]] = {}
        self._broken_names: dict[str, set[str]] = {s: set() for s in _ITEM_SECTIONS}
        self._broken_sections: set[str] = set()
        self._set_aside_rules: list[tuple[str, int, Condition]] = []

    # -- diagnostics ------------------------------------------------------------------
    def error(self, path: Path_, message: str) -> None:
        self._add("error", path, message)

    def warning(self, path: Path_, message: str) -> None:
        self._add("warning", path, message)

    def note(self, path: Path_, message: str) -> None:
        self._add("note", path, message)

    def _add(self, severity: Severity, path: Path_, message: str) -> None:
        if len(path) > 1 and isinstance(path[1], int):
            path = (path[0], self._index(str(path[0]), path[1]), *path[2:])
        self.diagnostics.append(Diagnostic(severity, format_loc(path), message, self.file, self.lines.find(path)))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    # -- stages -----------------------------------------------------------------------
    def parse_text(self, text: str) -> Policy | None:
        self.lines = _Lines(text)
        try:
            raw = yaml.load(text, Loader=_YAML_LOADER)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc)
            self.diagnostics.append(Diagnostic("error", "", f"invalid YAML: {problem}", self.file, line))
            self.note((), "no other check ran: the file is not valid YAML")
            return None
        if not isinstance(raw, dict):
            self.error((), "a policy must be a YAML mapping")
            return None
        return self.parse_mapping(raw)

    def parse_mapping(self, raw: Mapping[str, Any]) -> Policy | None:
        data = dict(raw)
        if "signals" in data:
            data["signals"] = self._parse_signals(data["signals"])
        if "decisions" in data:
            data["decisions"] = self._parse_decisions(data["decisions"])
        if "tool_rules" in data:
            data["tool_rules"] = self._parse_decisions(data["tool_rules"], section="tool_rules")
        try:
            return Policy.model_validate(data)
        except ValidationError as exc:
            for err in exc.errors():
                loc = tuple(err["loc"])
                self.error(loc, _pydantic_message(err, self._fields_at(data, loc)))
            return self._validate_what_remains(data, exc)

    def _validate_what_remains(self, data: dict[str, Any], first: ValidationError) -> Policy | None:
        """The policy with its invalid fields and items set aside, so that the later checks still
        run over the rest (every problem in one run); None when what is left cannot form a policy.

        Only the first round's errors are the file's; later rounds' are this pruning's own
        (a required field set aside is then "missing"), except errors about the whole policy.
        Callers must not serve the result: the errors already recorded make `has_errors` true.
        """
        data = copy.deepcopy(data)
        errors = first.errors()
        for _ in range(8):
            removals = [self._removal(data, tuple(err["loc"]), err["type"]) for err in errors]
            if not removals or any(r is None for r in removals):
                break
            self._remove(data, [r for r in removals if r is not None])
            try:
                return Policy.model_validate(data)
            except ValidationError as exc:
                errors = exc.errors()
                for err in errors:
                    if not err["loc"]:
                        self.error((), _pydantic_message(err))
        self.note(
            (),
            "references, priorities, capabilities and reachability were not checked: "
            "the errors above leave no policy to check them on",
        )
        return None

    def _removal(self, data: dict[str, Any], loc: Path_, kind: str) -> Path_ | None:
        """The concrete path to set aside for error `loc`: the field itself, or for a missing field
        the mapping that lacks it; inside a top-level list, at most the item. None: nothing can go
        (the policy's own `models` or `default`, or an error about the whole policy)."""
        target = loc[:-1] if kind == "missing" else loc
        path: list[str | int] = []
        node: Any = data
        # Walk what exists of `target` (pydantic adds union tags that are not keys of the data).
        for part in target:
            if _has(node, part):
                node = node[part]
                path.append(part)
        # Up to the nearest mapping key (a list inside a field goes with its field) or section item.
        while path:
            if len(path) == 2 and path[0] in _ITEM_SECTIONS and isinstance(path[1], int):
                return tuple(path)
            if isinstance(path[-1], str):
                if len(path) == 1 and path[0] in ("models", "default"):
                    return None
                return tuple(path)
            path.pop()
        return None

    def _remove(self, data: dict[str, Any], removals: list[Path_]) -> None:
        unique = sorted(set(removals), key=len)
        # What lies inside another removal goes with it.
        unique = [r for r in unique if not any(o != r and r[: len(o)] == o for o in unique)]
        fields = [r for r in unique if isinstance(r[-1], str)]
        items = sorted((r for r in unique if isinstance(r[-1], int)), key=lambda r: -int(r[-1]))
        for path in fields:  # before items are dropped, while the indices still hold
            node: Any = data
            for part in path[:-1]:
                node = node[part]
            del node[path[-1]]
            if len(path) == 1:
                self._broken_sections.add(str(path[0]))
        for section, index in items:
            self._drop_item(data, str(section), int(index))

    def _drop_item(self, data: dict[str, Any], section: str, index: int) -> None:
        items = data[section]
        item = items[index]
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            self._broken_names[section].add(item["name"])
        elif hasattr(item, "name"):
            self._broken_names[section].add(str(item.name))
        kept = self._kept.get(section, list(range(len(items))))
        if isinstance(item, dict) and isinstance(item.get("when"), Leaf | All | Any_ | Not):
            self._set_aside_rules.append((section, kept[index], item["when"]))  # its references are still checked
        del items[index]
        del kept[index]
        self._kept[section] = kept

    def _fields_at(self, data: Mapping[str, Any], loc: Path_) -> list[str]:
        """The field names allowed beside the unknown key at `loc`, for a 'did you mean'."""
        model: Any = Policy
        node: Any = data
        for part in loc[:-1]:
            if not _has(node, part):
                continue  # a union tag
            node = node[part]
            if isinstance(part, int):
                continue
            model = _field_model(model, str(part), node)
            if model is None:
                return []
        return list(getattr(model, "model_fields", {}))

    def _parse_signals(self, raw: Any) -> Any:
        if not isinstance(raw, list):
            return raw  # pydantic reports the type problem
        specs: list[Any] = []
        kept: list[int] = []
        for index, item in enumerate(raw):
            path: Path_ = ("signals", index)
            spec = self._parse_signal(item, path)
            if spec is not None:
                specs.append(spec)
                kept.append(index)
            elif isinstance(item, dict) and isinstance(item.get("name"), str):
                self._broken_names["signals"].add(item["name"])
        if len(kept) != len(raw):
            self._kept["signals"] = kept
        return specs

    def _parse_signal(self, item: Any, path: Path_) -> SignalSpecBase | None:
        if not isinstance(item, dict):
            self.error(path, "a signal must be a mapping with 'name' and 'type'")
            return None
        type_name = item.get("type")
        if not isinstance(type_name, str):
            self.error((*path, "type"), f"'type' is required; one of {self.catalog.names()}")
            return None
        try:
            entry = self.catalog.get(type_name)
        except ImportError as exc:
            self.error((*path, "type"), f"signal type {type_name!r} cannot be loaded: {exc}")
            return None
        if entry is None:
            self.error((*path, "type"), did_you_mean(type_name, self.catalog.names(), "signal type"))
            self._fields_of_likely_type(item, path, type_name)
            return None
        try:
            return entry.spec.model_validate(item)
        except ValidationError as exc:
            for err in exc.errors():
                self.error((*path, *err["loc"]), _pydantic_message(err, list(entry.spec.model_fields)))
        return None

    def _fields_of_likely_type(self, item: dict[str, Any], path: Path_, type_name: str) -> None:
        """The unknown fields of a signal whose type is misspelt, checked against the type it most likely
        means, so that fixing the type does not reveal a second error."""
        close = difflib.get_close_matches(type_name, self.catalog.names(), n=1, cutoff=0.6)
        entry = self.catalog.get(close[0]) if close else None
        if entry is None:
            return
        fields = list(entry.spec.model_fields)
        for key in item:
            if key not in fields:
                hint = did_you_mean(str(key), fields, "field").removeprefix("unknown field ")
                self.error((*path, str(key)), f"unknown field of a {close[0]!r} signal {hint}")

    def _parse_decisions(self, raw: Any, section: str = "decisions") -> Any:
        if not isinstance(raw, list):
            return raw
        out: list[Any] = []
        for index, item in enumerate(raw):
            if isinstance(item, dict) and "when" in item:
                item = dict(item)
                try:
                    item["when"] = parse_condition(item["when"])
                except ConditionError as exc:
                    self.error((section, index, "when", *_cond_path(exc.path)), exc.problem)
                    item["when"] = Leaf(signal=_INVALID_WHEN)
            out.append(item)
        return out

    def check(self, policy: Policy) -> None:
        """Cross-reference and reachability checks over a schema-valid policy."""
        models = {m.name: m for m in policy.models}
        self._duplicates("models", [m.name for m in policy.models], "model name")
        self._duplicates("signals", [s.name for s in policy.signals], "signal name")
        self._duplicates(
            "decisions", [d.name for d in policy.decisions], "decision name", extra=(policy.default.name, "default")
        )
        self._duplicates("decisions", [d.priority for d in policy.decisions], "priority", key="priority")

        for index, alias in enumerate(policy.aliases):
            if alias in models:
                self.error(("aliases", index), f"alias {alias!r} is also a model name")
        for index, name in enumerate(policy.client_models):
            self._model_reference(("client_models", index), name, models)

        signal_specs = {s.name: s for s in policy.signals}
        types = {s.name: self.catalog.get(s.type) for s in policy.signals}
        used: set[str] = set()
        if "signals" in self._broken_sections:
            self.note(("signals",), "signal references were not checked: the signals section is invalid")
        sections: list[tuple[str, Sequence[Decision | ToolRule]]] = [
            ("decisions", policy.decisions),
            ("tool_rules", policy.tool_rules),
        ]
        for section, rules in sections:
            if section == "tool_rules":
                self._duplicates("tool_rules", [r.name for r in rules], "tool rule name")
                self._duplicates("tool_rules", [r.priority for r in rules], "priority", key="priority")
            for r_index, rule in enumerate(rules):
                for leaf in leaves(rule.when):
                    used.add(leaf.signal)
                    if leaf.signal in signal_specs or not self._checkable_signal(leaf.signal):
                        continue
                    self.error(
                        (section, r_index, "when", *_cond_path(leaf.path)),
                        did_you_mean(leaf.signal, signal_specs, "signal"),
                    )
        for section, index, when in self._set_aside_rules:  # a rule set aside for another error: its leaves too
            for leaf in leaves(when):
                used.add(leaf.signal)
                if leaf.signal not in signal_specs and self._checkable_signal(leaf.signal):
                    message = did_you_mean(leaf.signal, signal_specs, "signal")
                    self.diagnostics.append(
                        Diagnostic("error", format_loc((section, index, "when", *_cond_path(leaf.path))), message,
                                   self.file, self.lines.find((section, index, "when")))
                    )  # fmt: skip
        self._duplicates("mcp", [m.name for m in policy.mcp.servers], "MCP server name")
        holders: list[Decision | DefaultDecision] = [*policy.decisions, policy.default]
        for d_index, action_holder in enumerate(holders):
            action = action_holder.action
            path: Path_ = ("decisions", d_index) if isinstance(action_holder, Decision) else ("default",)
            if action.type == "route":
                for m_index, name in enumerate(action.models):
                    self._model_reference((*path, "action", "models", m_index), name, models)
                if len(set(action.models)) != len(action.models):
                    self.error((*path, "action", "models"), "a model is listed twice")
        used = with_inputs(used, policy.signals)  # a derived signal's inputs run for it
        if "signals" not in self._broken_sections:
            for finding in derived_findings(policy.signals, self._broken_names["signals"]):
                (self.error if finding.severity == "error" else self.warning)(finding.path, finding.message)
        for index, spec in enumerate(policy.signals):
            if spec.name not in used and not self._broken_names["decisions"] | self._broken_names["tool_rules"]:
                self.warning(
                    ("signals", index), f"signal {spec.name!r} is used by no decision or tool rule; it will not run"
                )
        # Both run over what is valid, after errors too: each error found elsewhere can only hide
        # a problem here (a rule set aside cannot shadow another), never invent one.
        self._check_capabilities(policy, models, types)
        self._check_reachability(policy, types)

    def _index(self, section: str, index: int) -> int:
        """The file's own index of item `index` of `section` (items with errors were set aside)."""
        kept = self._kept.get(section)
        return kept[index] if kept is not None and index < len(kept) else index

    def _checkable_signal(self, name: str) -> bool:
        """False for a reference whose target is already reported broken (no second, false error)."""
        return (
            name != _INVALID_WHEN
            and name not in self._broken_names["signals"]
            and "signals" not in self._broken_sections
        )

    def _model_reference(self, path: Path_, name: str, models: Mapping[str, ModelSpec]) -> None:
        if name not in models and name not in self._broken_names["models"]:
            self.error(path, did_you_mean(name, models, "model"))

    def _duplicates(
        self,
        section: str,
        values: list[Any],
        what: str,
        *,
        key: str = "name",
        extra: tuple[Any, str] | None = None,
    ) -> None:
        seen: dict[Any, int] = {}
        if extra is not None:
            seen[extra[0]] = -1
        for index, value in enumerate(values):
            if value in seen:
                first = (
                    "the default decision" if seen[value] == -1 else f"{section}[{self._index(section, seen[value])}]"
                )
                message = f"duplicate {what} {value!r} (also {first})"
                if key == "priority":
                    message += "; priorities must be unique so no tie is broken silently"
                self.error((section, index, key), message)
            else:
                seen[value] = index

    def _check_capabilities(
        self, policy: Policy, models: dict[str, ModelSpec], types: dict[str, SignalType | None]
    ) -> None:
        def implies_image(signal: str) -> bool:
            entry = types.get(signal)
            return bool(entry and entry.signal.implies_image)

        for finding in capability_findings(policy, models, implies_image):
            report = self.error if finding.severity == "error" else self.warning
            report(finding.path, finding.message)

    def _check_reachability(self, policy: Policy, types: dict[str, SignalType | None]) -> None:
        """Report decisions that no outcome of their signals can ever select, and why: the
        decisions that always win first, or the leaves of its own rule that contradict.

        Only strictly higher priorities shadow (a tie is reported as a duplicate, and which of
        two tied decisions runs first is not for this check to guess); a rule that did not parse
        neither is checked nor shadows.
        """
        on_error = {s.name: _effective_on_error(s, types.get(s.name)) for s in policy.signals}
        ordered = sorted(enumerate(policy.decisions), key=lambda pair: -pair[1].priority)
        for index, decision in ordered:
            if any(leaf.signal == _INVALID_WHEN for leaf in leaves(decision.when)):
                continue
            higher = [
                (d.name, d.when)
                for d in policy.decisions
                if d.priority > decision.priority and all(leaf.signal != _INVALID_WHEN for leaf in leaves(d.when))
            ]
            verdict = reachable(decision.when, [c for _, c in higher], on_error)
            path: Path_ = ("decisions", index, "when")
            if verdict is None:
                self.warning(path, "rule too large to check for reachability")
            elif verdict is False:
                why = _why_unreachable(decision, higher, on_error)
                self.error(path, f"decision {decision.name!r} can never be reached: {why}")
        skipped = sorted(self._broken_names["decisions"])
        if skipped:
            names = ", ".join(map(repr, skipped))
            what = f"decision {names} was" if len(skipped) == 1 else f"decisions {names} were"
            self.note(
                ("decisions",),
                f"{what} not checked for reachability, nor counted as shadowing others: errors above",
            )

    def build(
        self, policy: Policy, ctx: BuildContext, *, text: str = "", path: Path | None = None
    ) -> CompiledPolicy | None:
        used = with_inputs({leaf.signal for d in policy.decisions for leaf in leaves(d.when)}, policy.signals)
        for_tools = {leaf.signal for r in policy.tool_rules for leaf in leaves(r.when)}
        built: dict[str, Signal] = {}
        for index, spec in enumerate(policy.signals):
            if spec.name not in used | for_tools:
                continue
            entry = self.catalog.get(spec.type)
            assert entry is not None  # checked during parsing
            try:
                built[spec.name] = entry.signal.build(spec, ctx)
            except Exception as exc:
                self.error(("signals", index), f"signal {spec.name!r} could not be built: {exc}")
        derived = {n: s for n, s in built.items() if n in used and isinstance(s, DerivedSignal)}
        signals = {n: s for n, s in built.items() if n in used and n not in derived}  # what requests run
        unchecked: dict[str, str] = {}
        for d_index, decision in enumerate(policy.decisions):
            for leaf in leaves(decision.when):
                signal = signals.get(leaf.signal) or derived.get(leaf.signal)
                if signal is None or leaf.label is None:
                    continue
                known = signal.known_labels()
                if known is None:
                    reason = signal.unavailable_reason()
                    if reason is not None:
                        unchecked.setdefault(leaf.signal, reason)
                elif leaf.label not in known:
                    close = difflib.get_close_matches(leaf.label, sorted(known), n=1, cutoff=0.6)
                    hint = f"did you mean {close[0]!r}?" if close else f"its labels are {sorted(known)}"
                    self.error(
                        ("decisions", d_index, "when", *_cond_path(leaf.path)),
                        f"signal {leaf.signal!r} has no label {leaf.label!r}; {hint}",
                    )
        for name, reason in unchecked.items():
            index = next(i for i, spec in enumerate(policy.signals) if spec.name == name)
            self.note(("signals", index), f"the labels rules name for signal {name!r} were not checked: {reason}")
        if self.has_errors:
            return None
        return CompiledPolicy(
            spec=policy,
            signals=signals,
            version=policy_version(text) if text else _hash_policy(policy),
            path=path,
            decisions=sorted(policy.decisions, key=lambda d: -d.priority),
            tool_rules=sorted(policy.tool_rules, key=lambda r: -r.priority),
            tool_signals={name: signal for name, signal in built.items() if name in for_tools},
            aliases=frozenset(a.lower() for a in policy.aliases),
            warnings=[d for d in self.diagnostics if d.severity == "warning"],
            derived=derived,
        )


def _has(node: Any, part: str | int) -> bool:
    """Does the parsed YAML `node` hold `part` (a key of a mapping, an index of a list)?"""
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _field_model(model: Any, field_name: str, value: Any) -> Any:
    """The pydantic model a field of `model` holds (its list items' model for a list); for a union
    (an action), the member whose `type` the value names. None when it holds no model."""
    fields = getattr(model, "model_fields", None)
    if not fields or field_name not in fields:
        return None
    candidates: list[Any] = [fields[field_name].annotation]
    while candidates:
        annotation = candidates.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            type_field = annotation.model_fields.get("type")
            wanted = value.get("type") if isinstance(value, dict) else None
            if type_field is None or wanted is None or wanted in get_args(type_field.annotation):
                return annotation
            continue
        candidates.extend(get_args(annotation))
    return None


def _effective_on_error(spec: SignalSpecBase, entry: SignalType | None) -> str:
    if spec.on_error is not None:
        return spec.on_error
    return "match" if entry is not None and entry.signal.safety else "no_match"


def _why_unreachable(decision: Decision, higher: list[tuple[str, Condition]], on_error: Mapping[str, str]) -> str:
    found = contradictions(decision.when)
    if found:
        parts = [f"{c.leaf.describe()} must be both true ({c.leaf.path}) and false ({c.negated.path})" for c in found]
        return "its rule contradicts itself: " + "; ".join(parts)
    if reachable(decision.when, [], on_error) is False:
        return "its rule can never be true"
    names = shadowing(decision.when, higher, on_error)
    priority = {name: cond for name, cond in higher}
    if len(names) == 1:
        return f"decision {names[0]!r} has a higher priority and is true whenever this one is"
    listed = ", ".join(repr(n) for n in names if n in priority)
    return f"decisions {listed} have higher priorities and, together, one of them is true whenever this one is"


def policy_version(text: str) -> str:
    """A policy's version: the first 12 hex digits of its source text's sha256 (reload compares them)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _hash_policy(policy: Policy) -> str:
    return policy_version(policy.model_dump_json())


def _pydantic_message(err: Mapping[str, Any], fields: Iterable[str] = ()) -> str:
    message = str(err.get("msg", "invalid value"))
    if err.get("type") == "extra_forbidden":
        loc = err.get("loc") or ("",)
        close = difflib.get_close_matches(str(loc[-1]), list(fields), n=1, cutoff=0.6)
        return f"unknown field; did you mean {close[0]!r}?" if close else "unknown field"
    if err.get("type") == "missing":
        return "field required"
    return message.removeprefix("Value error, ")


def load_policy(
    path: Path | str,
    ctx: BuildContext,
    *,
    catalog: SignalCatalog | None = None,
) -> CompiledPolicy:
    """Read, validate and build the policy at `path`; raises PolicyError listing every problem."""
    path = Path(path)
    loader = PolicyLoader(catalog, file=str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError([Diagnostic("error", "", f"cannot read policy: {exc.strerror or exc}", str(path))]) from exc
    return compile_text(text, ctx, loader=loader, path=path)


def compile_text(
    text: str, ctx: BuildContext, *, loader: PolicyLoader | None = None, path: Path | None = None
) -> CompiledPolicy:
    loader = loader or PolicyLoader()
    policy = loader.parse_text(text)
    if policy is not None:
        loader.check(policy)
    compiled = None
    if policy is not None and not loader.has_errors:
        compiled = loader.build(policy, ctx, text=text, path=path)
    if compiled is None:
        raise PolicyError(loader.diagnostics)
    return compiled


def check_text(
    text: str, ctx: BuildContext, *, catalog: SignalCatalog | None = None, file: str = "<policy>"
) -> list[Diagnostic]:
    """Every diagnostic for a policy text, in one run: the signals are built (and their labels
    checked) even when other parts have errors; empty when clean. The models the signals get are
    `ctx.models`' (`extproc check` passes a registry that loads none unless asked)."""
    loader = PolicyLoader(catalog, file=file)
    policy = loader.parse_text(text)
    if policy is not None:
        loader.check(policy)
        with contextlib.suppress(PolicyError):
            loader.build(policy, ctx, text=text)
    return loader.diagnostics
