"""Requests the router does not classify (embeddings, audio, rerank, ...): sent to the policy model
they name, unexamined.

Envoy's passthrough routes for these paths (`ops.envoy_config.routing`) send the buffered body
here. The request's `model` (a JSON body's field, or a multipart form's `model` part for audio
uploads) is looked up among the policy's models by name or upstream id: found, the request goes
to that model's cluster (the body's `model` rewritten to the upstream id for JSON bodies) with the
decision `passthrough`; not found, the policy's `unknown_models` says: `reject` answers 404
`model_not_found`, otherwise the request goes on to the default cluster unchanged.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from extproc import headers as vsr
from extproc.protocol.formats import error_body
from extproc.protocol.request import ApiKind
from extproc.server import mutations

if TYPE_CHECKING:
    from extproc.policy.schema import ModelSpec, Policy

# Paths vLLM serves besides the ones the router classifies (protocol.formats.API_PATHS).
PASSTHROUGH_PATHS = frozenset(
    {
        "/v1/embeddings",
        "/v1/audio/transcriptions",
        "/v1/audio/translations",
        "/v1/audio/speech",
        "/v1/rerank",
        "/v1/score",
        "/v1/classify",
        "/v1/pooling",
        "/v1/tokenize",
        "/v1/detokenize",
    }
)
DECISION = "passthrough"
_FORM_MODEL = re.compile(rb'name="model"\r?\n(?:[^\r\n]+\r?\n)*\r?\n([^\r\n]{1,256})\r?\n')
_JSON = {"content-type": "application/json"}


def requested_model(body: bytes) -> tuple[str | None, dict[str, Any] | None]:
    """The `model` a body names, and the parsed JSON object when the body is one."""
    stripped = body.lstrip()
    if stripped.startswith(b"{"):
        try:
            doc = json.loads(body)
        except ValueError:
            return None, None
        if isinstance(doc, dict):
            model = doc.get("model")
            return (model if isinstance(model, str) else None), doc
        return None, None
    found = _FORM_MODEL.search(body[:1_000_000])
    return (found.group(1).decode("utf-8", "replace").strip() if found else None), None


def find_model(policy: Policy, name: str) -> ModelSpec | None:
    return next((m for m in policy.models if name in (m.name, m.target_model)), None)


def answer(policy: Policy, body: bytes) -> Any:
    """The ext_proc answer for a passthrough request's body."""
    name, doc = requested_model(body)
    model = find_model(policy, name) if name else None
    if model is None:
        if policy.unknown_models == "reject":
            message = f"The model {name!r} does not exist" if name else "The request names no model"
            error = json.dumps(error_body(ApiKind.CHAT, 404, message, code="model_not_found", param="model"))
            return mutations.immediate(404, _JSON, error.encode(), details="vsr_passthrough_unknown_model")
        return mutations.continue_request_body()  # the default cluster, as before
    if doc is not None and doc.get("model") != model.target_model:
        doc["model"] = model.target_model
        body = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    metadata: dict[str, object] = {
        vsr.CLUSTER_KEY: model.cluster,
        vsr.DECISION_KEY: DECISION,
        vsr.MODEL_KEY: model.name,
    }
    return mutations.route_request_body({}, body, metadata)
