"""`extproc replay LOG... --policy NEW.yaml`: re-decide logged requests under another policy and
print what changes (from decision/model -> to decision/model, counts, example request ids).

Records with captured bodies are routed again in full; the others are re-decided from their
logged signal results with the new policy's engine (signals the log lacks are unknown, and
the output says so). Exit status: 0, or 1 with --fail-on-change when any decision or model
changed (for CI gating of policy edits); 2 when the policy or the log cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from extproc.cli.common import load_settings, router_or_report
from extproc.observability.decision_log import read_records
from extproc.tools.replay import replay


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="re-decide a decision log under another policy",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("logs", nargs="+", type=Path, metavar="LOG", help="decision log files (rotated ones too)")
    parser.add_argument("--policy", type=Path, required=True, help="the policy to replay under")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--fail-on-change", action="store_true", help="exit 1 when any request would change")
    parser.add_argument(
        "--no-bodies", action="store_true", help="ignore captured bodies; re-decide from logged signal results only"
    )
    parser.add_argument("--examples", type=int, default=3, help="example request ids per row (default 3)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = load_settings(args).model_copy(update={"policy_path": args.policy})
    for log in args.logs:
        if not log.is_file():
            print(f"{log}: no such file", file=sys.stderr)
            return 2
    router = router_or_report(settings)
    if router is None:
        return 2
    try:
        report = asyncio.run(
            replay(read_records(args.logs), router, use_bodies=not args.no_bodies, examples=max(0, args.examples))
        )
    except OSError as exc:
        print(f"cannot read the log: {exc}", file=sys.stderr)
        return 2
    finally:
        router.close()
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        print(report.render(), end="")
    if report.total == 0:
        print("warning: no request records found", file=sys.stderr)
    return 1 if args.fail_on_change and report.changed else 0
