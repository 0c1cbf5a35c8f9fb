"""`extproc import-vsr CONFIG.yaml [-o POLICY.yaml] [--strict] [--explain REQUEST.json...]`: turn a
vLLM Semantic Router config into a policy, and say what could not be carried over.

The report (item, VSR path, why) is printed and written as comments at the top of the policy.
The written policy is checked as `extproc check` does; `--explain` then routes the given
requests through it, as `extproc explain --policy` would.

Exit status: 0 written and valid; 1 the written policy does not pass `check`, or an explained
request could not be read; 2 the input cannot be read or is not a VSR config; 3 `--strict` and
something was approximated or not carried over (nothing is written).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import yaml

from extproc.cli import explain
from extproc.cli.common import build_context, load_settings, router_or_report
from extproc.policy.load import check_text
from extproc.tools.vsr_import import VsrImportError, import_vsr, render_policy, report_table, summary_line


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "import-vsr", help="convert a vLLM Semantic Router config into a policy", description=__doc__
    )
    parser.add_argument("config", type=Path, metavar="CONFIG.yaml", help="the VSR config (current or flat layout)")
    parser.add_argument("-o", "--output", type=Path, help="write the policy here (default: print it)")
    parser.add_argument("--strict", action="store_true", help="fail when anything is approximated or not carried over")
    parser.add_argument(
        "--explain",
        nargs="+",
        metavar="REQUEST.json",
        default=[],
        help="route these requests through the imported policy",
    )
    parser.add_argument("--json", action="store_true", help="with --explain: one JSON object per request")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        raw = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    except OSError as exc:
        print(f"{args.config}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except yaml.YAMLError as exc:
        print(f"{args.config}: invalid YAML: {exc}", file=sys.stderr)
        return 2
    try:
        result = import_vsr(raw if isinstance(raw, dict) else {})
    except VsrImportError as exc:
        print(f"{args.config}: {exc}", file=sys.stderr)
        return 2
    # The report goes to stdout when the policy goes to a file, else to stderr beside the policy.
    report = sys.stdout if args.output else sys.stderr
    print(summary_line(result), file=report)
    not_exact = result.not_exact()
    if not_exact:
        print(report_table(not_exact), file=report)
    if args.strict and not_exact:
        print(
            f"--strict: {len(not_exact)} construct(s) approximated or not carried over; nothing written",
            file=sys.stderr,
        )
        return 3
    text = render_policy(result, source=args.config.name)
    settings = load_settings(args)
    ctx = build_context(settings)
    try:
        diagnostics = check_text(text, ctx, file=str(args.output or "<imported policy>"))
    finally:
        ctx.executor.shutdown()
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    for diagnostic in diagnostics:
        print(diagnostic.format(), file=sys.stderr)
    if any(d.severity == "error" for d in diagnostics):
        print("the imported policy does not pass `extproc check` (see above)", file=sys.stderr)
        return 1
    if not args.explain:
        return 0
    return _explain(args, text)


def _explain(args: argparse.Namespace, text: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = args.output or Path(tmp) / "imported.yaml"
        if not args.output:
            path.write_text(text, encoding="utf-8")
        settings = load_settings(args).model_copy(update={"policy_path": path})
        router = router_or_report(settings)
        if router is None:
            return 1
        try:
            ns = argparse.Namespace(requests=args.explain, json=args.json, path=None)
            return asyncio.run(explain._explain_all(router, ns, settings))
        finally:
            router.close()
