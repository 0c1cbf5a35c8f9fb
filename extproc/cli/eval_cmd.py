"""`extproc eval --policy P --cases FILE.jsonl`: run labelled cases through the real router and
report per-decision precision / recall / false-positive rate, the confusion matrix, per-signal
hit rates and accuracy, breakdowns by `lang` and `category`, and the misses.

Each line of FILE.jsonl is one case: `text` (a user message) or `request` (an OpenAI request
body), with `expected_decision` and/or `expected_signals` ({signal: true/false or [labels]}),
optional `id`, `lang`, `category`, `path`. Gates for CI: `--min-recall DECISION=0.9` and
`--max-fp DECISION=0.01` (each repeatable). Exit status: 0, 1 when a gate fails, 2 for bad
input (unreadable or malformed case file, a name the policy does not have, a broken policy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from extproc.cli.common import load_settings, router_or_report
from extproc.tools.evaluation import EvalInputError, check_cases, evaluate_cases, load_cases, parse_gate
from extproc.tools.progress import Progress


def _gate(text: str) -> tuple[str, float]:
    try:
        return parse_gate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _label(text: str) -> tuple[str, str]:
    label, sep, decision = text.partition("=")
    if not sep or not label or not decision:
        raise argparse.ArgumentTypeError(f"expected LABEL=DECISION, got {text!r}")
    return label, decision


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a policy on labelled cases (precision, recall, confusion, misses)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--policy", type=Path, required=True, help="the policy to evaluate")
    parser.add_argument("--cases", type=Path, required=True, help="labelled cases, one JSON object a line")
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument(
        "--min-recall", type=_gate, action="append", default=[], metavar="DECISION=R",
        help="fail (exit 1) when DECISION's recall is below R (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--max-fp", type=_gate, action="append", default=[], metavar="DECISION=R",
        help="fail (exit 1) when DECISION's false-positive rate is above R (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--all-signals", action="store_true", help="run every signal on every case (hit rates over all cases)"
    )
    parser.add_argument("--max-misses", type=int, default=50, help="misses listed in the text report (default 50)")
    parser.add_argument(
        "--labels", type=_label, action="append", default=[], metavar="LABEL=DECISION",
        help="read a labelled corpus (rows with `label`): LABEL's rows expect DECISION; rows of an unmapped "
        "label expect none of the mapped decisions (repeatable; e.g. attack=jailbreak_block)",
    )  # fmt: skip
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        cases = load_cases(args.cases, dict(args.labels) or None)
    except EvalInputError as exc:
        print(f"extproc eval: {exc}", file=sys.stderr)
        return 2
    settings = load_settings(args).model_copy(update={"policy_path": args.policy})
    router = router_or_report(settings)
    if router is None:
        return 2
    try:
        decisions = {d.name for d in router.policy.decisions} | {router.policy.default.name}
        unknown = sorted({name for name, _ in [*args.min_recall, *args.max_fp]} - decisions)
        if unknown:
            print(
                f"extproc eval: gate names unknown decision(s) {', '.join(unknown)}; "
                f"the policy's decisions: {', '.join(sorted(decisions))}",
                file=sys.stderr,
            )
            return 2
        check_cases(cases, router, str(args.cases))
        progress = Progress("extproc eval", len(cases))  # on a terminal only
        try:
            report = asyncio.run(
                evaluate_cases(
                    router, cases, all_signals=args.all_signals, source=str(args.cases), progress=progress.advance
                )
            )
        finally:
            progress.close()
    except EvalInputError as exc:
        print(f"extproc eval: {exc}", file=sys.stderr)
        return 2
    finally:
        router.close()
    violations = report.check_gates(dict(args.min_recall), dict(args.max_fp))
    if args.json:
        data = report.to_dict()
        data["gates"] = {
            "min_recall": dict(args.min_recall),
            "max_fp": dict(args.max_fp),
            "violations": violations,
            "passed": not violations,
        }
        print(json.dumps(data, ensure_ascii=False))
    else:
        print(report.render(max(0, args.max_misses)), end="")
    for line in violations:
        print(f"gate failed: {line}", file=sys.stderr)
    return 1 if violations else 0
