"""VSR's recipe probes as the migration's acceptance test.

A VSR recipe ships `probes.yaml`: per decision, the `expected_decision` and request variants
(a `query`, or `messages`, optional `tools`, a `repeat` count or a `padding` block for long inputs,
a `generated_text` block sizing a message to so many bytes, image fixtures).
`score_recipe` imports the recipe's config, builds the imported policy with the real signals and
routes every variant through the Router, in process, counting the variants decided as VSR
expects. Nothing here knows any probe's answer: the requests go through the engine as a client's
would, and the score is what the import makes of the recipe.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.policy.load import PolicyLoader, compile_text
from extproc.router import Router
from extproc.settings import Settings
from extproc.signals.base import BuildContext
from extproc.tools.vsr_import.calibration import Embed
from extproc.tools.vsr_import.importer import import_vsr
from extproc.tools.vsr_import.report import ImportResult, render_policy

PROBE_DEADLINE_MS = 120_000.0


@dataclass(frozen=True, slots=True)
class Probe:
    decision: str  # the probe group's id
    expected: str  # VSR's expected_decision
    variant: str
    body: dict[str, Any]  # the Chat Completions request


@dataclass(slots=True)
class ProbeOutcome:
    probe: Probe
    decided: str | None
    ok: bool


@dataclass(slots=True)
class RecipeScore:
    recipe: str
    outcomes: list[ProbeOutcome] = field(default_factory=list)
    result: ImportResult | None = None  # the (first) recipe's import
    results: dict[str, ImportResult] = field(default_factory=dict)  # by recipe ('' the default)
    error: str | None = None

    @property
    def passed(self) -> int:
        return sum(o.ok for o in self.outcomes)

    @property
    def total(self) -> int:
        return len(self.outcomes)

    def misses(self) -> list[ProbeOutcome]:
        return [o for o in self.outcomes if not o.ok]


def _content(raw: Any, images: Mapping[str, Any]) -> Any:
    """A probe message's content, with `image_fixture` parts as data-URI images."""
    if not isinstance(raw, list):
        return raw
    parts: list[Any] = []
    for part in raw:
        if isinstance(part, Mapping) and part.get("type") == "image_fixture":
            fixture = images.get(str(part.get("fixture")), {})
            uri = f"data:{fixture.get('media_type', 'image/png')};base64,{fixture.get('data_base64', '')}"
            parts.append({"type": "image_url", "image_url": {"url": uri}})
        else:
            parts.append(part)
    return parts


def _message(raw: Mapping[str, Any], images: Mapping[str, Any]) -> dict[str, Any]:
    """A probe message as a Chat Completions message (tool calls and tool results kept)."""
    message: dict[str, Any] = {"role": raw["role"], "content": _content(raw.get("content"), images)}
    for key in ("tool_calls", "tool_call_id", "name"):
        if key in raw:
            message[key] = raw[key]
    return message


