"""Experiment (issue 21): is the prompt-attack classifier's lexical stage short of capacity or over-regularised?

The lexical stage (hashed character 1-5-grams in 2**18 buckets, shape 3-5-grams in 2**16, one
logistic regression per output) decides most texts alone, and the attacks it scores below `low`
are never seen by the embedding stage. This study refits it with one setting changed at a time,
with the training module's own rows, row weights, folds and fitting code, and prints the
out-of-fold recall at fixed false-positive rates on the benign corpus rows (all, short and
non-English attacks or harmful requests), so that only the ranking is compared, not thresholds:

    .venv/bin/python bench/experiments/lexical_capacity.py base bits20 ngram6 l2_3e-6 l2_3e-7 l2_1e-7 l2_3e-8

Each setting costs about four minutes on two cores. Figures and conclusions: lexical_capacity.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from extproc.tools.attack_training.corpus import TrainConfig  # noqa: E402
from extproc.tools.attack_training.fitting import lexical_matrix  # noqa: E402
from extproc.tools.attack_training.train import _out_of_fold_lexical, _training_set, rows_for  # noqa: E402

FP_RATES = (0.004, 0.008, 0.02)
BASE = TrainConfig(threads=2)
SETTINGS = {
    "base": BASE,
    "bits20": replace(BASE, lexical=replace(BASE.lexical, bits=20)),
    "ngram6": replace(BASE, lexical=replace(BASE.lexical, ngram_max=6)),
    "l2_3e-6": replace(BASE, lexical_l2=3e-6),
    "l2_3e-7": replace(BASE, lexical_l2=3e-7),
    "l2_1e-7": replace(BASE, lexical_l2=1e-7),
    "l2_3e-8": replace(BASE, lexical_l2=3e-8),
}


def out_of_fold(cfg: TrainConfig, data_dir: Path) -> dict[str, dict[str, list[float]]]:
    """Per output and false-positive rate: out-of-fold recall of all, short and non-English positives."""
    data = _training_set(data_dir, cfg, lambda _m: None)
    x = lexical_matrix(data.texts, cfg.lexical)
    report: dict[str, dict[str, list[float]]] = {}
    for output in data.outputs:
        used, positive = rows_for(data, output)
        idx = np.flatnonzero(used)
        y = positive[idx]
        logit = _out_of_fold_lexical(data, x.take(idx), idx, y, output, lambda _m: None)
        judged = data.original[idx] & (y | data.benign[idx])
        benign, hits = logit[judged & ~y], logit[judged & y]
        short, non_en = data.short[idx][judged & y], data.non_en[idx][judged & y]
        report[output] = {}
        for rate in FP_RATES:
            bar = np.quantile(benign, 1.0 - rate)
            report[output][f"fp {rate:.1%}"] = [
                round(float((scores > bar).mean()), 4) for scores in (hits, hits[short], hits[non_en])
            ]
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("settings", nargs="+", choices=sorted(SETTINGS))
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "safety")
    args = parser.parse_args()
    for name in args.settings:
        started = time.perf_counter()
        report = out_of_fold(SETTINGS[name], args.data)
        print(name, json.dumps(report), f"({time.perf_counter() - started:.0f} s; recall all / short / non-English)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
