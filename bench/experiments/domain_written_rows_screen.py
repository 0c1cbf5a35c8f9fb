"""Screens for a batch of written subject rows (issue 44, batch 7): apart from the evaluation sets,
and apart from the training rows already written.

    .venv/bin/python bench/experiments/domain_written_rows_screen.py DRAFT.jsonl [--cache F.npz]

Prints each draft a screen catches, with the screen, the figure and the evaluation *file* it is
near (never the evaluation text: the author of the rows does not read the evaluation sets), or the
training row it repeats:

1. word 3-gram Jaccard >= 0.5 (`near_repeats.near_any`) against the evaluation sets and against
   every training row (corpus train and test splits, `extra_train.jsonl`, `head_train.jsonl`,
   the earlier written batches under bench/experiments);
2. word-set Jaccard >= 0.5 against the evaluation sets (rewordings);
3. MiniLM cosine >= 0.75 to a question of the three written evaluation sets, and
   `domain_apart.too_close` (cosine >= 0.84, CJK by character bigrams) against every evaluation
   file (written sets, `routing_eval.jsonl`, `everyday_*.jsonl`, the corpus's test split);
4. MiniLM cosine >= 0.85 to a written training row (`extra_train.jsonl`, `head_train.jsonl`):
   the same topic in other words, not a new one (printed with the training row).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from extproc.models.domain_classifier import DEFAULT_WEIGHTS_DIR  # noqa: E402
from extproc.tools.domain_apart import DROP_COSINE, WRITTEN_SETS, evaluation_files, mostly_cjk, too_close, unit_rows  # noqa: E402
from extproc.tools.near_repeats import near_any  # noqa: E402
from extproc.tools.training import CachedEmbedder, packaged_minilm  # noqa: E402

WORD = re.compile(r"\w+", re.UNICODE)


def texts_of(path: Path) -> list[str]:
    return [str(json.loads(line)["text"]) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def word_set(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("draft", type=Path)
    parser.add_argument("--data", type=Path, default=REPO.parent.parent / "shared" / "data" / "domain")
    parser.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS_DIR)
    parser.add_argument("--cache", type=Path, default=None, help="an .npz cache of the MiniLM vectors")
    parser.add_argument("--json", type=Path, default=None, help="write the caught drafts' indices here")
    args = parser.parse_args()

    draft = texts_of(args.draft)
    eval_files = evaluation_files(args.data if args.data.is_dir() else None)
    eval_files += sorted(p for p in (REPO / "bench" / "data").glob("everyday_*.jsonl") if p not in eval_files)
    eval_texts: list[str] = []
    eval_names: list[str] = []
    for path in eval_files:
        texts = texts_of(path)
        eval_texts += texts
        eval_names += [path.name] * len(texts)
    train_files = [args.data / "train.jsonl", args.weights / "extra_train.jsonl", args.weights / "head_train.jsonl"]
    train_files += sorted(
        p for p in (REPO / "bench" / "experiments").glob("domain_*rows*.jsonl") if p.resolve() != args.draft.resolve()
    )
    train_texts = [t for p in train_files if p.is_file() for t in texts_of(p)]
    print(
        f"{len(draft)} drafts; {len(eval_texts)} evaluation texts in {len(eval_files)} files;"
        f" {len(train_texts)} training texts"
    )

    caught: dict[int, list[str]] = {}

    def catch(i: int, why: str) -> None:
        caught.setdefault(i, []).append(why)

    # 1. word 3-grams, evaluation and training
    near_eval = near_any(eval_texts, 0.5)
    near_train = near_any(train_texts, 0.5)
    for i, t in enumerate(draft):
        if near_eval(t):
            catch(i, "1: 3-gram Jaccard >= 0.5 to an evaluation text")
        if near_train(t):
            catch(i, "1: 3-gram Jaccard >= 0.5 to a training row")
    # 2. word sets, evaluation
    eval_sets = [word_set(t) for t in eval_texts]
    for i, t in enumerate(draft):
        mine = word_set(t)
        for j, theirs in enumerate(eval_sets):
            if mine and theirs and len(mine & theirs) / len(mine | theirs) >= 0.5:
                catch(i, f"2: word-set Jaccard >= 0.5 to {eval_names[j]}")
                break
    # 3. MiniLM, evaluation
    embedder_inner, _ = packaged_minilm(1, batch_size=32, one_text_a_pass=True)
    embedder = CachedEmbedder(embedder_inner, args.cache, 384) if args.cache else embedder_inner
    d_vec = unit_rows(embedder.embed(draft))
    e_vec = unit_rows(embedder.embed(eval_texts))
    written = np.array([n in WRITTEN_SETS for n in eval_names])
    d_read = np.array([not mostly_cjk(t) for t in draft])
    e_read = written & np.array([not mostly_cjk(t) for t in eval_texts])
    sims = d_vec @ e_vec[e_read].T
    names_w = [n for n, keep in zip(eval_names, e_read, strict=True) if keep]
    for i in np.flatnonzero(d_read):
        j = int(sims[i].argmax())
        if sims[i, j] >= 0.75:
            catch(int(i), f"3: cosine {sims[i, j]:.3f} to {names_w[j]}")
    for n in too_close(draft, d_vec, eval_texts, e_vec, DROP_COSINE):
        catch(n.train, f"3: too_close {n.cosine:.3f} to {eval_names[n.evaluation]}")
    # 4. MiniLM, written training rows
    written_train = [t for p in train_files[1:] if p.is_file() for t in texts_of(p)]
    w_vec = unit_rows(embedder.embed(written_train))
    w_read = np.array([not mostly_cjk(t) for t in written_train])
    sims = d_vec @ w_vec[w_read].T
    w_texts = [t for t, keep in zip(written_train, w_read, strict=True) if keep]
    for i in np.flatnonzero(d_read):
        j = int(sims[i].argmax())
        if sims[i, j] >= 0.85:
            catch(int(i), f"4: cosine {sims[i, j]:.3f} to written row {w_texts[j][:80]!r}")

    for i in sorted(caught):
        print(f"[{i}] {draft[i][:100]!r}")
        for why in caught[i]:
            print(f"      {why}")
    print(f"{len(caught)} of {len(draft)} caught")
    if args.json:
        args.json.write_text(json.dumps({str(i): w for i, w in caught.items()}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
