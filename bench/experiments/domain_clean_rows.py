"""Drop the subject classifier's written training rows that sit too close, by MiniLM cosine, to an
evaluation text (`extproc/tools/domain_apart.py`; issue 44, 2026-12-07).

    .venv/bin/python bench/experiments/domain_clean_rows.py [--data ../shared/data/domain]
        [--threshold 0.84] [--write]

Prints, per training file, the cosine histogram of each row's nearest evaluation text and the
rows at or above the threshold with that text; `--write` rewrites the files without them (row
order and bytes of the kept rows unchanged).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR  # noqa: E402
from extproc.models.text_embedder import load_text_embedder  # noqa: E402
from extproc.settings import EmbedderSettings  # noqa: E402
from extproc.tools.domain_apart import DROP_COSINE, evaluation_files, mostly_cjk, too_close, unit_rows  # noqa: E402
from extproc.tools.training import CachedEmbedder  # noqa: E402

TRAINING_FILES = ("extra_train.jsonl", "head_train.jsonl")


def texts_of(path: Path) -> list[str]:
    return [str(json.loads(line)["text"]) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "domain")
    parser.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS_DIR)
    parser.add_argument("--threshold", type=float, default=DROP_COSINE)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--cache", type=Path, default=None, help="an .npz cache of the vectors")
    args = parser.parse_args()
    served = load_text_embedder(EmbedderSettings(cache_size=0), torch_threads=1)
    embedder = CachedEmbedder(served, args.cache, 384) if args.cache else served
    eval_texts: list[str] = []
    eval_names: list[str] = []
    for path in evaluation_files(args.data if args.data.is_dir() else None):
        texts = texts_of(path)
        eval_texts += texts
        eval_names += [path.name] * len(texts)
        print(f"evaluation {path.name}: {len(texts)}")
    eval_vecs = unit_rows(embedder.embed(eval_texts))
    for name in TRAINING_FILES:
        path = args.weights / name
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        texts = [str(json.loads(line)["text"]) for line in lines]
        vecs = unit_rows(embedder.embed(texts))
        readable = ~np.array([mostly_cjk(t) for t in texts])
        best = (vecs[readable] @ eval_vecs.T).max(axis=1)
        hist = {f">={t}": int((best >= t).sum()) for t in (0.75, 0.8, 0.84, 0.85, 0.9, 0.95)}
        print(f"\n{name}: {len(texts)} rows; nearest evaluation cosine (rows not mostly CJK, any set) {hist}")
        near = too_close(texts, vecs, eval_texts, eval_vecs, args.threshold)
        by_file: dict[str, int] = {}
        for n in sorted(near, key=lambda n: -n.cosine):
            by_file[eval_names[n.evaluation]] = by_file.get(eval_names[n.evaluation], 0) + 1
            print(
                f"  {n.cosine:.3f} {texts[n.train][:90]!r}\n        ~ {eval_names[n.evaluation]}: "
                f"{eval_texts[n.evaluation][:90]!r}"
            )
        print(f"  {len(near)} at >= {args.threshold}: {by_file}")
        if args.write and near:
            drop = {n.train for n in near}
            kept = [line for i, line in enumerate(lines) if i not in drop]
            path.write_text("\n".join(kept) + "\n", encoding="utf-8")
            print(f"  wrote {path}: {len(kept)} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
