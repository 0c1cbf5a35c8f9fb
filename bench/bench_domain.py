"""The shipped subject classifier on the domain corpus's test split, beside the issue's baselines
measured in the same run, and the `domain` signal's own cost.

    .venv/bin/python bench/bench_domain.py [--data ../shared/data/domain] [--limit N]

Printed: accuracy, macro-F1 and per-subject recall of the cascade (the shipped threshold), of
stage 1 alone and of stage 2 on every text; the baselines (TF-IDF logistic regression, logistic
regression on mean-pooled MiniLM, their average; fitted on train.jsonl here, not shipped); the
share of texts stage 1 decides; the trade-off curve of the cascade's threshold (share embedded
vs accuracy); the real `domain` signal's latency per request (distinct texts, through
`answer_now` as the dispatcher calls it) where stage 1 decides; and the cascade's accuracy on
`bench/data/domain_everyday.jsonl`, 84 requests in everyday phrasing (six per subject, written
for this project and never trained on: the corpus is textbook questions, users are not), and on
`bench/data/domain_exam.jsonl`, 168 exam-style items without options (twelve per subject, written
for this project by another hand than the exam-style training rows, and never trained on).
The test split is for evaluation only: nothing here tunes anything.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from extproc.models.domain_classifier import DomainClassifier  # noqa: E402
from extproc.protocol.openai import parse_request  # noqa: E402
from extproc.signals.domain import DomainSpec, ShippedDomainModel, ShippedDomainSignal  # noqa: E402
from extproc.tools.domain_training import (  # noqa: E402
    baselines,
    embed_all,
    evaluate,
    format_report,
    load_rows,
    minilm_embedder,
)


def signal_latency(rows: list[str], classifier: DomainClassifier) -> dict[str, float | int]:
    """The signal's answer_now per request: microseconds, over requests stage 1 decides."""
    signal = ShippedDomainSignal(DomainSpec(name="subject", type="domain"), ShippedDomainModel(classifier))
    decided: list[float] = []
    unsure = 0
    for i, text in enumerate(rows):
        request = parse_request({"model": "auto", "messages": [{"role": "user", "content": f"{text} ({i})"}]})
        t0 = time.perf_counter()
        answer = signal.answer_now(request)
        elapsed = (time.perf_counter() - t0) * 1e6
        if answer is None:
            unsure += 1
        else:
            decided.append(elapsed)
    decided.sort()
    return {
        "requests": len(rows),
        "stage1_decided": len(decided),
        "needs_minilm": unsure,
        "p50_us": round(statistics.median(decided), 1) if decided else 0.0,
        "p90_us": round(decided[int(0.9 * (len(decided) - 1))], 1) if decided else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "domain")
    parser.add_argument("--weights", type=Path, default=None, help="weights folder (default: the shipped one)")
    parser.add_argument("--limit", type=int, default=0, help="use the first N test rows only (0: all)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--everyday",
        type=Path,
        default=REPO / "bench" / "data" / "domain_everyday.jsonl",
        help="subject-labelled requests in everyday phrasing (never trained on)",
    )
    parser.add_argument(
        "--exam",
        type=Path,
        default=REPO / "bench" / "data" / "domain_exam.jsonl",
        help="subject-labelled exam-style items without options (never trained on)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    classifier = DomainClassifier.load(args.weights)
    test_rows = load_rows(args.data / "test.jsonl")
    if args.limit:
        test_rows = test_rows[: args.limit]
    train_rows = load_rows(args.data / "train.jsonl")
    import tempfile

    embedder = minilm_embedder(args.threads, Path(tempfile.gettempdir()) / "extproc-domain-cache")
    report = evaluate(classifier, test_rows, embedder.embed)
    base = baselines(
        train_rows,
        test_rows,
        embed_all(embedder, [r.text for r in train_rows]),
        embed_all(embedder, [r.text for r in test_rows]),
        threads=args.threads,
    )
    latency = signal_latency([r.text for r in test_rows], classifier)
    held_out = {
        "everyday": (args.everyday, "everyday phrasing"),
        "exam": (args.exam, "exam style"),
    }
    sets = {
        key: (path, what, evaluate(classifier, load_rows(path), embedder.embed, timing_repeats=1))
        for key, (path, what) in held_out.items()
    }
    if args.json:
        extra = {key: result for key, (_, _, result) in sets.items()}
        print(json.dumps({"report": report, "baselines": base, "signal_latency": latency, **extra}, indent=2))
    else:
        print(format_report(report, base))
        print(f"domain signal per request (distinct texts, answer_now): {latency}")
        for path, what, result in sets.values():
            print(held_out_line(path, what, result))
    return 0


def held_out_line(path: Path, what: str, result: dict[str, Any]) -> str:
    """One written evaluation set's figures: the cascade, stage 1 alone, stage 2 everywhere, and
    the subjects it reads worst."""
    recall = {label: row["recall"] for label, row in result["cascade"]["per_label"].items() if row["support"]}
    worst = ", ".join(f"{label} {value:.2f}" for label, value in sorted(recall.items(), key=lambda kv: kv[1])[:4])
    return (
        f"{what} ({path.name}, {result['cascade']['rows']} texts written for evaluation only): "
        f"cascade {result['cascade']['accuracy']:.3f} with {1 - result['stage1_share']:.1%} embedded, "
        f"stage 1 alone {result['stage1_only']['accuracy']:.3f}, "
        f"stage 2 on every text {result['stage2_everywhere']['accuracy']:.3f}; weakest: {worst}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
