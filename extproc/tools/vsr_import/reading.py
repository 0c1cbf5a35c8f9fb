"""Reading a VSR config: its layout, the schema's capabilities, names, token counts, safe accessors."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from extproc.policy.schema import ModelSpec, RouteAction
from extproc.signals.registry import SignalCatalog
from extproc.tools.vsr_import.vocabulary import FLAT_TOP, Layout


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
    if any(k in config for k in FLAT_TOP):
        return "flat"
    raise VsrImportError(
        "not a vLLM Semantic Router config: expected `routing` / `providers` (current layout) or "
        "`model_config` / `vllm_endpoints` / `decisions` / `categories` (flat layout) at the top level"
    )


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


@dataclass(slots=True)
class VsrModel:
    vsr_name: str
    path: str
    upstream_model: str | None = None
    address: str | None = None
    cluster_hint: str | None = None
    context_window: int | None = None
    image: bool = False
    description: str = ""
    reasoning_family: str | None = None
    family_path: str = ""  # where the model's reasoning family is written
    declared: bool = True  # False: named only by a route (model_scores, modelRefs, default_model)


@dataclass(slots=True)
class VsrDecision:
    vsr_name: str
    path: str
    priority: int
    when: dict[str, Any] | None  # None: catch-all (no conditions)
    body: dict[str, Any]  # action, plugins, cache, description (our fields)
    guards: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (kind, decision body) above it


def indexes(location: str) -> tuple[int, int]:
    """The decision index and (if any) the model index of a `decisions[3].action.models[1]` location."""
    found = [int(n) for n in re.findall(r"\[(\d+)\]", location)]
    return found[0], (found[1] if len(found) > 1 else -1)


def first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(map(str, err['loc'])) or 'value'}: {str(err['msg']).removeprefix('Value error, ')}"
    return str(exc)


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def as_mapping(raw: Any) -> Mapping[str, Any]:
    return raw if isinstance(raw, Mapping) else {}


def as_list(raw: Any) -> list[Any]:
    return list(raw) if isinstance(raw, list | tuple) else []


def str_or_none(raw: Any) -> str | None:
    return None if raw is None or raw == "" else str(raw)


def has_vision(capabilities: Any) -> bool:
    return any(str(c).lower() in ("vision", "multimodal", "image_input") for c in as_list(capabilities))


def leaf_signals(when: Any) -> Iterable[str]:
    if isinstance(when, Mapping):
        if "signal" in when:
            yield str(when["signal"])
        for key in ("all", "any"):
            for child in as_list(when.get(key)):
                yield from leaf_signals(child)
        if "not" in when:
            yield from leaf_signals(when["not"])
