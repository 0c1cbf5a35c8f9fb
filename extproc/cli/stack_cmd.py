"""`extproc stack`: Envoy + the ext_proc server + demo upstreams, in the foreground (`make run`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from extproc.cli.common import load_settings
from extproc.cli.envoy_config_cmd import options_from_args, parse_overrides
from extproc.ops.stack import StackConfig, run_foreground


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("stack", help="run Envoy, the server and demo upstreams", description=__doc__)
    parser.add_argument("--policy", type=Path, help="policy file (default: settings' policy_path)")
    parser.add_argument("--envoy-config", type=Path, help="use this Envoy config as is (default: render from policy)")
    parser.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="CLUSTER=HOST:PORT",
        help="a running server for CLUSTER (no demo upstream is started for it); repeatable",
    )
    parser.add_argument("--no-demo-upstreams", action="store_true", help="clusters are real servers; start none")
    parser.add_argument("--listen", default="127.0.0.1:8801", metavar="HOST:PORT", help="Envoy listener")
    parser.add_argument("--ext-proc", default="127.0.0.1:50051", metavar="HOST:PORT", help="ext_proc gRPC server")
    parser.add_argument("--admin", default="127.0.0.1:9901", metavar="HOST:PORT", help="Envoy admin")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    overrides = parse_overrides(args.upstream)
    config = StackConfig(
        policy=(args.policy or load_settings(args).policy_path).resolve(),
        settings_file=Path(args.settings).resolve() if getattr(args, "settings", None) else None,
        envoy=options_from_args(args),
        upstream_overrides=overrides,
        # --upstream names a server already running (real vLLM or a stand-in): the other clusters
        # still get demo upstreams, and none is started on that server's port.
        external_upstreams=tuple(overrides),
        envoy_config=args.envoy_config.resolve() if args.envoy_config else None,
        demo_upstreams=not args.no_demo_upstreams,
        env={"VSR_SERVER__DEBUG_HEADERS": "true"},
    )
    return run_foreground(config)
