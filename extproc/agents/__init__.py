"""Agentic traffic under policy: the model's tool calls in upstream answers (JSON and SSE) and
MCP `tools/call` / `tools/list`, judged by the policy's `tool_rules` with the request signals.

- `tool_calls`: one tool call judged (signals over its name and arguments) and redacted;
- `answers`: tool calls found in, and verdicts applied to, upstream answers; streams held per call;
- `mcp`: JSON-RPC 2.0 requests and results of MCP's streamable HTTP transport.
"""
