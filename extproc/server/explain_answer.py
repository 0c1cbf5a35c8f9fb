"""What the server would answer Envoy for an outcome, for `extproc explain` and the admin port's
`/v1/explain` alike: built by the servicer's own request phase and `server.mutations`, so the
explained mutations are the ones sent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from extproc.protocol.formats import API_PATHS
from extproc.server import mutations
from extproc.server.request_phase import RequestPhase
from extproc.server.stream_state import RequestState

if TYPE_CHECKING:
    from extproc.outcome import RoutingOutcome
    from extproc.router import Router
    from extproc.server.response_tools import ResponseTools
    from extproc.server.stream_state import Backends


def envoy_answer(router: Router, outcome: RoutingOutcome, path: str | None) -> dict[str, Any]:
    """The server's answer to Envoy for this outcome (one-message flow, no cache or conversation
    lookup)."""
    api = outcome.request.api if outcome.request is not None else None
    api_path = path or next((p for p, kind in API_PATHS.items() if kind is api), "")
    # An answer reads neither the backends nor the tool rules (those serve the lookups and MCP).
    phase = RequestPhase(cast("Backends", None), cast("ResponseTools", None))
    response = phase.answer(outcome, RequestState(path=api_path), bool(router.policy.tool_rules))
    return mutations.describe(response)
