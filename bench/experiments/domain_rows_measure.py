"""Several subject-weight folders side by side: the written sets and (optionally) leave-source-out.

    .venv/bin/python bench/experiments/domain_rows_measure.py DIR [DIR ...] [--data D] [--loso]

Each DIR holds weights trained with `extproc train-domain --out DIR --extra DIR/extra_train.jsonl`
(or the shipped folder). The written evaluation sets go through one MiniLM embedder for every
folder, at the folder's own knee and at `confident` 0.4 (the default policy's); the questions
whose label changes against the first folder are listed. `--loso` adds the leave-source-out
figures of each folder's recipe (its extra and head-only rows and temperatures; the packaged
`leave_source_out`, as `bench_domain.py --loso` runs it; minutes per folder per fold).
How `domain_written_rows_batch5.md` was measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.models.domain_classifier import DomainClassifier  # noqa: E402
from extproc.tools.domain_loso import leave_source_out  # noqa: E402
from extproc.tools.domain_training import (  # noqa: E402
    HEAD_EXTRA_FILE,
    TrainConfig,
    cascade,
    load_rows,
    minilm_embedder,
    packaged_token_vectors,
)

SETS = ("exam", "everyday", "unseen")
POLICY_CONFIDENT = 0.4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "domain")
    parser.add_argument("--loso", action="store_true")
    parser.add_argument(
        "--save", type=Path, default=None, help="leave-source-out probabilities: DIR's name + .npz here"
    )
    args = parser.parse_args()
    cache = Path(tempfile.gettempdir()) / "extproc-domain-cache"
    embedder = minilm_embedder(1, cache)
    rows = {name: load_rows(REPO / "bench" / "data" / f"domain_{name}.jsonl") for name in SETS}
    vectors = {name: np.asarray(embedder.embed([r.text for r in rs]), dtype=np.float32) for name, rs in rows.items()}
    knee_predictions: dict[tuple[Path, str], np.ndarray] = {}
    for folder in args.dirs:
        clf = DomainClassifier.load(folder)
        labels = list(clf.labels)
        print(f"{folder} (knee {clf.confident})")
        for name, rs in rows.items():
            first = np.stack([clf.first_stage_probs(r.text) for r in rs])
            mixed = [clf.embedding_probs(vectors[name][i], first[i].astype(np.float32)) for i in range(len(rs))]
            head = np.stack(mixed)
            truth = np.array([labels.index(r.label) for r in rs])
            figures = []
            for confident in (clf.confident, POLICY_CONFIDENT):
                pred, embedded = cascade(first, head, confident)
                right = int((pred == truth).sum())
                figures.append(f"{right}/{len(rs)} at {confident} ({float(embedded.mean()):.1%} embedded)")
                if confident == clf.confident:
                    knee_predictions[(folder, name)] = pred
            print(f"  {name}: " + ", ".join(figures))
            base = knee_predictions[(args.dirs[0], name)]
            for i in np.flatnonzero(base != knee_predictions[(folder, name)]):
                moved = f"{labels[base[i]]} -> {labels[knee_predictions[(folder, name)][i]]}"
                print(f"    [{rs[i].label}] {moved}: {rs[i].text[:90]}")
        if args.loso:
            corpus = load_rows(args.data / "train.jsonl") + load_rows(args.data / "test.jsonl")
            temperatures = clf.meta.get("cv_metrics", {}).get("cv_temperatures", {})
            pair = (float(temperatures.get("first", 1.0)), float(temperatures.get("head", 1.0)))
            result = leave_source_out(
                corpus,
                load_rows(folder / "extra_train.jsonl"),
                embedder.embed,
                packaged_token_vectors(1, cache),
                # weights without a neighbour vote are scored without one (as `bench_domain.py --loso`)
                TrainConfig(threads=1) if clf.neighbours else TrainConfig(threads=1, neighbours_k=0),
                pair,
                log=lambda m: print(m, file=sys.stderr, flush=True),
                head_extra=load_rows(head_file) if (head_file := folder / HEAD_EXTRA_FILE).is_file() else [],
                vote_temperature=float(temperatures.get("vote", 1.0)),
            )
            if args.save is not None:
                args.save.mkdir(parents=True, exist_ok=True)
                np.savez(
                    args.save / f"{folder.name}.npz",
                    y=result.y,
                    folds=result.folds,
                    first=result.first,
                    head=result.head,
                )
            for confident in sorted({clf.confident, 0.6, POLICY_CONFIDENT}):
                report = result.report(confident)
                report.pop("per_subject_stage2")
                print(f"  leave-source-out at {confident}:", json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
