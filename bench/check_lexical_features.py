"""The prompt-attack classifier's fast feature path against its reference, bit for bit, and the
C kernel's logit against the numpy path's, on every text of the safety corpus (train and test
splits) and the everyday requests.

    .venv/bin/python bench/check_lexical_features.py [--data ../shared/data/safety]

Compares `lexical_features` with `reference_lexical_features` (ids, float32 values by their
bits) and the lexical probability each gives with the shipped weights, then the C kernel's
logit with the numpy path's (within KERNEL_TOLERANCE); exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from extproc.models.attack_classifier import (  # noqa: E402
    KERNEL_TOLERANCE,
    AttackClassifier,
    _sigmoid,
    check_kernel_parity,
    lexical_features,
    reference_lexical_features,
)


def read_texts(path: Path) -> list[str]:
    # split("\n"), not splitlines(): the texts hold raw U+0085 and U+2028.
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "safety")
    args = parser.parse_args()
    classifier = AttackClassifier.load()
    config, weights, bias = classifier.config, classifier.lexical_weights, classifier.lexical_bias
    files = [args.data / "train.jsonl", args.data / "test.jsonl", REPO / "bench" / "data" / "everyday_requests.jsonl"]
    compared = different = 0
    for path in files:
        texts = read_texts(path)
        for text in texts:
            ids, values = lexical_features(text, config)
            ref_ids, ref_values = reference_lexical_features(text, config)
            same = (
                ids.dtype == ref_ids.dtype
                and values.dtype == ref_values.dtype
                and np.array_equal(ids, ref_ids)
                and np.array_equal(values.view(np.uint32), ref_values.view(np.uint32))
                and _sigmoid(bias + float(values @ weights[ids]))
                == _sigmoid(bias + float(ref_values @ weights[ref_ids]))
            )
            compared += 1
            if not same:
                different += 1
                print(f"DIFFERENT: {path.name}: {text[:80]!r}")
        print(f"{path}: {len(texts)} texts")
    print(f"{compared} texts compared, {different} differences")
    if classifier.backend != "c":
        print("the C lexical kernel is not built: nothing more to compare")
        return 1 if different else 0
    texts = [text for path in files for text in read_texts(path)]
    worst, where = check_kernel_parity(classifier, texts)
    print(f"C kernel vs numpy lexical logit: largest difference {worst:.2e} (tolerance {KERNEL_TOLERANCE:.0e})")
    if worst > KERNEL_TOLERANCE:
        print(f"KERNEL DIFFERS on {where!r:.80}")
        return 1
    return 1 if different else 0


if __name__ == "__main__":
    raise SystemExit(main())
