"""`extproc envoy-config --policy P`: render envoy/envoy.yaml and envoy/ext_proc_filter.yaml.

`--check` compares the files on disk with what the policy renders (exit 1 when they differ);
`--validate` runs `envoy --mode validate` on the full config. `--xds-dir DIR` writes the config as
file-based dynamic resources instead (DIR/bootstrap.yaml naming DIR/cds.yaml and DIR/lds.yaml):
run it again after a policy change and the running Envoy picks the new clusters and routes up, no
restart (`extproc.ops.envoy_config.dynamic`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from extproc.cli.common import load_settings
from extproc.ops.envoy_config import EnvoyOptions, envoy_binary, parse_address, render

FULL_NAME = "envoy.yaml"
SNIPPET_NAME = "ext_proc_filter.yaml"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("envoy-config", help="generate the Envoy config from a policy", description=__doc__)
    parser.add_argument("--policy", type=Path, help="policy file (default: settings' policy_path)")
    parser.add_argument("--out-dir", type=Path, default=Path("envoy"), help="where to write (default: envoy/)")
    parser.add_argument("--stdout", action="store_true", help="print envoy.yaml instead of writing files")
    parser.add_argument(
        "--deploy", action="store_true", help="also write docker/envoy.yaml and docker/k8s/envoy-configmap.yaml"
    )
    parser.add_argument("--check", action="store_true", help="fail if the files differ from a fresh render")
    parser.add_argument(
        "--xds-dir",
        type=Path,
        metavar="DIR",
        help="write DIR/bootstrap.yaml + cds.yaml + lds.yaml (file-based xDS): rerun after a policy change "
        "and the running Envoy reloads them without a restart",
    )
    parser.add_argument("--validate", action="store_true", help="run `envoy --mode validate` on the result")
    parser.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="CLUSTER=HOST:PORT",
        help="point a cluster elsewhere (e.g. at a real vLLM server); repeatable",
    )
    parser.add_argument("--listen", default="127.0.0.1:8801", metavar="HOST:PORT", help="Envoy listener")
    parser.add_argument("--ext-proc", default="127.0.0.1:50051", metavar="HOST:PORT", help="ext_proc gRPC server")
    parser.add_argument("--admin", default="127.0.0.1:9901", metavar="HOST:PORT", help="Envoy admin (keep on loopback)")
    parser.add_argument(
        "--flow",
        choices=["one-message", "three-messages"],
        default="one-message",
        help="ext_proc messages per request: the body only (default), or headers, body and response headers "
        "(for routers that match headers only, e.g. the service-mesh manifests)",
    )
    parser.add_argument(
        "--tenant-header",
        action="append",
        default=[],
        metavar="NAME",
        help="a request header that keys the semantic cache's tenant partition (repeatable; default: "
        "authorization and x-api-key, the Anthropic clients' key; e.g. a header your auth filter sets)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="leave out the semantic cache's store phase and tenant headers"
    )
    parser.set_defaults(func=run)


def options_from_args(args: argparse.Namespace) -> EnvoyOptions:
    listen_host, listen_port = parse_address(args.listen)
    ext_host, ext_port = parse_address(args.ext_proc)
    admin_host, admin_port = parse_address(args.admin)
    return EnvoyOptions(
        listener_host=listen_host,
        listener_port=listen_port,
        ext_proc_host=ext_host,
        ext_proc_port=ext_port,
        admin_host=admin_host,
        admin_port=admin_port,
        flow="three_messages" if getattr(args, "flow", "one-message") == "three-messages" else "one_message",
        cache=not getattr(args, "no_cache", False),
        tenant_headers=tuple(h.lower() for h in getattr(args, "tenant_header", None) or EnvoyOptions().tenant_headers),
        # Envoy's message timeout is sized from the server's deadline (these settings: file and VSR_*).
        request_deadline_ms=load_settings(args).dispatch.request_deadline_ms,
    )


def parse_overrides(values: list[str]) -> dict[str, str]:
    overrides = {}
    for value in values:
        cluster, sep, address = value.partition("=")
        if not sep:
            raise ValueError(f"--upstream {value!r}: expected CLUSTER=HOST:PORT")
        parse_address(address)
        overrides[cluster] = address
    return overrides


def validate(path: Path) -> tuple[bool, str]:
    """`envoy --mode validate -c path`: (ok, Envoy's last output lines)."""
    proc = subprocess.run(
        [str(envoy_binary()), "--mode", "validate", "-c", str(path), "--use-dynamic-base-id", "--log-level", "error"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode == 0, "\n".join(output[-5:])


def run(args: argparse.Namespace) -> int:
    try:
        options = options_from_args(args)
        policy = args.policy or load_settings(args).policy_path
        full, snippet = render(policy, options, parse_overrides(args.upstream))
    except (OSError, ValueError) as exc:
        print(f"envoy-config: {exc}", file=sys.stderr)
        return 2
    if args.stdout:
        sys.stdout.write(full)
        return 0
    if args.xds_dir is not None:
        from extproc.ops.envoy_config.dynamic import write_dynamic

        try:
            changed = write_dynamic(full, args.xds_dir)
        except (OSError, ValueError) as exc:
            print(f"envoy-config: {exc}", file=sys.stderr)
            return 2
        for path in changed:
            print(f"wrote {path}")
        if not changed:
            print(f"{args.xds_dir}: unchanged")
        return 0
    files = {args.out_dir / FULL_NAME: full, args.out_dir / SNIPPET_NAME: snippet}
    if args.check:
        stale = [p for p, text in files.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"{path}: differs from `extproc envoy-config --policy {policy}`", file=sys.stderr)
        if stale:
            return 1
    else:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for path, text in files.items():
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        if args.deploy:
            from extproc.ops.deploy import write_all

            try:
                deployed = write_all()
            except FileNotFoundError as exc:
                print(f"envoy-config: {exc}", file=sys.stderr)
                return 2
            for path in deployed:
                print(f"wrote {path}")
    if args.validate:
        with tempfile.TemporaryDirectory() as tmp:
            target = args.out_dir / FULL_NAME if not args.check else Path(tmp) / FULL_NAME
            if args.check:
                target.write_text(full, encoding="utf-8")
            ok, output = validate(target)
        print(output)
        if not ok:
            return 1
    return 0
