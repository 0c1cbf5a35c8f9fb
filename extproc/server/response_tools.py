"""The tool rules: the answer's tool calls judged before the client sees them, and MCP.

Response phase (the tool rules' ext_proc filter, on routes whose decision metadata carries
`respond`; or the three-message flow's response headers): the response headers say what the
answer is. A JSON answer is buffered and judged whole; an event stream passes through a
`StreamGate` that holds only what may carry a tool call. An answer to a request sent upstream in
another format (`translate`: a Chat answer to a Messages client) is brought back by that
format's translation (`protocol.formats`), errors included. Three-message flow without `respond`: the
decision's headers for the client.

MCP: a JSON-RPC `tools/call` is judged at the request and routed to the server that serves the
tool; a `tools/list` answer loses the tools a rule blocks on their name alone.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from extproc import headers as vsr
from extproc.agents import mcp
from extproc.agents.answer_gate import StreamGate, apply_to_json, calls_in_answer
from extproc.agents.tool_calls import ToolCall, Verdict, judge_calls, redact_arguments
from extproc.protocol.formats import translation_back
from extproc.protocol.formats.base import StreamTranslator, Translation
from extproc.protocol.request import ApiKind
from extproc.protocol.responses import dumps
from extproc.server import mutations

if TYPE_CHECKING:
    from extproc.observability.tracing import Attributes
    from extproc.router import Router
    from extproc.server.stream_state import Backends, RequestState

log = logging.getLogger("extproc.server")

_JSON = {"content-type": "application/json"}
_ERROR_BODY_LIMIT = 64 * 1024  # of an upstream's error body kept for its translation (the message is cut shorter)


@dataclass(slots=True)
class ToolsState:
    """One stream's response phase: what the decision said it needs, and the answer so far."""

    respond: str = ""  # json / stream / mcp_list, from the decision metadata
    api: str = ""
    store: bool = False  # the request asked to store the answer (the rules judge that too)
    # The answer is in another format than the client's (Chat for a Messages request): how it goes back.
    translation: Translation | None = None
    status: int = 0  # the upstream's, from the response headers
    content_type: str = ""  # lower-cased
    body: bytearray = field(default_factory=bytearray)
    gate: StreamGate | None = None
    translator: StreamTranslator | None = None  # a translated answer's stream, brought back event by event


