"""`extproc explain --policy P REQUEST.json...`: which signals fired, with what scores, which
decision won, and exactly what the server would send Envoy for it (the rewritten body with any
inserted system prompt, the headers, the decision metadata Envoy's routes copy onto the upstream
request, or the immediate answer), without Envoy."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from extproc.cache.service import explained
from extproc.cli.common import load_settings, router_or_report
from extproc.conversations.service import explained as conversation_explained
from extproc.conversations.service import store_backend
from extproc.outcome import RoutingOutcome
from extproc.router import Router
from extproc.server.explain_answer import envoy_answer
from extproc.settings import Settings

BODY_SHOWN = 600  # characters of a rewritten body the table shows (--json prints it whole)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("explain", help="show how a policy routes requests", description=__doc__)
    parser.add_argument("--policy", type=Path, help="policy file (default: settings' policy_path)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per request")
    parser.add_argument("--path", help="API path the request was sent to (default: inferred from the body)")
    parser.add_argument("requests", nargs="+", metavar="REQUEST.json", help="request body files ('-' for stdin)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    if args.policy is not None:
        settings = settings.model_copy(update={"policy_path": args.policy})
    router = router_or_report(settings)
    if router is None:
        return 1
    try:
        return asyncio.run(_explain_all(router, args, settings))
    finally:
        router.close()


async def _explain_all(router: Router, args: argparse.Namespace, settings: Settings) -> int:
    status = 0
    for name in args.requests:
        try:
            body = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        except OSError as exc:
            print(f"{name}: cannot read: {exc.strerror or exc}", file=sys.stderr)
            status = 1
            continue
        # Without --path the parser tells the API from the body (messages / input / prompt).
        outcome = await router.route(body, path=args.path or "")
        outcome.cache = explained(outcome, router.policy.spec)
        outcome.conversation = conversation_explained(outcome, router.policy.spec, store_backend(settings))
        if outcome.action == "error" and outcome.request is None:
            # The file is not a request the router can read (bad JSON, wrong shape): a failed run,
            # though the answer Envoy would send for it (a 400) is still shown.
            problem = outcome.error.message if outcome.error is not None else outcome.message
            print(f"{name}: not a valid request: {problem}", file=sys.stderr)
            status = 1
        envoy = envoy_answer(router, outcome, args.path)
        if args.json:
            print(json.dumps({"file": name, **outcome.to_dict(), "envoy": envoy}, ensure_ascii=False))
        else:
            print(render_table(name, outcome, envoy))
    return status


def _envoy_lines(envoy: dict[str, Any]) -> list[str]:
    lines = ["", f"  to Envoy: {envoy['kind']}"]
    if envoy["kind"] == "request_body":
        lines[-1] += "  (its routes copy vsr.decision, vsr.model and vsr.headers onto the upstream request)"
    if envoy["kind"] == "immediate_response":
        lines.append(f"    status {envoy['status']}  (details {envoy['details']})")
    for key, value in envoy.get("headers", envoy.get("set_headers", {})).items():
        lines.append(f"    header  {key}: {value}")
    for key in envoy.get("remove_headers", []):
        lines.append(f"    remove  {key}")
    for key, value in envoy.get("dynamic_metadata", {}).get("vsr", {}).items():
        lines.append(f"    vsr.{key}: {json.dumps(value) if isinstance(value, dict) else value}")
    body = envoy.get("body")
    if body:
        shown = body if len(body) <= BODY_SHOWN else body[:BODY_SHOWN] + f"... ({len(body)} chars; --json: all)"
        lines.append(f"    body    {shown}")
    return lines


def render_table(name: str, outcome: RoutingOutcome, envoy: dict[str, Any] | None = None) -> str:
    data: dict[str, Any] = outcome.to_dict()
    lines = [f"== {name}"]
    target = (
        f" -> {data['model']} (cluster {data['cluster']}, model id {data['upstream_model']})" if data["model"] else ""
    )
    lines.append(f"decision: {data['decision']}  action: {data['action']}  status: {data['status']}{target}")
    if data["message"]:
        lines.append(f"message:  {data['message']}")
    if data["signals"]:
        lines.append("")
        lines.append(f"  {'signal':<24} {'type':<13} {'status':<12} {'score':>6} {'ms':>8}  evidence")
        for s in data["signals"]:
            detail = ", ".join(s["evidence"]) or (s["error"] or "")
            if s["labels"]:
                labels = " ".join(f"{k}={v:.2f}" for k, v in s["labels"].items())
                detail = f"{labels}  {detail}".strip()
            derived = s["type"] in ("score", "partition")
            lines.append(
                f"  {s['name']:<24} {s['type']:<13} {s['status']:<12} {s['score']:>6.2f} {s['latency_ms']:>8.3f}  "
                f"{(s['evidence'][0] if derived and s['evidence'] else detail)[:80]}"
            )
            if derived:  # every input's value, weight and contribution (or its range, not run)
                lines += [f"  {'':<24}   {line}" for line in s["evidence"][1:]]
    decisions = data["trace"]["decisions"]
    if decisions:
        lines.append("")
        lines.append(f"  {'decision':<24} {'priority':>8}  value    first failing leaf")
        for d in decisions:
            priority = "default" if d["priority"] is None else str(d["priority"])
            failed = d["failed_leaf"] or ""
            lines.append(f"  {d['name']:<24} {priority:>8}  {d['value']:<8} {failed}")
    cache = data.get("cache")
    if cache:
        scope = "one shared partition" if cache["shared"] else "per tenant"
        lines.append(
            f"  cache: {data['decision']} caches answers (similarity {cache['similarity']}, ttl {cache['ttl_s']} s, "
            f"{scope}); explain does not look up"
        )
    conversation = data.get("conversation")
    if conversation and (conversation["key"] or not conversation["sticky"]):
        keeps = "keeps it on the model that served it" if conversation["sticky"] else "moves it to its own model"
        key = f"{conversation['key']} key" if conversation["key"] else "no key in this request"
        lines.append(f"  conversation: {key}; {data['decision']} {keeps}; explain does not look up")
    for note in data["trace"]["notes"]:
        lines.append(f"  note: {note}")
    lines.append(f"  timings: {data['trace']['timings_ms']}")
    if envoy is not None:
        lines.extend(_envoy_lines(envoy))
    return "\n".join(lines) + "\n"
