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
`bench/data/domain_unseen.jsonl` is a third written set (140: ten per subject, four exam-style,
four in everyday chatbot phrasing, two not in English; issue 44), written apart from the training
rows and never trained on.

`--compare-rev REV` scores the weights committed at REV (e.g. the previous shipped weights) on
the same sets in the same run, per subject beside the current ones. `--loso` adds the
leave-source-out figures of the training recipe (`extproc/tools/domain_loso.py`: every corpus
row predicted without its source; minutes per fold): the model-selection criterion, since the
test split shares its textbooks with the training rows. `--loso-recipe previous` runs the
recipe before issue 44 (no number neutralisation, without the issue-44 written rows).
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
from extproc.tools.domain_evaluation import baselines, evaluate, format_report  # noqa: E402
from extproc.tools.domain_training import embed_all, load_rows, minilm_embedder  # noqa: E402


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
    parser.add_argument(
        "--unseen",
        type=Path,
        default=REPO / "bench" / "data" / "domain_unseen.jsonl",
        help="subject-labelled exam-style and everyday items (issue 44; never trained on)",
    )
    parser.add_argument("--compare-rev", default=None, help="also score the weights committed at this git revision")
    parser.add_argument("--loso", action="store_true", help="leave-source-out figures of the training recipe")
    parser.add_argument("--loso-recipe", choices=("current", "previous"), default="current")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    classifier = DomainClassifier.load(args.weights)
    compare = DomainClassifier.load(weights_at(args.compare_rev)) if args.compare_rev else None
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
        "unseen": (args.unseen, "issue-44 written set"),
    }
    sets = {
        key: (path, what, evaluate(classifier, load_rows(path), embedder.embed, timing_repeats=1))
        for key, (path, what) in held_out.items()
    }
    compared = (
        {
            key: evaluate(compare, load_rows(path), embedder.embed, timing_repeats=1)
            for key, (path, _) in held_out.items()
        }
        if compare is not None
        else {}
    )
    compared_test = evaluate(compare, test_rows, embedder.embed, timing_repeats=1) if compare is not None else None
    loso = run_loso(args, classifier, embedder) if args.loso else None
    if args.json:
        extra = {key: result for key, (_, _, result) in sets.items()}
        out = {"report": report, "baselines": base, "signal_latency": latency, **extra, "loso": loso}
        out["compare"] = {"rev": args.compare_rev, "test": compared_test, **compared} if compare else None
        print(json.dumps(out, indent=2))
        return 0
    print(format_report(report, base))
    if compared_test is not None:
        print(
            f"weights at {args.compare_rev} on the test split: {compared_test['cascade']['accuracy']:.4f} "
            f"({1 - compared_test['stage1_share']:.1%} embedded)"
        )
    print(f"domain signal per request (distinct texts, answer_now): {latency}")
    for key, (path, what, result) in sets.items():
        print(held_out_line(path, what, result))
        if key in compared:
            print("  " + held_out_line(path, f"weights at {args.compare_rev}", compared[key]))
    print(subject_table({k: r for k, (_, _, r) in sets.items()}, compared, loso))
    return 0


def weights_at(rev: str) -> Path:
    """The weight files committed at `rev`, in a temporary folder."""
    import subprocess
    import tempfile

    from extproc.models.domain_classifier import (
        DEFAULT_WEIGHTS_DIR,
        HEAD_FILE,
        LEXICAL_FILE,
        META_FILE,
        NEIGHBOURS_FILE,
        STATIC_FILE,
    )

    folder = Path(tempfile.mkdtemp(prefix="domain-weights-"))
    relative = DEFAULT_WEIGHTS_DIR.relative_to(REPO)
    for name in (LEXICAL_FILE, HEAD_FILE, STATIC_FILE, META_FILE, NEIGHBOURS_FILE):
        shown = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:{relative.as_posix()}/{name}"], capture_output=True
        )
        if shown.returncode != 0 and name == NEIGHBOURS_FILE:
            continue  # weights from before the neighbour vote
        shown.check_returncode()
        (folder / name).write_bytes(shown.stdout)
    return folder


