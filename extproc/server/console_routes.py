"""The decision console: a page on the admin port and the JSON it polls (no front-end build step).

    GET /console                      the page (static; public: it holds no data)
    GET /console/console.js, .css     its assets (static; public)
    GET /v1/console/recent?after=SEQ  the recent decisions numbered above SEQ (oldest first), from the
                                      in-memory ring (`extproc.observability.recent`): content-free
    GET /v1/console/stats             counts per decision and latency histograms: over the ring
                                      (`window`) and since start from the Prometheus metrics (`since_start`)
    GET /v1/console/policy            the active policy as a tree: decisions by priority, their rule trees
    GET /v1/console/conversations     the conversation store: its backend, entries, lookups by outcome,
                                      what answers taught it, the policy's part, and the ring's recent
                                      conversation lookups (names only: never a key, a session or an id)
    GET /v1/console/fleet             model selection: each route's algorithm, each model's observed
                                      latency, scraped load and cooldown, and the ring's recent selections

The page itself posts to `/v1/explain` for its explain form. The `/v1/console/*` endpoints go through
the admin server's one auth check like every other; only the static files are public. With a token
set the page reads it from a `#token=...` fragment (or asks for it) and sends `Authorization: Bearer`
on each fetch. The static files are read from `extproc/server/console/` (package data) by a fixed
table of names: nothing in a request path ever names a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from extproc.fleet.state import Fleet
from extproc.policy.conditions import All, Any_, Condition, Leaf, Not
from extproc.policy.schema import Decision, DefaultDecision, RouteAction
from extproc.server.admin import AdminTarget, Handler, Response, json_response

if TYPE_CHECKING:
    from extproc.conversations.service import Conversations
    from extproc.observability.metrics import Metrics
    from extproc.observability.recent import RecentDecisions
    from extproc.policy.load import CompiledPolicy
    from extproc.policy.schema import Policy

STATIC_DIR = Path(__file__).resolve().parent / "console"
# request path -> (file under STATIC_DIR, content type)
ASSETS: dict[str, tuple[str, str]] = {
    "/console": ("index.html", "text/html; charset=utf-8"),
    "/console/": ("index.html", "text/html; charset=utf-8"),
    "/console/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/console/console.css": ("console.css", "text/css; charset=utf-8"),
}
PUBLIC_ROUTES = frozenset(("GET", path) for path in ASSETS)
# The page loads only its own files and talks only to this origin; image previews are data:/blob: URLs.
STATIC_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _error(status: int, message: str) -> Response:
    return json_response(status, {"error": {"message": message, "code": "console_error"}})


def _int(query: dict[str, list[str]], name: str, default: int) -> int | None:
    raw = query.get(name, [""])[0]
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        return None


class Console:
    """The console's endpoints, over the server's ring, metrics and live router."""

    def __init__(
        self,
        target: AdminTarget,
        *,
        recent: RecentDecisions | None,
        metrics: Metrics | None,
        static_dir: Path = STATIC_DIR,
    ) -> None:
        self.target = target
        self.recent = recent
        self.metrics = metrics
        self.static_dir = static_dir

    def routes(self) -> dict[tuple[str, str], Handler]:
        routes: dict[tuple[str, str], Handler] = {
            ("GET", path): self._static(name, content_type) for path, (name, content_type) in ASSETS.items()
        }
        routes[("GET", "/v1/console/recent")] = self._recent
        routes[("GET", "/v1/console/stats")] = self._stats
        routes[("GET", "/v1/console/policy")] = self._policy
        routes[("GET", "/v1/console/conversations")] = self._conversations
        routes[("GET", "/v1/console/fleet")] = self._fleet
        return routes

    async def _fleet(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        router = self.target.live_router
        if router is None:
            return _error(503, "no policy loaded yet")
        spec = router.policy.spec
        rules: list[Decision | DefaultDecision] = [*spec.decisions, spec.default]
        routes = {
            rule.name: {"models": rule.action.models, **rule.action.selection.model_dump()}
            for rule in rules
            if isinstance(rule.action, RouteAction)
        }
        fleet = router.fleet
        models = fleet.snapshot([m.name for m in spec.models]) if isinstance(fleet, Fleet) else None
        recent = [r.to_dict() for r in self.recent.since(0) if r.selection is not None] if self.recent else []
        return json_response(200, {"routes": routes, "models": models, "recent": recent[-RECENT_CONVERSATIONS:]})

    def _policy_version(self) -> str | None:
        router = self.target.live_router
        return router.policy.version if router is not None else None

    # -- static files -----------------------------------------------------------------------------
    def _static(self, name: str, content_type: str) -> Handler:
        async def serve(body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
            try:
                data = (self.static_dir / name).read_bytes()
            except OSError:
                return _error(404, f"console file {name} is missing from the installed package")
            return Response(200, data, content_type, dict(STATIC_HEADERS))

        return serve

    # -- JSON ---------------------------------------------------------------------------------------
    async def _recent(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        ring = self.recent
        if ring is None:
            return json_response(
                200,
                {"enabled": False, "reason": "observability.console_ring is 0", "records": [], "last_seq": 0},
            )
        after = _int(query, "after", 0)
        limit = _int(query, "limit", ring.size)
        if after is None or limit is None or after < 0 or limit < 1:
            return _error(400, "after must be an integer >= 0 and limit an integer >= 1")
        reset = after > ring.last_seq  # a client from before a restart: start over
        if reset:
            after = 0
        records = ring.since(after, min(limit, ring.size))
        return json_response(
            200,
            {
                "enabled": True,
                "epoch": ring.epoch,
                "capacity": ring.size,
                "first_seq": ring.first_seq,
                "last_seq": ring.last_seq,
                "reset": reset,
                # records between `after` and the first returned that the ring no longer holds
                "missed": max(0, (records[0].seq if records else ring.last_seq + 1) - after - 1),
                "policy": self._policy_version(),
                "records": [r.to_dict() for r in records],
            },
        )

    async def _stats(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        return json_response(
            200,
            {
                "policy": self._policy_version(),
                "window": self.recent.window() if self.recent is not None else None,
                "since_start": since_start(self.metrics) if self.metrics is not None else None,
            },
        )

    async def _policy(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        router = self.target.live_router
        if router is None:
            return _error(503, "no policy loaded yet")
        return json_response(200, policy_tree(router.policy))

    async def _conversations(self, body: bytes, query: dict[str, list[str]], headers: dict[str, str]) -> Response:
        router = self.target.live_router
        spec = router.policy.spec if router is not None else None
        recent = self.recent.conversations(RECENT_CONVERSATIONS) if self.recent is not None else []
        return json_response(
            200,
            {
                "policy": None if spec is None else conversation_policy(spec),
                **conversation_store(self.target.conversations),
                "recent": [r.to_dict() for r in recent],
            },
        )


RECENT_CONVERSATIONS = 20  # the ring's last records with a conversation part, on the conversations panel


def conversation_policy(spec: Policy) -> dict[str, Any]:
    """The policy's conversations section, with the decisions that move a conversation (`sticky: false`)."""
    conf = spec.conversations
    names = [d.name for d in spec.decisions] + [spec.default.name]
    return {
        "enabled": conf.enabled,
        "session_header": conf.session_header,
        "ttl_s": conf.ttl_s,
        "not_sticky": [name for name in names if not spec.sticky(name)],
    }


