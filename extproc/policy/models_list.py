"""`GET /v1/models`, answered by the router from the policy: what a client may put in `model`.

The aliases (`auto` and friends: "route me") and the policy's `client_models` (models a client
may pick by name), never the whole cluster list: a model only reachable through a decision is
not advertised. OpenAI's list shape by default; Anthropic's (`data`, `has_more`, `first_id`,
`last_id`, objects of `type: model`) for clients that send `anthropic-version`, as the
`anthropic` SDK does. The upstream model ids are not shown (they are the operator's).
"""

from __future__ import annotations

from typing import Any

from extproc.policy.schema import Policy

MODELS_PATH = "/v1/models"
OWNER = "vsr"


def is_models_path(path: str) -> bool:
    """`/v1/models` or `/v1/models/{id}` (a canonical path)."""
    return path == MODELS_PATH or (path.startswith(MODELS_PATH + "/") and "/" not in path[len(MODELS_PATH) + 1 :])


def model_ids(policy: Policy) -> list[tuple[str, str]]:
    """(id, description) of every model name a client may send, aliases first, no duplicates."""
    seen: dict[str, str] = {}
    for alias in policy.aliases:
        seen.setdefault(alias, "routed by the policy")
    for name in policy.client_models:
        spec = policy.model(name)
        if spec is not None:
            seen.setdefault(spec.name, spec.description or spec.name)
    return list(seen.items())


def models_body(policy: Policy, *, anthropic: bool, created: int = 0) -> dict[str, Any]:
    ids = model_ids(policy)
    if anthropic:
        data = [
            {"type": "model", "id": name, "display_name": name, "created_at": "1970-01-01T00:00:00Z"} for name, _ in ids
        ]
        return {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    return {
        "object": "list",
        "data": [{"id": name, "object": "model", "created": created, "owned_by": OWNER} for name, _ in ids],
    }


def model_body(policy: Policy, name: str, *, anthropic: bool) -> dict[str, Any] | None:
    """`GET /v1/models/{name}`: one object, or None when the name is not one a client may send."""
    for listed in models_body(policy, anthropic=anthropic)["data"]:
        if listed["id"] == name:
            return dict(listed)
    return None
