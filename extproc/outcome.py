"""A routing outcome: the decision with its trace, the facts the wire is rendered from (the
model, cluster, reasoning, selection), the rewritten body and the explain JSON. The headers,
metadata and immediate answers are rendered in one place, `extproc.server.wire`; edges map the
outcome, they never re-decide."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from extproc.errors import RequestError
from extproc.policy.engine import ActionKind, DecisionTrace, EngineResult
from extproc.policy.reasoning import apply_reasoning
from extproc.policy.schema import ModelSpec, Plugins
from extproc.protocol.formats import format_for
from extproc.protocol.formats.base import Translation
from extproc.protocol.request import ApiKind, RoutingRequest
from extproc.protocol.responses import dumps, rewrite_body
from extproc.signals.base import SignalResult


@dataclass(slots=True)
class RoutingOutcome:
    """The engine's result for one request, with the request, its signal results and timings."""

    result: EngineResult
    policy_version: str
    request: RoutingRequest | None = None
    signals: list[SignalResult] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    request_id: str | None = None
    cache: dict[str, Any] | None = None  # the semantic cache's part (CacheLookup.to_dict), when it took one
    reasoning_sent: str | None = None  # the x-vsr-reasoning value, once the body was rewritten
    conversation: dict[str, Any] | None = None  # the conversation store's part (ConversationLookup.to_dict)
    path_api: ApiKind | None = None  # the API the request path names, for a request that did not parse

    # -- the decision (the engine's words) ------------------------------------------------
    @property
    def action(self) -> ActionKind:
        return self.result.action

    @property
    def decision(self) -> str | None:
        return self.result.decision

    @property
    def status(self) -> int:
        return self.result.status

    @property
    def model(self) -> ModelSpec | None:
        return self.result.model

    @property
    def message(self) -> str | None:
        return self.result.message

    @property
    def code(self) -> str | None:
        return self.result.code

    @property
    def error(self) -> RequestError | None:
        return self.result.error

    @property
    def overload(self) -> str | None:
        """`shed` (answered 429) or `fail_safe` (routed fail-safe) when overload decided, else None."""
        return "shed" if self.result.shed else "fail_safe" if self.result.fail_safe else None

    @property
    def plugins(self) -> Plugins:
        return self.result.plugins

    @property
    def trace(self) -> list[DecisionTrace]:
        return self.result.trace

    @property
    def notes(self) -> list[str]:
        return self.result.notes

    # -- facts --------------------------------------------------------------------------
    def matched_signals(self) -> list[str]:
        return [s.name for s in self.signals if s.matched]

    @property
    def api(self) -> ApiKind:
        if self.request is not None:
            return self.request.api
        return self.path_api or ApiKind.CHAT

    # -- renderings ---------------------------------------------------------------------
    def rewritten_body(self) -> bytes:
        """The body to forward upstream: model rewritten, system-prompt plugin applied."""
        if self.action != "route" or self.model is None or self.request is None:
            raise ValueError(f"only a routed request has a rewritten body (action is {self.action})")
        prompt = self.plugins.system_prompt
        translation = self.translation
        if translation is not None:
            raw = dict(self.request.raw)
            if prompt is not None:
                format_for(self.api).insert_system_prompt(raw, self.request.raw, prompt.content, prompt.mode)
            sent = translation.request(raw, self.model.target_model)
            if self.result.reasoning is not None:  # written as for any body of the target format
                self._write_reasoning(sent)
            return dumps(sent)
        body, notes = rewrite_body(
            self.request.raw,
            self.request.api,
            self.model.target_model,
            prompt.content if prompt is not None else None,
            prompt.mode if prompt is not None else "insert",
            edit=self._write_reasoning if self.result.reasoning is not None else None,
        )
        self.notes.extend(n for n in notes if n not in self.notes)
        return body

    def _write_reasoning(self, body: dict[str, Any]) -> None:
        setting, family = self.result.reasoning, self.result.reasoning_family
        if setting is not None and family is not None and self.request is not None:
            self.reasoning_sent = apply_reasoning(body, self.wire_api, setting, family)

    @property
    def reasoning(self) -> str | None:
        """What the upstream is told about thinking (`on:high`, `off`, `kept`, `none`); None when
        the route has no reasoning setting. Known without rewriting the body."""
        if self.reasoning_sent is not None:
            return self.reasoning_sent
        setting, family = self.result.reasoning, self.result.reasoning_family
        if self.action != "route" or setting is None or family is None or self.request is None:
            return None
        return apply_reasoning({}, self.wire_api, setting, family)

    @property
    def wire_api(self) -> ApiKind:
        """The API of the body sent upstream: Chat for a translated Messages request."""
        translation = self.translation
        return translation.target if translation is not None else self.api

    @property
    def translation(self) -> Translation | None:
        """How a request routed to a model whose server does not speak its API family (a
        Messages request to an OpenAI-only model) is sent, and its answer brought back: its
        format's translation (`protocol.formats`); None when it goes as it came."""
        if self.action != "route" or self.request is None or self.model is None:
            return None
        fmt = format_for(self.request.api)
        return None if self.model.speaks(fmt.error_family) else fmt.translation

    @property
    def translates(self) -> bool:
        """Whether the body goes upstream in another format, the answer translated back."""
        return self.translation is not None

    @property
    def unknown_model_header(self) -> str | None:
        """x-vsr-unknown-model: the client's model name, as printable ASCII (it is client input)."""
        asked = self.result.unknown_model
        if asked is None:
            return None
        return "".join(c if " " <= c <= "~" else "?" for c in asked[:128])

    @property
    def cluster(self) -> str | None:
        """The Envoy cluster the request goes to: the chosen model's, or its failover aggregate
        (unless the conversation moved the request to another model after selection)."""
        model, selected = self.model, self.result.selection
        if model is None:
            return None
        return selected.cluster if selected is not None and selected.model is model else model.cluster

    @property
    def selection_header(self) -> str | None:
        """x-vsr-selection: shown for routes that select (not plain `ordered`)."""
        selected = self.result.selection
        if selected is None or not selected.shown:
            return None
        if selected.model is not self.model and self.model is not None:
            return f"conversation:{self.model.name} (selection said {selected.reason})"
        return selected.reason

    def trace_header(self) -> str:
        """A compact one-line trace: decision values, then every signal's status and score."""
        decisions = " ".join(f"{t.name}={t.value.name[0].lower()}" for t in self.trace)
        signals = " ".join(f"{s.name}={s.status.value}:{s.score:.2f}" for s in self.signals)
        return f"v={self.policy_version} d[{decisions}] s[{signals}] t={self.timings_ms.get('total', 0.0):.2f}ms"

    def to_dict(self) -> dict[str, Any]:
        """The explain object: the same shape from the CLI and the admin API."""
        return {
            "decision": self.decision,
            "action": self.action,
            "model": self.model.name if self.model is not None else None,
            "cluster": self.cluster,
            "selection": self.result.selection.to_dict() if self.result.selection is not None else None,
            "upstream_model": self.model.target_model if self.model is not None else None,
            "reasoning": self.reasoning,
            "status": self.status,
            "message": self.message if self.error is None else self.error.message,
            "error": self.error.to_body()["error"] if self.error is not None else None,
            "policy_version": self.policy_version,
            "overload": self.overload,
            "cache": self.cache,
            "conversation": self.conversation,
            "request": _request_summary(self.request),
            "signals": [s.to_dict() for s in self.signals],
            "trace": {
                "decisions": [t.to_dict() for t in self.trace],
                "notes": list(self.notes),
                "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            },
        }


def _request_summary(request: RoutingRequest | None) -> dict[str, Any] | None:
    if request is None:
        return None
    return {
        "api": request.api.value,
        "model": request.model,
        "stream": request.stream,
        "text_segments": len(request.texts),
        "images": [
            {"sha256": i.sha256, "format": i.format, "width": i.width, "height": i.height, "bytes": i.byte_size}
            for i in request.images
        ],
        "remote_images": len(request.remote_images),
        "tools": list(request.tools),
        "turns": request.turn_count,
    }
