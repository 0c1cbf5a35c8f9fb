"""MCP (streamable HTTP, JSON-RPC 2.0) requests and results, as the servicer needs them.

A POST to the MCP path carries one JSON-RPC message. `tools/call` is judged like a model's
tool call (its name and arguments, by the policy's tool rules): block answers a JSON-RPC error
(HTTP 200, as MCP servers do), redact rewrites the arguments, otherwise it goes to the MCP
server whose `tools` globs match the name. Every other method goes to the first server.
`tools/list` results come back through the response phase, which hides tools a rule blocks
on their name alone (judged with empty arguments). Batches (JSON arrays) are refused.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from typing import Any

from extproc.agents.tool_calls import ToolCall
from extproc.policy.schema import McpServer, McpSpec
from extproc.protocol import sse

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
POLICY_DENIED = -32001  # in the implementation-defined server-error range


class McpProblem(ValueError):
    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id


@dataclass(frozen=True, slots=True)
class McpMessage:
    request_id: Any  # None for a notification
    method: str
    params: dict[str, Any]
    doc: dict[str, Any]

    def tool_call(self) -> ToolCall | None:
        if self.method != "tools/call":
            return None
        name = self.params.get("name")
        arguments = self.params.get("arguments")
        if not isinstance(name, str) or not name:
            raise McpProblem(-32602, "tools/call needs params.name", self.request_id)
        text = json.dumps(arguments, ensure_ascii=False) if arguments is not None else "{}"
        return ToolCall(name=name, arguments=text)

    def with_arguments(self, arguments: str) -> bytes:
        doc = dict(self.doc)
        doc["params"] = {**self.params, "arguments": json.loads(arguments)}
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


def parse_message(body: bytes) -> McpMessage:
    try:
        doc = json.loads(body)
    except ValueError:
        raise McpProblem(PARSE_ERROR, "Parse error: the body is not JSON") from None
    if isinstance(doc, list):
        raise McpProblem(INVALID_REQUEST, "Batches are not accepted by this gateway")
    answers = isinstance(doc, dict) and "method" not in doc and "id" in doc and ("result" in doc or "error" in doc)
    if answers and doc.get("jsonrpc") == "2.0":  # the client answering a server request (sampling, elicitation)
        return McpMessage(request_id=doc["id"], method="", params={}, doc=doc)
    if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0" or not isinstance(doc.get("method"), str):
        request_id = doc.get("id") if isinstance(doc, dict) else None
        raise McpProblem(INVALID_REQUEST, "Invalid Request: a JSON-RPC 2.0 object with a method", request_id)
    params = doc.get("params", {})
    if not isinstance(params, dict):
        raise McpProblem(INVALID_REQUEST, "Invalid Request: params must be an object", doc.get("id"))
    return McpMessage(request_id=doc.get("id"), method=doc["method"], params=params, doc=doc)


def jsonrpc_error(request_id: Any, code: int, message: str, data: dict[str, Any] | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}, separators=(",", ":")).encode()


def server_for(spec: McpSpec, tool: str | None) -> McpServer | None:
    if not spec.servers:
        return None
    if tool is not None:
        for server in spec.servers:
            if any(fnmatch.fnmatchcase(tool.lower(), g.lower()) for g in server.tools):
                return server
        return None
    return spec.servers[0]


def listed_tools(body: bytes, content_type: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The tools/list result document (JSON, or the SSE event carrying it) and its tool names."""
    doc = _result_doc(body, content_type)
    if doc is None:
        return None, []
    tools = (doc.get("result") or {}).get("tools") if isinstance(doc.get("result"), dict) else None
    names = [t["name"] for t in tools or [] if isinstance(t, dict) and isinstance(t.get("name"), str)]
    return doc, names


def without_tools(doc: dict[str, Any], hidden: set[str], content_type: str) -> bytes:
    result = dict(doc["result"])
    result["tools"] = [t for t in result.get("tools") or [] if not (isinstance(t, dict) and t.get("name") in hidden)]
    text = json.dumps({**doc, "result": result}, ensure_ascii=False, separators=(",", ":"))
    if "text/event-stream" in content_type:
        return f"event: message\ndata: {text}\n\n".encode()
    return text.encode()


def _result_doc(body: bytes, content_type: str) -> dict[str, Any] | None:
    text = body.decode("utf-8", "replace")
    candidates = [data for _, data in sse.events(text)] if "text/event-stream" in content_type else [text]
    for candidate in candidates:
        try:
            doc = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(doc, dict) and "result" in doc:
            return doc
    return None
