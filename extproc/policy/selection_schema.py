"""What a route's `selection` and a model card's fleet fields say (pydantic; read by `selection`).

A route action may write `selection: latency` (the algorithm's name) or a mapping with
`algorithm:` and its options. A model card may carry `metrics_url` (its vLLM server's Prometheus
endpoint, for `least_loaded`), `cost` (per million input and output tokens, for `cost`) and
`max_waiting` (a conversation leaves a model with more requests queued than this).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Algorithm = Literal["ordered", "weighted", "least_loaded", "latency", "cost"]
ALGORITHMS: tuple[str, ...] = ("ordered", "weighted", "least_loaded", "latency", "cost")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelCost(_Strict):
    """Price per million tokens, in whatever currency the policy's author uses for all models."""

    input_per_million: float = Field(ge=0.0)
    output_per_million: float = Field(ge=0.0)


class SelectionSpec(_Strict):
    """How a route picks among its capable candidates (capability filtering always comes first)."""

    algorithm: Algorithm = "ordered"
    # weighted: relative shares by model name; a candidate left out gets no share.
    weights: dict[str, float] = Field(default_factory=dict)
    # latency: each candidate is tried this many times before it is compared (warm-up), and a
    # fraction `explore` of requests goes to another capable candidate so a model that got faster
    # (or recovered) is noticed; an estimate whose samples have decayed below `min_samples` is stale.
    min_samples: int = Field(default=3, ge=1, le=1000)
    explore: float = Field(default=0.05, ge=0.0, le=0.5)
    # least_loaded: load scraped longer ago than this is stale (ordered is used, and says so).
    stale_after_s: float = Field(default=15.0, gt=0.0, le=3600.0)
    # cost: the output length assumed when the request sets no max_tokens.
    expected_output_tokens: int = Field(default=256, ge=1, le=1_000_000)
    # Failover on the failing request, done by Envoy: the route's cluster is an aggregate of the
    # chosen model's cluster and the next capable one's, retried on connection failure or 503.
    failover: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, raw: Any) -> Any:
        # `selection: latency` is short for `selection: {algorithm: latency}`.
        return {"algorithm": raw} if isinstance(raw, str) else raw

    @model_validator(mode="after")
    def _check_weights(self) -> SelectionSpec:
        if self.algorithm == "weighted":
            if not self.weights:
                raise ValueError("selection: weighted needs `weights: {model: share}`")
            if any(w < 0 for w in self.weights.values()) or sum(self.weights.values()) <= 0:
                raise ValueError("selection weights must be >= 0 with a positive total")
        elif self.weights:
            raise ValueError(f"selection weights are read only by `weighted`, not {self.algorithm!r}")
        return self


def check_route_selection(route_name: str, models: list[str], spec: SelectionSpec) -> None:
    """A route's selection against its model list: weights name only the route's models."""
    unknown = [name for name in spec.weights if name not in models]
    if unknown:
        raise ValueError(
            f"decision {route_name!r}: selection weights name {', '.join(map(repr, unknown))}, "
            f"not in its models {models}"
        )