def conversation_store(conversations: Conversations | None) -> dict[str, Any]:
    """The store's figures since start (this process): lookups by outcome and reason, what it learned."""
    if conversations is None:
        return {"enabled": False, "reason": "conversations.enabled is false in the server settings", "store": None}
    store, counters = conversations.store, conversations.counters
    lookups: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for (state, reason), n in counters.lookups.items():
        if state == "off":
            continue
        lookups[state] = lookups.get(state, 0) + n
        if reason:
            reasons[reason] = reasons.get(reason, 0) + n
    return {
        "enabled": True,
        "store": {"backend": store.name, "entries": store.entries(), "errors": dict(store.errors)},
        "lookups": dict(sorted(lookups.items())),
        "reasons": dict(sorted(reasons.items())),
        "learned": dict(sorted(counters.learned.items())),
    }


def since_start(metrics: Metrics) -> dict[str, Any]:
    """Counts per decision (by outcome) and the route latency histogram from the Prometheus metrics."""
    decisions: dict[str, dict[str, Any]] = {}
    for (decision, _model, outcome), n in metrics.requests.items():
        entry = decisions.setdefault(decision, {"count": 0, "actions": {}})
        entry["count"] += n
        entry["actions"][outcome] = entry["actions"].get(outcome, 0) + n
    hist = metrics.route_latency["total"]
    return {
        "total": sum(e["count"] for e in decisions.values()),
        "decisions": dict(sorted(decisions.items())),
        "overload": {"shed": sum(metrics.shed.values()), "fail_safe": sum(metrics.fail_safe.values())},
        "latency": {
            "bounds_ms": [round(b * 1000.0, 6) for b in hist.bounds],
            "counts": list(hist.counts),
            "count": hist.count,
            "mean_ms": round(hist.total * 1000.0 / hist.count, 3) if hist.count else None,
        },
    }


def condition_tree(cond: Condition, policy: CompiledPolicy) -> dict[str, Any]:
    """A rule tree as nested nodes: {op: all|any|not, children} or {op: signal, signal, label, min_score}."""
    if isinstance(cond, Leaf):
        signal = policy.signals.get(cond.signal)
        return {
            "op": "signal",
            "path": cond.path,
            "signal": cond.signal,
            "label": cond.label,
            "min_score": cond.min_score,
            "type": signal.type if signal is not None else None,
            "on_error": signal.on_error if signal is not None else None,
            "unavailable": signal.unavailable_reason() if signal is not None else None,
        }
    if isinstance(cond, Not):
        return {"op": "not", "path": cond.path, "children": [condition_tree(cond.child, policy)]}
    op = "all" if isinstance(cond, All) else "any"
    assert isinstance(cond, All | Any_)
    return {"op": op, "path": cond.path, "children": [condition_tree(child, policy) for child in cond.children]}


def policy_tree(policy: CompiledPolicy) -> dict[str, Any]:
    spec = policy.spec
    return {
        "version": policy.version,
        "name": spec.name,
        "description": spec.description,
        "path": str(policy.path) if policy.path is not None else None,
        "decisions": [
            {
                "name": d.name,
                "priority": d.priority,
                "description": d.description,
                "action": d.action.model_dump(mode="json"),
                "fail_safe": d.fail_safe,
                "when": condition_tree(d.when, policy),
            }
            for d in sorted(policy.decisions, key=lambda d: -d.priority)
        ],
        "default": {
            "name": spec.default.name,
            "priority": None,
            "description": spec.default.description,
            "action": spec.default.action.model_dump(mode="json"),
        },
        "models": [
            {"name": m.name, "cluster": m.cluster, "modalities": list(m.modalities), "upstream_model": m.target_model}
            for m in spec.models
        ],
        "signals": {
            name: {"type": s.type, "on_error": s.on_error, "unavailable": s.unavailable_reason()}
            for name, s in policy.signals.items()
        },
        "warnings": [w.format() for w in policy.warnings],
    }
