"""Whether each route decision's models can read the requests that reach it (images or not).

- An error: a decision that fires only on requests with images routes to a model that reads
  text only (the request could never be served there).
- A warning: a decision (or the default) that routes only to text-only models, and that an
  image request can reach (no higher decision takes every image request, and its rule does not
  exclude them): such a request gets 400 no_capable_model, which an author rarely means. The default policy's
  subject routes had this defect: "What am I looking at?" with a photo read as an easy
  computer-science question and was answered 400.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from extproc.policy.conditions import excludes_image, requires_image, true_for_every_image
from extproc.policy.schema import ModelSpec, Policy


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Literal["error", "warning"]
    path: tuple[str | int, ...]
    message: str


def capability_findings(
    policy: Policy, models: dict[str, ModelSpec], implies_image: Callable[[str], bool]
) -> Iterator[Finding]:
    """The policy's capability errors (in file order), then its warnings (by priority)."""
    for index, decision in enumerate(policy.decisions):
        if decision.action.type != "route" or not requires_image(decision.when, implies_image):
            continue
        for m_index, name in enumerate(decision.action.models):
            if name in models and not models[name].accepts("image"):
                yield Finding(
                    "error",
                    ("decisions", index, "action", "models", m_index),
                    f"model {name!r} accepts only {models[name].modalities}, but decision "
                    f"{decision.name!r} only fires on requests with images",
                )
    if not any(model.accepts("image") for model in models.values()):
        return  # a text-only deployment: every image request is refused alike, no decision in particular
    # Signals positive exactly when a request carries an image: `not` of one keeps a rule off images.
    presence = {
        s.name
        for s in policy.signals
        if s.type == "modality" and getattr(s, "min_images", 1) == 1 and getattr(s, "count_remote", True)
    }
    is_presence = presence.__contains__
    guard = f"`not: {{signal: {min(presence)}}}`" if presence else "`not` of a `modality` signal"
    for index, decision in sorted(enumerate(policy.decisions), key=lambda pair: -pair[1].priority):
        if true_for_every_image(decision.when, is_presence):
            return  # every image request stops here: lower decisions see text only
        if decision.action.type != "route" or excludes_image(decision.when, is_presence):
            continue
        if requires_image(decision.when, implies_image):
            continue  # fires on images only: an error above names each text-only model
        named = _text_only(decision.action.models, models)
        if named:
            yield Finding(
                "warning",
                ("decisions", index, "action", "models"),
                f"decision {decision.name!r} routes only to text-only models {named}, and its rule does "
                f"not keep it off requests with images: an image request it matches gets 400 "
                f"no_capable_model (add {guard} to its rule, or a model that accepts images)",
            )
    # No decision took every image request, so the ones none matches reach the default.
    default = policy.default
    named = _text_only(default.action.models, models) if default.action.type == "route" else []
    if named:
        yield Finding(
            "warning",
            ("default", "action", "models"),
            f"the default {default.name!r} routes only to text-only models {named}: an image request no "
            f"decision takes gets 400 no_capable_model (list a model that accepts images after them, or "
            f"add a decision on a `modality` signal that takes every image request)",
        )


def _text_only(route: list[str], models: dict[str, ModelSpec]) -> list[str]:
    """A route's known models when none of them reads images, else [] (unknown names are reported elsewhere)."""
    named = [name for name in route if name in models]
    return [] if any(models[name].accepts("image") for name in named) else named
