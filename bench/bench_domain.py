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
for this project and never trained on: the corpus is textbook questions, users are not).
The test split is for evaluation only: nothing here tunes anything.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

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
    everyday_rows = load_rows(args.everyday)
    everyday = evaluate(classifier, everyday_rows, embedder.embed, timing_repeats=1)
    if args.json:
        print(
            json.dumps({"report": report, "baselines": base, "signal_latency": latency, "everyday": everyday}, indent=2)
        )
    else:
        print(format_report(report, base))
        print(f"domain signal per request (distinct texts, answer_now): {latency}")
        print(
            f"everyday phrasing ({args.everyday.name}, {len(everyday_rows)} requests written for evaluation only): "
            f"cascade {everyday['cascade']['accuracy']:.3f} with {1 - everyday['stage1_share']:.1%} embedded, "
            f"stage 1 alone {everyday['stage1_only']['accuracy']:.3f}, "
            f"stage 2 on every text {everyday['stage2_everywhere']['accuracy']:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
