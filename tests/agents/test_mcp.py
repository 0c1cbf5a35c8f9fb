"""MCP (streamable HTTP, JSON-RPC 2.0): messages parsed and refused, `tools/call` as a tool call,
arguments rewritten, error bodies, the server a tool goes to, and `tools/list` results (JSON and
SSE) read and filtered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extproc.agents.mcp import (
    INVALID_REQUEST,
    PARSE_ERROR,
    McpMessage,
    McpProblem,
    jsonrpc_error,
    listed_tools,
    parse_message,
    server_for,
    without_tools,
)
from extproc.agents.tool_calls import ToolCall
from extproc.policy.schema import McpServer, McpSpec


def body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def call_message(arguments: Any = None, **extra: Any) -> McpMessage:
    params: dict[str, Any] = {"name": "read_file", **extra}
    if arguments is not None:
        params["arguments"] = arguments
    return parse_message(body({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}))


# -- parse_message -------------------------------------------------------------------------------


def test_parse_a_request() -> None:
    doc = {"jsonrpc": "2.0", "id": "abc", "method": "tools/list", "params": {"cursor": "c1"}}
    message = parse_message(body(doc))
    assert message.request_id == "abc"
    assert message.method == "tools/list"
    assert message.params == {"cursor": "c1"}
    assert message.doc == doc


def test_parse_a_notification_without_id() -> None:
    message = parse_message(body({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert message.request_id is None
    assert message.method == "notifications/initialized"
    assert message.params == {}


@pytest.mark.parametrize("params", [None, {}])
def test_missing_or_null_params_are_an_empty_object(params: object) -> None:
    doc: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    if params is not None:
        doc["params"] = params
    assert parse_message(body(doc)).params == {}


def test_a_batch_is_an_invalid_request() -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    with pytest.raises(McpProblem) as caught:
        parse_message(body(batch))
    assert caught.value.code == INVALID_REQUEST == -32600
    assert caught.value.request_id is None
    assert "Batches" in str(caught.value)


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"jsonrpc": "2.0",'])
def test_bad_json_is_a_parse_error(raw: bytes) -> None:
    with pytest.raises(McpProblem) as caught:
        parse_message(raw)
    assert caught.value.code == PARSE_ERROR == -32700
    assert caught.value.request_id is None


@pytest.mark.parametrize(
    ("doc", "request_id"),
    [
        ({"id": 3, "method": "ping"}, 3),  # no jsonrpc member
        ({"jsonrpc": "1.0", "id": 4, "method": "ping"}, 4),
        ({"jsonrpc": "2.0", "id": 5}, 5),  # no method (e.g. a response)
        ({"jsonrpc": "2.0", "id": 6, "method": 12}, 6),
        ("a string", None),
        (42, None),
    ],
)
def test_not_a_json_rpc_request_is_invalid_and_keeps_the_id(doc: object, request_id: object) -> None:
    with pytest.raises(McpProblem) as caught:
        parse_message(body(doc))
    assert caught.value.code == INVALID_REQUEST
    assert caught.value.request_id == request_id


@pytest.mark.parametrize("params", [[1, 2], "x", 5, True])
def test_params_that_are_not_an_object_are_invalid(params: object) -> None:
    with pytest.raises(McpProblem) as caught:
        parse_message(body({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}))
    assert caught.value.code == INVALID_REQUEST
    assert caught.value.request_id == 9
    assert "params must be an object" in str(caught.value)


# -- tool_call and with_arguments -----------------------------------------------------------------


def test_tool_call_of_tools_call() -> None:
    message = call_message({"path": "/etc/hosts", "lines": [1, 2]})
    call = message.tool_call()
    assert call == ToolCall(name="read_file", arguments='{"path": "/etc/hosts", "lines": [1, 2]}')
    assert json.loads(call.arguments) == {"path": "/etc/hosts", "lines": [1, 2]}


def test_tool_call_keeps_non_ascii_and_defaults_missing_arguments_to_an_object() -> None:
    call = call_message({"city": "Zürich"}).tool_call()
    assert call is not None and call.arguments == '{"city": "Zürich"}'
    call = call_message().tool_call()
    assert call is not None and call.arguments == "{}"


def test_other_methods_are_not_tool_calls() -> None:
    message = parse_message(body({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert message.tool_call() is None


@pytest.mark.parametrize("params", [{}, {"name": ""}, {"name": 3}, {"arguments": {}}])
def test_tools_call_without_a_name_is_invalid_params(params: dict[str, Any]) -> None:
    message = parse_message(body({"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": params}))
    with pytest.raises(McpProblem) as caught:
        message.tool_call()
    assert caught.value.code == -32602
    assert caught.value.request_id == 11


def test_with_arguments_replaces_only_the_arguments() -> None:
    message = call_message({"note": "secret"}, _meta={"progressToken": 5})
    rewritten = json.loads(message.with_arguments('{"note": "[REDACTED:passport]", "n": 1}'))
    assert rewritten == {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "read_file",
            "_meta": {"progressToken": 5},
            "arguments": {"note": "[REDACTED:passport]", "n": 1},
        },
    }
    # The parsed message itself is not changed.
    assert message.params["arguments"] == {"note": "secret"}
    assert message.doc["params"]["arguments"] == {"note": "secret"}


def test_with_arguments_is_compact_utf8() -> None:
    out = call_message({"a": 1}).with_arguments('{"city": "Zürich"}')
    assert "Zürich".encode() in out
    assert b": " not in out and b", " not in out


# -- jsonrpc_error ----------------------------------------------------------------------------------


def test_error_body_without_data() -> None:
    out = jsonrpc_error(7, -32001, "Shell tools are not allowed.")
    assert json.loads(out) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32001, "message": "Shell tools are not allowed."},
    }


def test_error_body_with_data_and_a_null_id() -> None:
    out = json.loads(jsonrpc_error(None, PARSE_ERROR, "Parse error", {"rule": "shell_block"}))
    assert out == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error", "data": {"rule": "shell_block"}},
    }


def test_error_body_of_a_problem_round_trips_the_string_id() -> None:
    problem = McpProblem(INVALID_REQUEST, "Invalid Request", "req-1")
    out = json.loads(jsonrpc_error(problem.request_id, problem.code, str(problem)))
    assert out["id"] == "req-1" and out["error"]["code"] == INVALID_REQUEST


# -- server_for ----------------------------------------------------------------------------------


SPEC = McpSpec(
    servers=[
        McpServer(name="files", cluster="mcp_files", tools=["read_*", "write_*"]),
        McpServer(name="web", cluster="mcp_web", tools=["search*", "fetch"]),
        McpServer(name="everything", cluster="mcp_all", tools=["*"]),
    ]
)


@pytest.mark.parametrize(
    ("tool", "server"),
    [
        ("read_file", "files"),
        ("WRITE_File", "files"),  # globs are case-insensitive
        ("search_web", "web"),
        ("fetch", "web"),
        ("fetcher", "everything"),  # a glob matches the whole name
        ("run_shell", "everything"),
    ],
)
def test_server_for_first_matching_glob(tool: str, server: str) -> None:
    found = server_for(SPEC, tool)
    assert found is not None and found.name == server


def test_server_for_no_match_is_none() -> None:
    spec = McpSpec(servers=[McpServer(name="files", cluster="mcp_files", tools=["read_*"])])
    assert server_for(spec, "run_shell") is None


def test_server_for_another_method_is_the_first_server() -> None:
    spec = McpSpec(servers=[McpServer(name="files", cluster="mcp_files", tools=["read_*"])])
    found = server_for(spec, None)
    assert found is not None and found.name == "files"


def test_server_for_without_servers_is_none() -> None:
    assert server_for(McpSpec(), None) is None
    assert server_for(McpSpec(), "read_file") is None


def test_default_server_serves_every_tool() -> None:
    spec = McpSpec(servers=[McpServer(name="only", cluster="c")])
    found = server_for(spec, "anything_at_all")
    assert found is not None and found.name == "only"


# -- tools/list results --------------------------------------------------------------------------


def list_result(*names: str, request_id: int = 2) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {
            "tools": [{"name": n, "description": f"the {n} tool", "inputSchema": {"type": "object"}} for n in names],
            "nextCursor": "page-2",
        },
    }


def test_listed_tools_of_a_json_body() -> None:
    result = list_result("read_file", "run_shell", "search")
    doc, names = listed_tools(body(result), "application/json")
    assert doc == result
    assert names == ["read_file", "run_shell", "search"]


def test_listed_tools_of_an_sse_body() -> None:
    result = list_result("read_file", "run_shell")
    sse = b"event: message\nid: 17\ndata: " + body(result) + b"\n\n"
    doc, names = listed_tools(sse, "text/event-stream; charset=utf-8")
    assert doc == result
    assert names == ["read_file", "run_shell"]


def test_listed_tools_of_an_sse_body_with_crlf_a_notification_first_and_split_data() -> None:
    result = list_result("read_file", "bash")
    notification = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    text = json.dumps(result, indent=1)  # several lines: several data: fields
    data_lines = "".join(f"data: {line}\r\n" for line in text.split("\n"))
    sse = f"event: message\r\ndata: {json.dumps(notification)}\r\n\r\nevent: message\r\n{data_lines}\r\n".encode()
    doc, names = listed_tools(sse, "text/event-stream")
    assert doc == result
    assert names == ["read_file", "bash"]


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        (b"not json", "application/json"),
        (body({"jsonrpc": "2.0", "id": 1, "error": {"code": -1, "message": "no"}}), "application/json"),
        (b"event: message\ndata: {bad\n\n", "text/event-stream"),
    ],
)
def test_listed_tools_without_a_result(raw: bytes, content_type: str) -> None:
    assert listed_tools(raw, content_type) == (None, [])


def test_listed_tools_skips_entries_without_a_string_name() -> None:
    result = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}, {"name": 3}, "junk", {"x": 1}]}}
    doc, names = listed_tools(body(result), "application/json")
    assert doc == result and names == ["a"]
    assert listed_tools(body({"jsonrpc": "2.0", "id": 1, "result": {}}), "application/json")[1] == []
    assert listed_tools(body({"jsonrpc": "2.0", "id": 1, "result": "odd"}), "application/json")[1] == []


def test_without_tools_json_hides_the_named_tools_and_keeps_the_rest() -> None:
    result = list_result("read_file", "run_shell", "search")
    out = without_tools(result, {"run_shell"}, "application/json")
    doc = json.loads(out)
    assert [t["name"] for t in doc["result"]["tools"]] == ["read_file", "search"]
    assert doc["result"]["nextCursor"] == "page-2"
    assert doc["id"] == 2 and doc["jsonrpc"] == "2.0"
    assert doc["result"]["tools"][0] == result["result"]["tools"][0]
    # The input document is not modified.
    assert [t["name"] for t in result["result"]["tools"]] == ["read_file", "run_shell", "search"]


def test_without_tools_sse_is_one_message_event() -> None:
    result = list_result("read_file", "run_shell", "bash")
    out = without_tools(result, {"run_shell", "bash"}, "text/event-stream")
    assert out.startswith(b"event: message\ndata: ") and out.endswith(b"\n\n")
    doc, names = listed_tools(out, "text/event-stream")
    assert names == ["read_file"]
    assert doc is not None and doc["result"]["nextCursor"] == "page-2"


def test_without_tools_of_nothing_hidden_keeps_every_tool() -> None:
    result = list_result("a", "b")
    assert json.loads(without_tools(result, set(), "application/json")) == result


def test_a_clients_answer_to_a_server_request_passes_as_a_message_without_method() -> None:
    answer = parse_message(b'{"jsonrpc": "2.0", "id": 3, "result": {"action": "accept"}}')
    assert (answer.method, answer.request_id, answer.tool_call()) == ("", 3, None)


@pytest.mark.parametrize("params", ["false", "0", '""', "[]"])
def test_non_object_params_are_invalid_even_when_falsy(params: str) -> None:
    with pytest.raises(McpProblem) as caught:
        parse_message(f'{{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {params}}}'.encode())
    assert caught.value.code == -32600
