"""`extproc serve`: the ext_proc gRPC server Envoy talks to (health service included)."""

from __future__ import annotations

import argparse
from pathlib import Path

from extproc.cli.common import load_settings
from extproc.server.app import serve


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("serve", help="run the ext_proc gRPC server", description=__doc__)
    parser.add_argument("--policy", type=Path, help="policy file (default: settings' policy_path)")
    parser.add_argument("--grpc-host", help="listen address (default: settings, 127.0.0.1)")
    parser.add_argument("--grpc-port", type=int, help="listen port (default: settings, 50051)")
    parser.add_argument(
        "--debug-headers", action="store_true", default=None, help="honour `x-vsr-debug: true` with a trace header"
    )
    parser.add_argument(
        "--workers",
        type=int,
        help="server processes sharing the gRPC port (SO_REUSEPORT); worker k's admin port is admin_port + k "
        "(default: settings, 1)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    server_updates = {
        key: value
        for key, value in (
            ("grpc_host", args.grpc_host),
            ("grpc_port", args.grpc_port),
            ("debug_headers", args.debug_headers),
            ("workers", args.workers),
        )
        if value is not None
    }
    updates: dict[str, object] = {}
    if server_updates:
        updates["server"] = settings.server.model_copy(update=server_updates)
    if args.policy is not None:
        updates["policy_path"] = args.policy
    if getattr(args, "log_level", None):
        updates["logging"] = settings.logging.model_copy(update={"level": args.log_level})
    if updates:
        settings = settings.model_copy(update=updates)
    if settings.server.workers > 1:
        from extproc.server.workers import serve_workers

        return serve_workers(settings)
    return serve(settings)
