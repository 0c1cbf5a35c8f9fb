"""The wire contract between the servicer and the Envoy config it is deployed behind, in one place:
the HTTP headers we own (the core renders them, the servicer strips and sets them, the Envoy
config routes on them, the policy schema reserves them), the dynamic-metadata namespaces and keys
the servicer and Envoy's routes and filters exchange, and the ext_proc attributes the config asks
Envoy to send. `server/` reads and writes them; `ops.envoy_config` renders them."""

from __future__ import annotations

# -- HTTP headers -----------------------------------------------------------------------------

# Every header we own starts with this; a client-sent one is stripped before routing.
ROUTING_PREFIX = "x-vsr-"

CLUSTER = "x-vsr-cluster"  # Envoy routes on it; set only by the router, never shown to the client
DECISION = "x-vsr-decision"
MODEL = "x-vsr-model"
SIGNALS = "x-vsr-signals"
DEBUG = "x-vsr-debug"  # a client asks for a trace (honoured only when settings allow it)
TRACE = "x-vsr-trace"
CACHE = "x-vsr-cache"  # the semantic cache's outcome: hit, miss (stored on a 200), bypass
REASONING = "x-vsr-reasoning"  # what the router told the upstream about thinking: on:high, off, kept, none
UNKNOWN_MODEL = "x-vsr-unknown-model"  # the client's `model` the policy does not know (unknown_models: header)
SELECTION = "x-vsr-selection"  # model selection's algorithm, choice and reason: latency:general-b 41ms<120ms
CACHE_SIMILARITY = "x-vsr-cache-similarity"  # on a hit: 1.000 exact, else the verified similarity
TOOL_RULE = "x-vsr-tool-rule"  # the tool rule that acted on an answer's tool calls
TOOL_ACTION = "x-vsr-tool-action"  # what it did: block, redact, annotate, allow
MCP_HIDDEN = "x-vsr-mcp-hidden"  # an MCP tools/list answer: the tools a rule hid
REQUEST_ID = "x-request-id"  # Envoy's request id (three-message flow; one message: the request.id attribute)

# -- dynamic metadata -------------------------------------------------------------------------

# What the servicer writes (the filters accept it only from us: `receiving_namespaces`); Envoy's
# routes match its `cluster` and copy the rest onto the upstream request and the client's response.
DECISION_NAMESPACE = "vsr"
# What Envoy's header_to_metadata filter writes from client headers, sent to the servicer.
CLIENT_NAMESPACE = "vsr.request"

# In `vsr`:
CLUSTER_KEY = "cluster"  # the routes match it
DECISION_KEY = "decision"
MODEL_KEY = "model"
SIGNALS_KEY = "signals"
TRACE_KEY = "trace"
CACHE_KEY = "cache"  # the cache's outcome (x-vsr-cache)
REASONING_KEY = "reasoning"
HEADERS_KEY = "headers"  # the decision's set_headers plugin, {name: value}; routes read `headers:NAME`
API_KEY = "api"  # the tool rules' response phase: which API the answer is in
STORE_KEY = "store"  # the tool rules' response phase: the request asked to store the answer
RESPOND_KEY = "respond"  # the tool rules' response phase this request needs (json, stream, mcp_list)
TICKET_KEY = "cache_ticket"  # what the store phase stores the answer as (the store routes match it)
CONVERSATION_KEY = "conversation"  # what the store phase learns for the conversation store
OBSERVE_KEY = "observe"  # the store phase is wanted (a cache ticket or a conversation ticket)
SELECTION_KEY = "selection"  # x-vsr-selection
UNKNOWN_MODEL_KEY = "unknown_model"  # x-vsr-unknown-model
FLEET_KEY = "fleet"  # what the store phase reports to the fleet: the model and when it was sent
FLEET_FALLBACK_KEY = "fleet_fallback"  # on a failover route: the model Envoy retries on
TRANSLATE_KEY = "translate"  # the upstream speaks Chat for this Messages request (routes rewrite the path)

# In `vsr.request` (copied or moved there by Envoy from the client's headers):
DEBUG_KEY = "debug"  # the client's x-vsr-debug
TENANT_PREFIX = "tenant:"  # + a configured tenant header's name: its value
CACHE_CONTROL_KEY = "cache_control"  # the request's cache-control
SESSION_KEY = "session"  # the policy's session header

# -- ext_proc attributes ------------------------------------------------------------------------

# Where Envoy puts the attributes the filter asks for.
ATTRIBUTES_NAMESPACE = "envoy.filters.http.ext_proc"
# What the one-message flow asks for in place of the request headers.
REQUEST_PATH = "request.path"
REQUEST_METHOD = "request.method"
REQUEST_ID_ATTRIBUTE = "request.id"
REQUEST_ATTRIBUTES = (REQUEST_PATH, REQUEST_METHOD, REQUEST_ID_ATTRIBUTE)
# What the one-message store filter asks for in place of the response headers: the status.
# (Envoy cannot send a header as an attribute; the ticket says whether the answer streams.)
RESPONSE_CODE = "response.code"
# Which host answered and after how many attempts: a failover route's retry on the next model is
# invisible to the router otherwise (the answer looks like the chosen model's).
UPSTREAM_ADDRESS = "upstream.address"
UPSTREAM_ATTEMPTS = "upstream.request_attempt_count"
RESPONSE_ATTRIBUTES = (RESPONSE_CODE, UPSTREAM_ADDRESS, UPSTREAM_ATTEMPTS)
# The client's view of the same: set on failover routes' answers from Envoy's own values.
UPSTREAM_HOST = "x-vsr-upstream-host"
ATTEMPTS = "x-vsr-attempts"

# -- immediate answers ----------------------------------------------------------------------------

# Every immediate answer of the server carries response-code details starting with this; Envoy's
# local-reply mappers rewrite only the local replies without it (Envoy's own) into the API's error JSON.
SERVER_DETAILS_PREFIX = "vsr_"
