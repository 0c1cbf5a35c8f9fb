"""`extproc demo-upstream --policy P`: an OpenAI-compatible stand-in for every model's cluster.

One listener per cluster at the address the policy gives (or `--upstream CLUSTER=HOST:PORT`);
replies name the cluster (`x-demo-upstream` header) and the model id the body carried.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from extproc.cli.common import load_settings
from extproc.cli.envoy_config_cmd import parse_overrides
from extproc.ops.demo_upstream import DemoUpstream, serve_forever
from extproc.ops.envoy_config import upstreams_from_policy


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("demo-upstream", help="run demo OpenAI-compatible upstreams", description=__doc__)
    parser.add_argument("--policy", type=Path, help="policy file (default: settings' policy_path)")
    parser.add_argument("--upstream", action="append", default=[], metavar="CLUSTER=HOST:PORT", help="repeatable")
    parser.add_argument("--stream-delay-ms", type=float, default=20.0, help="pause between streamed chunks")
    parser.add_argument(
        "--skip", action="append", default=[], metavar="CLUSTER", help="a cluster another server serves (repeatable)"
    )
    parser.set_defaults(func=run)


def demo_upstreams(
    policy: Path, overrides: dict[str, str], stream_delay_ms: float = 20.0, skip: frozenset[str] = frozenset()
) -> list[DemoUpstream]:
    import yaml

    data = yaml.safe_load(policy.read_text(encoding="utf-8")) or {}
    served: dict[str, list[str]] = {}
    messages: dict[str, bool] = {}  # a cluster serves /v1/messages when all its models' cards say anthropic
    for model in data.get("models") or []:
        if isinstance(model, dict) and "name" in model:
            cluster = str(model.get("cluster") or model["name"])
            served.setdefault(cluster, []).append(str(model.get("upstream_model") or model["name"]))
            speaks = "anthropic" in (model.get("api") or ["openai", "anthropic"])
            messages[cluster] = messages.get(cluster, True) and speaks
    return [
        DemoUpstream(
            cluster=u.cluster,
            host=u.host,
            port=u.port,
            models=tuple(served.get(u.cluster, u.models)),
            stream_delay_s=stream_delay_ms / 1000.0,
            messages=messages.get(u.cluster, True),
        )
        for u in upstreams_from_policy(policy, overrides)
        if u.cluster not in skip
    ]


def run(args: argparse.Namespace) -> int:
    try:
        policy = args.policy or load_settings(args).policy_path
        upstreams = demo_upstreams(
            policy, parse_overrides(args.upstream), args.stream_delay_ms, frozenset(getattr(args, "skip", []))
        )
    except (OSError, ValueError) as exc:
        print(f"demo-upstream: {exc}", file=sys.stderr)
        return 2
    for u in upstreams:
        print(f"demo upstream {u.cluster} on http://{u.host}:{u.port} serving {', '.join(u.models)}", flush=True)
    asyncio.run(serve_forever(upstreams))
    return 0
