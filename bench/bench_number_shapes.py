"""Two sets of subject weights through the default policy, one run: what dropping non-arithmetic
numerals (dates, times, versions, prices, ...; `extproc.models.number_shapes`) changes.

    .venv/bin/python bench/bench_number_shapes.py --before DIR_OR_REV --after DIR [--json]

Each side runs in its own process with the packaged weights folder pointed at its weights:
hard STEM problems to the reasoning model (`bench/data/routing_eval.jsonl`), the 2,658 everyday
requests (`bench/data/everyday_*.jsonl`) that reach `stem_hard` and `stem_easy`, and stage 1 on
bare arithmetic and on texts full of dates and times. A revision (`cadb3f7`) is read with git.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WEIGHTS = "extproc/models/weights/domain_classifier"
EVERYDAY = ("everyday_requests.jsonl", "everyday_unseen.jsonl", "everyday_safety_questions.jsonl")
ARITHMETIC = ["what is 2 + 2", "17*23?", "what's 144 / 12", "How much is 7 times 8?", "what is 3/4 + 1/2"]
DATED = [
    "notes from mtg 3/14: budget 40k approved, launch may 15, review 3/21 at 14:30",
    "reminder: dentist 12/6 at 3pm, pay rent $1,200 by 1/1",
    "release v2.3.1 shipped on 2026-12-06; v2.4.0 planned for 2027-01-15",
    "1. call mom\n2. buy milk ($4)\n3. book flight for the 3rd",
]


def weights_dir(spec: str, scratch: Path) -> Path:
    for candidate in (Path(spec), REPO / spec):
        if candidate.is_dir():
            return candidate
    out = scratch / spec
    out.mkdir(parents=True)
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", spec, f"{WEIGHTS}/"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout.split()
    for name in names:
        blob = subprocess.run(["git", "show", f"{spec}:{name}"], cwd=REPO, check=True, capture_output=True).stdout
        (out / Path(name).name).write_bytes(blob)
    return out


def measure(directory: Path) -> dict[str, Any]:
    import extproc.models.domain_classifier as dc
    from extproc.router import Router
    from extproc.settings import Settings
    from extproc.tools.evaluation import evaluate_cases, load_cases, parse_case

    dc.DEFAULT_WEIGHTS_DIR = directory  # the policy's `domain` signals load the packaged folder
    clf = dc.DomainClassifier.load(directory)
    settings = Settings.load(None).model_copy(update={"policy_path": REPO / "policies" / "default.yaml"})
    router = Router.from_settings(settings)
    try:
        routing = asyncio.run(evaluate_cases(router, load_cases(REPO / "bench" / "data" / "routing_eval.jsonl")))
        everyday = []
        for name in EVERYDAY:
            for n, line in enumerate((REPO / "bench" / "data" / name).read_text(encoding="utf-8").splitlines(), 1):
                row = json.loads(line)
                everyday.append(parse_case({"text": row["text"], "id": f"{name}:{n}"}, n))
        daily = asyncio.run(evaluate_cases(router, everyday))
    finally:
        router.close()
    hard = routing.decisions["stem_hard"]
    to_reasoning = [r for r in daily.results if r.actual == "stem_hard"]
    return {
        "weights": str(directory),
        "drop_number_shapes": clf.drop_shapes,
        "hard_stem_recall": hard.recall,
        "hard_stem_precision": hard.precision,
        "routing_accuracy": routing.accuracy(),
        "everyday_cases": len(daily.results),
        "everyday_to_stem_hard": len(to_reasoning),
        "everyday_to_stem_easy": sum(r.actual == "stem_easy" for r in daily.results),
        "everyday_to_stem_hard_ids": [r.case.id for r in to_reasoning],
        "stage1": {
            t: (clf.labels[int(p.argmax())], round(float(p.max()), 2))
            for t in ARITHMETIC + DATED
            for p in [clf.first_stage_probs(t)]
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="cadb3f7", help="weights folder or git revision")
    parser.add_argument("--after", default=WEIGHTS, help="weights folder or git revision")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        sides = {}
        for label, spec in (("before", args.before), ("after", args.after)):
            directory = weights_dir(spec, Path(tmp))
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(directory)], check=True, capture_output=True, text=True
            ).stdout
            sides[label] = json.loads(out.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(sides, indent=1))
        return 0
    b, a = sides["before"], sides["after"]
    print(
        f"before {args.before} (drop_number_shapes {b['drop_number_shapes']}) -> after {args.after} "
        f"(drop_number_shapes {a['drop_number_shapes']})"
    )
    rb, ra = b["routing_accuracy"], a["routing_accuracy"]
    print(
        f"routing_eval hard STEM -> reasoning: {b['hard_stem_recall']:.1%} -> {a['hard_stem_recall']:.1%} "
        f"(precision {b['hard_stem_precision']:.1%} -> {a['hard_stem_precision']:.1%}); "
        f"decision accuracy {rb[0]}/{rb[1]} -> {ra[0]}/{ra[1]}"
    )
    print(
        f"{a['everyday_cases']} everyday requests -> stem_hard: {b['everyday_to_stem_hard']} -> "
        f"{a['everyday_to_stem_hard']}; -> stem_easy: {b['everyday_to_stem_easy']} -> {a['everyday_to_stem_easy']}"
    )
    for text, before in b["stage1"].items():
        print(f"  stage 1 {text[:60]!r}: {before} -> {tuple(a['stage1'][text])}")
    print("everyday to stem_hard, after:", ", ".join(a["everyday_to_stem_hard_ids"]))
    print("everyday to stem_hard, before:", ", ".join(b["everyday_to_stem_hard_ids"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
