"""`extproc check [POLICY...]`: print every problem in a policy; exit 1 on any error."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from extproc.cli.common import build_context, load_settings
from extproc.policy.load import Diagnostic, check_text


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("check", help="validate policy files", description=__doc__)
    parser.add_argument(
        "policies", nargs="*", type=Path, metavar="POLICY", help="policy files (default: settings' policy_path)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args)
    ctx = build_context(settings)
    failed = False
    try:
        for path in args.policies or [settings.policy_path]:
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                print(Diagnostic("error", "", f"cannot read policy: {exc.strerror or exc}", str(path)).format())
                failed = True
                continue
            diagnostics = check_text(text, ctx, file=str(path))
            for diagnostic in diagnostics:
                print(diagnostic.format())
            errors = sum(d.severity == "error" for d in diagnostics)
            if errors:
                failed = True
                print(f"{path}: {errors} error(s)", file=sys.stderr)
            else:
                print(f"{path}: OK" + (f" ({len(diagnostics)} warning(s))" if diagnostics else ""))
    finally:
        ctx.executor.shutdown()
    return 1 if failed else 0
