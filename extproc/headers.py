"""The router's HTTP header names, in one place: the core renders them, the servicer strips and
sets them, the Envoy config routes on them, the policy schema reserves them."""

from __future__ import annotations

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
CACHE_SIMILARITY = "x-vsr-cache-similarity"  # on a hit: 1.000 exact, else the verified similarity