def _query_text(variant: Mapping[str, Any]) -> str:
    """A `query` variant's text: `repeat` copies, with the `padding` block before, after or around
    it (around: half the copies before, the rest after, so the total is what the probe sized)."""
    text = " ".join([str(variant.get("query", ""))] * int(variant.get("repeat") or 1))
    padding = variant.get("padding")
    if isinstance(padding, Mapping) and padding.get("text"):
        copies = int(padding.get("repeat") or 1)
        placement = padding.get("placement")
        if placement == "around":
            before = " ".join([str(padding["text"])] * (copies // 2))
            after = " ".join([str(padding["text"])] * (copies - copies // 2))
            return f"{before} {text} {after}"
        pad = " ".join([str(padding["text"])] * copies)
        text = f"{text} {pad}" if placement == "after" else f"{pad} {text}"
    return text


# The filler of a `generated_text` block that names no text of its own: neutral, no routing intent.
GENERATED_FILLER = "Neutral generated record for context capacity; it carries no request of its own. "


def _generate_text(messages: list[dict[str, Any]], spec: Mapping[str, Any]) -> None:
    """A `generated_text` block: a text part inserted at `content_index` of message `message_index`,
    filler repeated until that message's text is `target_text_bytes` UTF-8 bytes (VSR's long-context
    fixtures size a request this way instead of shipping megabytes of text)."""
    message = messages[int(spec.get("message_index") or 0)]
    content = message.get("content")
    parts: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    texts = [str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("type") == "text"]
    have = sum(len(t.encode()) for t in texts)
    missing = max(0, int(spec.get("target_text_bytes") or 0) - have)
    filler = str(spec.get("text") or GENERATED_FILLER)
    unit = filler.encode()
    body = (unit * (missing // len(unit) + 1))[:missing].decode("utf-8", "ignore")
    parts.insert(min(int(spec.get("content_index") or len(parts)), len(parts)), {"type": "text", "text": body})
    message["content"] = parts


def load_probes(path: Path, *, model: str = "auto") -> list[Probe]:
    """Every variant of a probes file as a request (`model` unless the probe names its own)."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    images = (raw.get("fixtures") or {}).get("images") or {}
    probes: list[Probe] = []
    for group in raw.get("decisions") or []:
        for variant in group.get("variants") or []:
            if "messages" in variant:
                messages = [_message(m, images) for m in variant["messages"]]
            else:
                messages = [{"role": "user", "content": _query_text(variant)}]
            if isinstance(variant.get("generated_text"), Mapping):
                _generate_text(messages, variant["generated_text"])
            body: dict[str, Any] = {"model": group.get("model") or model, "messages": messages}
            if variant.get("tools"):
                body["tools"] = variant["tools"]
            probes.append(Probe(str(group["id"]), str(group["expected_decision"]), str(variant["id"]), body))
    return probes


def entrypoint_recipes(config: Mapping[str, Any]) -> dict[str, str]:
    """VSR's entrypoints as model name -> recipe: the request's model picks the recipe that routes it."""
    out: dict[str, str] = {}
    for entry in config.get("entrypoints") or []:
        if isinstance(entry, Mapping) and entry.get("recipe"):
            for name in entry.get("model_names") or []:
                out.setdefault(str(name), str(entry["recipe"]))
    return out


def import_recipe(
    config_path: Path,
    *,
    recipe: str | None = None,
    kb_dirs: Mapping[str, Path] | None = None,
    embed: Embed | None = None,
) -> ImportResult:
    raw = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    return import_vsr(raw, recipe=recipe, kb_dirs=kb_dirs, base_dir=config_path.parent, embed=embed)


async def route_probes(router: Router, probes: list[Probe]) -> list[ProbeOutcome]:
    out: list[ProbeOutcome] = []
    for probe in probes:
        outcome = await router.route(json.dumps(probe.body).encode())
        out.append(ProbeOutcome(probe, outcome.decision, outcome.decision == probe.expected))
    return out


def _recipe_of(probes: list[Probe], config: Mapping[str, Any], recipe: str | None) -> list[str | None]:
    """Which recipe routes each probe: `recipe` if given, else the entrypoint of the probe's model."""
    if recipe is not None:
        return [recipe for _ in probes]
    by_model = entrypoint_recipes(config)
    return [by_model.get(str(p.body.get("model"))) for p in probes]


def score_recipe(
    name: str,
    config_path: Path,
    probes_path: Path,
    settings: Settings,
    *,
    recipe: str | None = None,
    kb_dirs: Mapping[str, Path] | None = None,
    calibrate: bool = True,
    models: ModelRegistry | None = None,
) -> RecipeScore:
    """Import `config_path`, route every probe of `probes_path` through the result, count agreements.

    A config with several recipes is several policies, as VSR serves it: each probe goes to the
    recipe its request's model names in `entrypoints` (the first recipe where none does). `models`
    lets several scores share one registry (one MiniLM, one domain classifier)."""
    score = RecipeScore(name)
    probes = load_probes(probes_path)
    raw = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    recipes = _recipe_of(probes, raw if isinstance(raw, Mapping) else {}, recipe)
    # VSR's probe runner waits minutes per request; a probe is a test of the decision, not of latency,
    # so a signal still loading its model (or a busy machine) must not turn into an unknown here.
    dispatch = settings.dispatch.model_copy(update={"request_deadline_ms": PROBE_DEADLINE_MS})
    settings = settings.model_copy(update={"dispatch": dispatch})
    executor = HeavyExecutor(settings.dispatch.executor_workers, settings.dispatch.torch_threads)
    models = models if models is not None else ModelRegistry()
    ctx = BuildContext(settings=settings, executor=executor, models=models)
    routers: dict[str | None, Router] = {}
    try:
        embedder = ctx.text_embedder() if calibrate else None
        for chosen in dict.fromkeys(recipes):
            try:
                result = import_vsr(
                    raw,
                    recipe=chosen,
                    kb_dirs=kb_dirs,
                    base_dir=config_path.parent,
                    embed=embedder.embed if embedder else None,
                )
            except Exception as exc:  # a recipe the importer refuses scores zero, with why
                score.error = f"import failed ({chosen or 'default recipe'}): {exc}"
                score.outcomes = [ProbeOutcome(p, None, False) for p in probes]
                return score
            score.results[chosen or ""] = result
            score.result = score.result or result
            # The same reason as the request deadline: no signal times out while its model loads.
            patient = replace(result, policy={**result.policy, "signal_timeout_ms": PROBE_DEADLINE_MS})
            loader = PolicyLoader(file=f"{name}:{chosen}" if chosen else name)
            policy = compile_text(render_policy(patient, source=config_path.name), ctx, loader=loader)
            routers[chosen] = Router(settings, policy, executor=executor, models=models)
        score.outcomes = asyncio.run(route_probes_by_recipe(routers, list(zip(probes, recipes, strict=True))))
    except Exception as exc:
        score.error = f"imported policy failed: {exc}"
        score.outcomes = [ProbeOutcome(p, None, False) for p in probes]
    finally:
        executor.shutdown()
    return score


async def route_probes_by_recipe(
    routers: Mapping[str | None, Router], probes: list[tuple[Probe, str | None]]
) -> list[ProbeOutcome]:
    out: list[ProbeOutcome] = []
    for probe, chosen in probes:
        out += await route_probes(routers[chosen], [probe])
    return out