class ResponseTools:
    """The tool rules' response phase and MCP requests, judged with the live router's policy."""

    def __init__(self, backends: Backends) -> None:
        self.backends = backends

    def headers(self, request: Any, state: RequestState, tools: ToolsState) -> Any:
        """Three-message flow: our headers for the client. Tool rules: note what the answer is."""
        fields = mutations.metadata_strings(request, vsr.DECISION_NAMESPACE)
        if vsr.RESPOND_KEY not in fields:
            return mutations.response_headers(state.client_headers)
        tools.respond = fields[vsr.RESPOND_KEY]
        tools.api = fields.get(vsr.API_KEY, ApiKind.CHAT.value)
        tools.store = vsr.STORE_KEY in fields
        if vsr.TRANSLATE_KEY in fields:
            tools.translation = translation_back(ApiKind(tools.api))
        tools.status, tools.content_type = mutations.status_and_type(request.response_headers)
        if tools.translation is not None and tools.status != 200:
            return self._translated_error_headers(request, tools, tools.translation)
        if tools.respond == "stream" and tools.status == 200 and "event-stream" in tools.content_type:
            tools.gate = StreamGate(ApiKind(tools.api))
            if tools.translation is not None:
                tools.translator = tools.translation.stream()
        return mutations.response_headers({})

    async def body(self, body: Any, state: RequestState, tools: ToolsState) -> Any:
        router = self.backends.router
        if tools.translation is not None and tools.status != 200:
            return self._translated_error(body, tools, tools.translation)
        if not tools.respond or tools.status != 200 or router is None:
            return mutations.continue_phase("response_body")
        if tools.gate is not None:  # a stream: pass what carries no tool call, hold the rest
            return await self._gated(body, state, tools, tools.gate, router)
        tools.body += body.body
        if not body.end_of_stream:
            return mutations.continue_phase("response_body")
        data = bytes(tools.body)
        tools.body = bytearray()
        if tools.respond == "mcp_list":
            return await self._mcp_list(data, state, tools, router)
        return await self._buffered(data, state, tools, router)

    async def _gated(self, body: Any, state: RequestState, tools: ToolsState, gate: StreamGate, router: Router) -> Any:
        """A streamed answer: each chunk passed, or held until its tool calls are judged."""
        passed = gate.feed(body.body, body.end_of_stream)
        if not body.end_of_stream or not gate.ready:
            if tools.translator is not None:
                passed = tools.translator.feed(passed, body.end_of_stream)
            return mutations.response_body(passed, clear=not passed)
        calls, text = gate.calls()
        verdict = await self.judge(router, calls, text, state, store=tools.store)
        out = passed + gate.release(verdict)
        if tools.translator is not None:
            out = tools.translator.feed(out, end=True)
        return mutations.response_body(out, clear=not out)

    async def _buffered(self, data: bytes, state: RequestState, tools: ToolsState, router: Router) -> Any:
        """A whole JSON answer: judged, rewritten by the verdict, translated back if asked."""
        try:
            doc = json.loads(data)
        except ValueError:
            return mutations.continue_phase("response_body")
        api = ApiKind(tools.api)
        calls, text = calls_in_answer(api, doc)
        verdict = await self.judge(router, calls, text, state, store=tools.store)
        new_body = apply_to_json(api, doc, verdict) if isinstance(doc, dict) else None
        if tools.translation is not None and isinstance(doc, dict):
            judged = json.loads(new_body) if new_body is not None else doc
            new_body = dumps(tools.translation.answer(judged))
        headers = verdict.headers()
        if new_body is not None:
            headers["content-length"] = str(len(new_body))
        return mutations.response_body(new_body, headers)

    async def judge(
        self, router: Router, calls: list[ToolCall], text: str, state: RequestState, *, store: bool = False
    ) -> Verdict:
        if not calls and not store:
            return Verdict()  # a plain answer to a request that offered tools: nothing to judge
        started = time.perf_counter()
        try:
            verdict = await judge_calls(router.policy, router.executor, calls, text=text, store=store)
        except Exception:  # a judge that cannot run blocks: an unchecked tool call must not pass
            log.exception("tool rules failed", extra={"request_id": state.request_id})
            return Verdict(
                action="block", rule="tool_rules_error", message="The gateway could not check this tool call."
            )
        if verdict.rule is not None:
            log.info(
                "tool rule", extra={"request_id": state.request_id, "rule": verdict.rule, "action": verdict.action}
            )
        if state.trace is not None:  # names and counts only: never arguments
            attributes: Attributes = {"vsr.tool_rules.calls": len(calls), "vsr.tool_rules.action": verdict.action}
            if verdict.rule is not None:
                attributes = {**attributes, "vsr.tool_rules.rule": verdict.rule}
            state.trace.add_span("vsr.tool_rules", started, time.perf_counter(), attributes)
        return verdict

    @staticmethod
    def _translated_error_headers(request: Any, tools: ToolsState, translation: Translation) -> Any:
        """An upstream's error status for a translated request (an OpenAI-only upstream's, for a
        Messages client): the status stays, the body becomes the client's JSON envelope (as
        Anthropic answers a failed request, streamed or not).
        A streamed request's body passes in pieces, after these headers: its length is unknown
        here. An answer with no body at all gets the envelope now."""
        if request.response_headers.end_of_stream:
            data = translation.error(tools.status, b"")
            return mutations.response_headers_replacing_body(_JSON, data)
        return mutations.response_headers(_JSON, remove=() if tools.respond == "json" else ("content-length",))

    @staticmethod
    def _translated_error(body: Any, tools: ToolsState, translation: Translation) -> Any:
        """The error body, held (its first `_ERROR_BODY_LIMIT` bytes) until it ends, then sent in
        the client's envelope: whole in the buffered mode, as the last piece of a stream."""
        if len(tools.body) < _ERROR_BODY_LIMIT:
            tools.body += body.body[: _ERROR_BODY_LIMIT - len(tools.body)]
        if not body.end_of_stream:
            if tools.respond == "json":
                return mutations.continue_phase("response_body")
            return mutations.response_body(None, clear=True)
        data = translation.error(tools.status, bytes(tools.body))
        tools.body = bytearray()
        if tools.respond != "json":
            return mutations.response_body(data)
        return mutations.response_body(data, {**_JSON, "content-length": str(len(data))})

    # -- MCP ----------------------------------------------------------------------------------

    async def mcp_request(self, data: bytes, state: RequestState, router: Router) -> Any:
        """A JSON-RPC request to the MCP path: a tool call judged, then routed to its server."""
        spec = router.policy.spec.mcp
        try:
            message = mcp.parse_message(data)
            call = message.tool_call()
        except mcp.McpProblem as problem:
            status = 400 if problem.code in (mcp.PARSE_ERROR, mcp.INVALID_REQUEST) else 200
            body = mcp.jsonrpc_error(problem.request_id, problem.code, str(problem))
            return mutations.immediate(status, _JSON, body, details="vsr_mcp_invalid")
        metadata: dict[str, object] = {vsr.DECISION_KEY: f"mcp:{message.method}", vsr.SIGNALS_KEY: "none"}
        if call is not None:
            verdict = await self.judge(router, [call], "", state)
            headers = {**_JSON, **verdict.headers()}
            if verdict.action == "block":
                body = mcp.jsonrpc_error(message.request_id, mcp.POLICY_DENIED, verdict.message, {"rule": verdict.rule})
                return mutations.immediate(200, headers, body, details="vsr_mcp_denied")
            if verdict.action == "redact":
                data = message.with_arguments(redact_arguments(call.arguments)[0])
            metadata[vsr.SIGNALS_KEY] = ",".join(verdict.matched) or "none"
            if verdict.rule is not None:
                metadata[vsr.DECISION_KEY] = f"mcp:{verdict.rule}"
        server = mcp.server_for(spec, call.name if call is not None else None)
        if server is None:
            body = mcp.jsonrpc_error(
                message.request_id, -32602, f"No MCP server serves tool {call.name if call else ''!r}"
            )
            return mutations.immediate(200, _JSON, body, details="vsr_mcp_no_server")
        metadata[vsr.CLUSTER_KEY] = server.cluster
        metadata[vsr.MODEL_KEY] = server.name
        if message.method == "tools/list" and router.policy.tool_rules:
            metadata[vsr.RESPOND_KEY] = "mcp_list"
        return mutations.route_request_body({}, data, metadata)

    async def _mcp_list(self, data: bytes, state: RequestState, tools: ToolsState, router: Router) -> Any:
        """Hide the tools a rule blocks on their name alone."""
        doc, names = mcp.listed_tools(data, tools.content_type)
        if doc is None or not names:
            return mutations.continue_phase("response_body")
        hidden = set()
        for name in names:
            verdict = await self.judge(router, [ToolCall(name, "{}")], "", state, store=tools.store)
            if verdict.action == "block":
                hidden.add(name)
        if not hidden:
            return mutations.continue_phase("response_body")
        body = mcp.without_tools(doc, hidden, tools.content_type)
        headers = {"content-length": str(len(body)), vsr.MCP_HIDDEN: ",".join(sorted(hidden))}
        return mutations.response_body(body, headers)
