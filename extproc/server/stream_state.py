"""What the phase handlers share: the servicer's backends they read, and one stream's request.

The servicer owns the backends (the router, the cache, the conversation store, the observer) and
swaps them while it serves (a policy reload, the cache opened after start), so the handlers read
them through `Backends` on every message instead of keeping their own copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from extproc.cache.service import SemanticCache
    from extproc.conversations.service import Conversations
    from extproc.fleet.state import Fleet
    from extproc.observability.observer import Observer
    from extproc.observability.tracing import StreamTrace
    from extproc.router import Router


class Backends(Protocol):
    """The servicer's settings and backends, as the phase handlers see them (None: off or not loaded)."""

    router: Router | None  # None until the policy and models are loaded
    cache: SemanticCache | None
    conversations: Conversations | None
    fleet: Fleet | None  # observed latency and failures per model (model selection); None: off
    observer: Observer | None
    inference_paths: frozenset[str]
    debug_headers: bool
    shed_wait_s: float  # a message read later than this after it arrived is shed; 0: never


@dataclass(slots=True)
class RequestState:
    """One stream's request, from its first message on: what every phase of the stream reads."""

    path: str = ""
    headers_seen: bool = False
    request_id: str | None = None
    debug: bool = False
    stripped: list[str] = field(default_factory=list)
    body: bytearray = field(default_factory=bytearray)
    client_headers: dict[str, str] = field(default_factory=dict)  # what the response phase adds
    started: float = 0.0
    # time.monotonic() when the latest message arrived (read, less the loop's lateness): the deadline's start
    received: float | None = None
    trace: StreamTrace | None = None  # only while tracing is on
    tenant: dict[str, str] = field(default_factory=dict)  # the cache's tenant headers, from metadata
    cache_control: str = ""
    session: str | None = None  # the policy's session header, from the vsr.request metadata
    anthropic_client: bool = False  # the client sent anthropic-version (GET /v1/models answers in its shape)
