"""The `extproc` command. Each subcommand lives in its own module exposing `add_parser`."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from extproc.settings import SettingsError

# Subcommand modules, each with `add_parser(subparsers)` that sets `func` on its parser.
COMMANDS: tuple[str, ...] = (
    "extproc.cli.check",
    "extproc.cli.explain",
    "extproc.cli.serve",
    "extproc.cli.envoy_config_cmd",
    "extproc.cli.demo",
    "extproc.cli.stack_cmd",  # issue 3
    "extproc.cli.parity_cmd",
    "extproc.cli.probe_cmd",
    "extproc.cli.models_cmd",  # issue 4
    "extproc.cli.replay_cmd",  # issue 6
    "extproc.cli.train_classifier_cmd",
    "extproc.cli.eval_cmd",  # issue 11
    "extproc.cli.import_vsr_cmd",
    "extproc.cli.train_domain_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="extproc", description="Envoy ext_proc router for OpenAI-style requests")
    parser.add_argument("--settings", metavar="FILE", help="settings YAML (VSR_* environment variables override it)")
    parser.add_argument("--log-level", default=None, help="logging level (default: from settings, INFO)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in COMMANDS:
        importlib.import_module(module_name).add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=(args.log_level or "WARNING").upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except SettingsError as exc:
        print(f"extproc: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
