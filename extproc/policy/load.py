"""Load a policy file: YAML -> schema -> semantic checks -> built signals, with precise diagnostics.

Every problem is reported with the file, the line, the path in the document and what is
wrong, and all of them at once: an operator fixing a policy should not play whack-a-mole.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ValidationError

from extproc.policy.conditions import (
    Condition,
    ConditionError,
    Leaf,
    Tri,
    evaluate,
    leaves,
    parse_condition,
    requires_image,
    to_dnf,
)
from extproc.policy.schema import Decision, DefaultDecision, ModelSpec, Policy, ToolRule
from extproc.signals.base import BuildContext, Signal, SignalSpecBase
from extproc.signals.registry import SignalCatalog, SignalType

Path_ = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    severity: Literal["error", "warning"]
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


class _Lines:
    """Line numbers of every mapping key / list item in a YAML document, by path."""

    def __init__(self, text: str) -> None:
        self.lines: dict[Path_, int] = {}
        try:
            root = yaml.compose(text)
        except yaml.YAMLError:
            return
        if root is not None:
            self._walk(root, ())

    def _walk(self, node: yaml.Node, path: Path_) -> None:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = (*path, str(key.value))
                self.lines[sub] = key.start_mark.line + 1
                self._walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                self._walk(item, (*path, index))

    def find(self, path: Path_) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get(())


def _cond_path(text: str) -> Path_:
    """'all[1].not[0]' -> ('all', 1, 'not', 0)"""
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

    # -- diagnostics ------------------------------------------------------------------
    def error(self, path: Path_, message: str) -> None:
        self._add("error", path, message)

    def warning(self, path: Path_, message: str) -> None:
        self._add("warning", path, message)

    def _add(self, severity: Literal["error", "warning"], path: Path_, message: str) -> None:
        self.diagnostics.append(Diagnostic(severity, format_loc(path), message, self.file, self.lines.find(path)))

    @property
    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.diagnostics)

    # -- stages -----------------------------------------------------------------------
    def parse_text(self, text: str) -> Policy | None:
        self.lines = _Lines(text)
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            problem = getattr(exc, "problem", None) or str(exc)
            self.diagnostics.append(Diagnostic("error", "", f"invalid YAML: {problem}", self.file, line))
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
            policy = Policy.model_validate(data)
        except ValidationError as exc:
            for err in exc.errors():
                loc = tuple(err["loc"])
                self.error(loc, _pydantic_message(err))
            return None
        if self.has_errors:
            return None
        return policy

    def _parse_signals(self, raw: Any) -> Any:
        if not isinstance(raw, list):
            return raw  # pydantic reports the type problem
        specs: list[Any] = []
        for index, item in enumerate(raw):
            path: Path_ = ("signals", index)
            if not isinstance(item, dict):
                self.error(path, "a signal must be a mapping with 'name' and 'type'")
                continue
            type_name = item.get("type")
            if not isinstance(type_name, str):
                self.error((*path, "type"), f"'type' is required; one of {self.catalog.names()}")
                continue
            try:
                entry = self.catalog.get(type_name)
            except ImportError as exc:
                self.error((*path, "type"), f"signal type {type_name!r} cannot be loaded: {exc}")
                continue
            if entry is None:
                self.error((*path, "type"), f"unknown signal type {type_name!r}; one of {self.catalog.names()}")
                continue
            try:
                specs.append(entry.spec.model_validate(item))
            except ValidationError as exc:
                for err in exc.errors():
                    self.error((*path, *err["loc"]), _pydantic_message(err))
        return specs

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
                    item["when"] = Leaf(signal="<invalid>")
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
            if name not in models:
                self.error(("client_models", index), f"unknown model {name!r}; models are {sorted(models)}")

        signal_specs = {s.name: s for s in policy.signals}
        types = {s.name: self.catalog.get(str(getattr(s, "type", ""))) for s in policy.signals}
        used: set[str] = set()
        for d_index, decision in enumerate(policy.decisions):
            for leaf in leaves(decision.when):
                used.add(leaf.signal)
                if leaf.signal not in signal_specs:
                    self.error(
                        ("decisions", d_index, "when", *_cond_path(leaf.path)),
                        f"unknown signal {leaf.signal!r}; signals are {sorted(signal_specs)}",
                    )
        self._duplicates("tool_rules", [r.name for r in policy.tool_rules], "tool rule name")
        self._duplicates("tool_rules", [r.priority for r in policy.tool_rules], "priority", key="priority")
        for r_index, rule in enumerate(policy.tool_rules):
            for leaf in leaves(rule.when):
                used.add(leaf.signal)
                if leaf.signal not in signal_specs:
                    self.error(
                        ("tool_rules", r_index, "when", *_cond_path(leaf.path)),
                        f"unknown signal {leaf.signal!r}; signals are {sorted(signal_specs)}",
                    )
        self._duplicates("mcp", [m.name for m in policy.mcp.servers], "MCP server name")
        holders: list[Decision | DefaultDecision] = [*policy.decisions, policy.default]
        for d_index, action_holder in enumerate(holders):
            action = action_holder.action
            path: Path_ = ("decisions", d_index) if isinstance(action_holder, Decision) else ("default",)
            if action.type == "route":
                for m_index, name in enumerate(action.models):
                    if name not in models:
                        self.error((*path, "action", "models", m_index), f"unknown model {name!r}")
                if len(set(action.models)) != len(action.models):
                    self.error((*path, "action", "models"), "a model is listed twice")
        for index, spec in enumerate(policy.signals):
            if spec.name not in used:
                self.warning(
                    ("signals", index), f"signal {spec.name!r} is used by no decision or tool rule; it will not run"
                )
        if self.has_errors:
            return
        self._check_capabilities(policy, models, types)
        self._check_reachability(policy, types)

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
                first = "the default decision" if seen[value] == -1 else f"{section}[{seen[value]}]"
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

        for index, decision in enumerate(policy.decisions):
            if decision.action.type != "route" or not requires_image(decision.when, implies_image):
                continue
            for m_index, name in enumerate(decision.action.models):
                if not models[name].accepts("image"):
                    self.error(
                        ("decisions", index, "action", "models", m_index),
                        f"model {name!r} accepts only {models[name].modalities}, but decision "
                        f"{decision.name!r} only fires on requests with images",
                    )

    def _check_reachability(self, policy: Policy, types: dict[str, SignalType | None]) -> None:
        """Report decisions that no outcome of their signals can ever select.

        A decision is reachable when some assignment of its leaves makes it true while every
        higher-priority decision is not true. Unknown is a legal value for signals whose
        `on_error` is `no_match`; for `match`/`reject` signals only true/false are.
        """
        on_error = {s.name: _effective_on_error(s, types.get(s.name)) for s in policy.signals}
        ordered = sorted(enumerate(policy.decisions), key=lambda pair: -pair[1].priority)
        higher: list[Condition] = []
        for index, decision in ordered:
            verdict = _reachable(decision.when, higher, on_error)
            if verdict is False:
                shadow = (
                    " (higher-priority decisions always win first, or its rule contradicts itself)" if higher else ""
                )
                self.error(("decisions", index, "when"), f"decision {decision.name!r} can never be reached{shadow}")
            elif verdict is None:
                self.warning(("decisions", index, "when"), "rule too large to check for reachability")
            higher.append(decision.when)

    def build(
        self, policy: Policy, ctx: BuildContext, *, text: str = "", path: Path | None = None
    ) -> CompiledPolicy | None:
        used = {leaf.signal for d in policy.decisions for leaf in leaves(d.when)}
        for_tools = {leaf.signal for r in policy.tool_rules for leaf in leaves(r.when)}
        built: dict[str, Signal] = {}
        for index, spec in enumerate(policy.signals):
            if spec.name not in used | for_tools:
                continue
            entry = self.catalog.get(str(getattr(spec, "type", "")))
            assert entry is not None  # checked during parsing
            try:
                built[spec.name] = entry.signal.build(spec, ctx)
            except Exception as exc:
                self.error(("signals", index), f"signal {spec.name!r} could not be built: {exc}")
        signals = {name: signal for name, signal in built.items() if name in used}  # what requests run
        for d_index, decision in enumerate(policy.decisions):
            for leaf in leaves(decision.when):
                signal = signals.get(leaf.signal)
                if signal is None or leaf.label is None:
                    continue
                known = signal.known_labels()
                if known is not None and leaf.label not in known:
                    self.error(
                        ("decisions", d_index, "when", *_cond_path(leaf.path)),
                        f"signal {leaf.signal!r} has no label {leaf.label!r}; its labels are {sorted(known)}",
                    )
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
        )


def _effective_on_error(spec: SignalSpecBase, entry: SignalType | None) -> str:
    if spec.on_error is not None:
        return spec.on_error
    return "match" if entry is not None and entry.signal.safety else "no_match"


def _reachable(cond: Condition, higher: list[Condition], on_error: Mapping[str, str]) -> bool | None:
    terms = to_dnf(cond)
    if terms is None:
        return None
    higher_atoms = sorted(
        {leaf.key for h in higher for leaf in leaves(h)}, key=lambda k: (k[0], k[1] or "", k[2] or -1.0)
    )
    for term in terms:
        # Atoms outside the term: unknown where the signal may stay unknown (which can only make
        # higher rules less true), otherwise try both truth values.
        free = [a for a in higher_atoms if a not in term and on_error.get(a[0], "no_match") != "no_match"]
        if len(free) > 12:
            return None
        for values in itertools.product((False, True), repeat=len(free)):
            assignment: dict[Any, Tri] = {k: Tri.of(v) for k, v in term.items()}
            assignment.update({k: Tri.of(v) for k, v in zip(free, values, strict=True)})

            def value_of(leaf: Leaf, assignment: dict[Any, Tri] = assignment) -> Tri:
                return assignment.get(leaf.key, Tri.UNKNOWN)

            if all(evaluate(h, value_of)[0] is not Tri.TRUE for h in higher):
                return True
    return False


def policy_version(text: str) -> str:
    """A policy's version: the first 12 hex digits of its source text's sha256 (reload compares them)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _hash_policy(policy: Policy) -> str:
    return policy_version(policy.model_dump_json())


def _pydantic_message(err: Mapping[str, Any]) -> str:
    message = str(err.get("msg", "invalid value"))
    if err.get("type") == "extra_forbidden":
        return "unknown field"
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
    """Every diagnostic for a policy text, building its signals; empty when clean."""
    loader = PolicyLoader(catalog, file=file)
    with contextlib.suppress(PolicyError):
        compile_text(text, ctx, loader=loader)
    return loader.diagnostics
