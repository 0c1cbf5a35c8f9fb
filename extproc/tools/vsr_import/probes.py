"""VSR's recipe probes as the migration's acceptance test.

A VSR recipe ships `probes.yaml`: per decision, the `expected_decision` and request variants
(a `query`, or `messages`, optional `tools`, a `repeat` count for long inputs, image fixtures).
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
    result: ImportResult | None = None
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


def load_probes(path: Path, *, model: str = "auto") -> list[Probe]:
    """Every variant of a probes file as a request (`model` unless the probe names its own)."""
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    images = (raw.get("fixtures") or {}).get("images") or {}
    probes: list[Probe] = []
    for group in raw.get("decisions") or []:
        for variant in group.get("variants") or []:
            if "messages" in variant:
                messages = [
                    {"role": m["role"], "content": _content(m.get("content"), images)} for m in variant["messages"]
                ]
            else:
                text = str(variant.get("query", ""))
                repeat = int(variant.get("repeat") or 1)
                messages = [{"role": "user", "content": " ".join([text] * repeat)}]
            body: dict[str, Any] = {"model": group.get("model") or model, "messages": messages}
            if variant.get("tools"):
                body["tools"] = variant["tools"]
            probes.append(Probe(str(group["id"]), str(group["expected_decision"]), str(variant["id"]), body))
    return probes


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


def score_recipe(
    name: str,
    config_path: Path,
    probes_path: Path,
    settings: Settings,
    *,
    recipe: str | None = None,
    kb_dirs: Mapping[str, Path] | None = None,
    calibrate: bool = True,
) -> RecipeScore:
    """Import `config_path`, route every probe of `probes_path` through the result, count agreements."""
    score = RecipeScore(name)
    probes = load_probes(probes_path)
    # VSR's probe runner waits minutes per request; a probe is a test of the decision, not of latency,
    # so a signal still loading its model (or a busy machine) must not turn into an unknown here.
    dispatch = settings.dispatch.model_copy(update={"request_deadline_ms": PROBE_DEADLINE_MS})
    settings = settings.model_copy(update={"dispatch": dispatch})
    executor = HeavyExecutor(settings.dispatch.executor_workers, settings.dispatch.torch_threads)
    models = ModelRegistry()
    ctx = BuildContext(settings=settings, executor=executor, models=models)
    try:
        embedder = ctx.text_embedder() if calibrate else None
        try:
            result = import_recipe(
                config_path, recipe=recipe, kb_dirs=kb_dirs, embed=embedder.embed if embedder else None
            )
        except Exception as exc:  # a recipe the importer refuses scores zero, with why
            score.error = f"import failed: {exc}"
            score.outcomes = [ProbeOutcome(p, None, False) for p in probes]
            return score
        score.result = result
        # The same reason as the request deadline: no signal times out while its model loads.
        patient = replace(result, policy={**result.policy, "signal_timeout_ms": PROBE_DEADLINE_MS})
        policy = compile_text(render_policy(patient, source=config_path.name), ctx, loader=PolicyLoader(file=name))
        router = Router(settings, policy, executor=executor, models=models)
        score.outcomes = asyncio.run(route_probes(router, probes))
    except Exception as exc:
        score.error = f"imported policy failed: {exc}"
        score.outcomes = [ProbeOutcome(p, None, False) for p in probes]
    finally:
        executor.shutdown()
    return score