def run_loso(args: argparse.Namespace, classifier: DomainClassifier, embedder: Any) -> dict[str, Any]:
    import tempfile

    from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR
    from extproc.tools.domain_loso import leave_source_out
    from extproc.tools.domain_training import EXTRA_FILE, HEAD_EXTRA_FILE, TrainConfig, packaged_token_vectors

    corpus = load_rows(args.data / "train.jsonl") + load_rows(args.data / "test.jsonl")
    folder = args.weights or DEFAULT_WEIGHTS_DIR
    extra = load_rows(folder / EXTRA_FILE)
    # the recipe's rows for stage 2 only (`head_train.jsonl`): left out, the figure is another recipe's
    head_extra = load_rows(folder / HEAD_EXTRA_FILE) if (folder / HEAD_EXTRA_FILE).is_file() else []
    temperatures = classifier.meta.get("cv_metrics", {}).get("cv_temperatures", {})
    pair = (float(temperatures.get("first", 1.0)), float(temperatures.get("head", 1.0)))
    vote_temperature = float(temperatures.get("vote", 1.0))
    # weights without a neighbour vote (meta.json's head.neighbours) are scored without one
    cfg = (
        TrainConfig(threads=args.threads)
        if classifier.neighbours
        else TrainConfig(threads=args.threads, neighbours_k=0)
    )
    if args.loso_recipe == "previous":
        extra = [r for r in extra if "issue 44" not in r.source]
        head_extra = []
        cfg = TrainConfig(
            threads=args.threads,
            neutralise_numbers=False,
            head_l2=1e-4,
            head_source_power=0.0,
            head_blend=0.0,
            neighbours_k=0,
        )
        pair, vote_temperature = (1.0, 1.0), 1.0
    vectors = packaged_token_vectors(args.threads, Path(tempfile.gettempdir()) / "extproc-domain-cache")
    result = leave_source_out(
        corpus,
        extra,
        embedder.embed,
        vectors,
        cfg,
        pair,
        log=lambda m: print(m, file=sys.stderr),
        head_extra=head_extra,
        vote_temperature=vote_temperature,
    )
    return {"recipe": args.loso_recipe, **result.report(classifier.confident)}


def subject_table(
    sets: dict[str, dict[str, Any]], compared: dict[str, dict[str, Any]], loso: dict[str, Any] | None
) -> str:
    """Recall per subject on every written set (and leave-source-out), beside the compared weights."""
    columns = [(key, sets[key]) for key in sets] + [(f"{key}@prev", compared[key]) for key in compared]
    head = f"{'subject':18s}" + "".join(f" {name:>14s}" for name, _ in columns)
    head += f" {'loso':>8s}" if loso else ""
    lines = ["per-subject recall (cascade as shipped):", head]
    for name in sets[next(iter(sets))]["cascade"]["per_label"]:
        line = f"{name:18s}" + "".join(f" {r['cascade']['per_label'][name]['recall']:14.3f}" for _, r in columns)
        if loso:
            line += f" {loso['per_subject'].get(name, 0.0):8.3f}"
        lines.append(line)
    line = f"{'all':18s}" + "".join(f" {r['cascade']['accuracy']:14.3f}" for _, r in columns)
    lines.append(line + (f" {loso['cascade']:8.3f}" if loso else ""))
    if loso:
        lines.append(
            f"leave-source-out ({loso['recipe']} recipe, {loso['rows']} rows, {loso['folds']} source folds): "
            f"cascade {loso['cascade']:.4f} ({loso['embedded']:.1%} embedded), stage 1 {loso['stage1']:.4f}, "
            f"stage 2 {loso['stage2']:.4f}"
        )
        lines.extend(f"  {c['confident']:.2f} -> {c['embedded']:.3f} {c['accuracy']:.4f}" for c in loso["tradeoff"])
    return "\n".join(lines)


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
