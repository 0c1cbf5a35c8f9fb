"""`extproc serve`: the ext_proc gRPC server Envoy talks to (health service included)."""

from __future__ import annotations

import argparse
from pathlib import Path

from extproc.cli.common import load_settings
from extproc.server.app import serve
from extproc.server.reload import EnvoySync
from extproc.settings import Settings


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
    parser.add_argument(
        "--xds-dir",
        type=Path,
        metavar="DIR",
        help="Envoy's file-based xDS directory (written by `extproc envoy-config --xds-dir DIR`): each policy "
        "reload rewrites its cds.yaml / lds.yaml, so the running Envoy follows (default: settings' reload.xds_dir)",
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
    if args.xds_dir is not None:
        updates["reload"] = settings.reload.model_copy(update={"xds_dir": args.xds_dir.resolve()})
    if updates:
        settings = settings.model_copy(update=updates)
    if settings.server.workers > 1:
        from extproc.server.workers import serve_workers

        return serve_workers(settings)
    return serve(settings, envoy_sync=envoy_sync_for(settings))


def envoy_sync_for(settings: Settings) -> EnvoySync | None:
    """The reloader's xDS rewrite for `reload.xds_dir` (None: no directory)."""
    directory = settings.reload.xds_dir
    if directory is None:
        return None
    from extproc.ops.envoy_config.dynamic import rewrite_from_policy

    def sync(policy: Path) -> list[Path]:
        return rewrite_from_policy(policy, directory)

    return sync
