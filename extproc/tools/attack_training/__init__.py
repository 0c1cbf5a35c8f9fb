"""Training and evaluation of the prompt-attack classifier (see `attack_classifier.py`).

    python -m extproc.tools.attack_training --data ../shared/data/safety \
        --out extproc/models/weights/attack_classifier            # train on train.jsonl, then evaluate on test.jsonl
    python -m extproc.tools.attack_training --data ../shared/data/safety --eval-only

Only the TRAIN split is used for fitting and for every choice (regularisation is fixed in
`TrainConfig`; thresholds come from k-fold cross-validation on train). The TEST split is
read for evaluation only.

Procedure (deterministic: fixed folds, fixed seeds, one torch thread):
1. Lexical features (hashed character n-grams and shape n-grams) for every train row.
2. K folds by a hash of the normalised first 60 characters (near-duplicate prompts and an
   e-mail with / without its injected line share a fold). For each fold a class-weighted,
   L2-regularised logistic regression is fitted on the other folds (full-batch L-BFGS),
   giving out-of-fold lexical probabilities for every row.
3. The embedding head (an MLP over the MiniLM embedding + the out-of-fold lexical logit)
   is cross-validated on the same folds, giving out-of-fold head probabilities.
4. Thresholds `low`, `high`, `decision` are searched on the out-of-fold scores: the
   highest attack recall with benign false positives <= `fp_target` and the share of
   benign texts reaching the embedding stage <= `embed_target` (targets below the
   deployment targets, as margin).
5. Final models are fitted on all of train and written: lexical weights as float16 (the
   float16/float32 score difference is checked and recorded), the head in float32,
   `meta.json` with the config, thresholds, corpus hash and cross-validated metrics.

The steps live in `corpus.py` (rows, config, crops, folds), `fitting.py` (the fits and the threshold
search), `train.py`, `evaluate.py` and `cli.py`.
"""

from extproc.tools.attack_training.cli import main
from extproc.tools.attack_training.corpus import CorpusRow, TrainConfig, benign_crops, load_corpus
from extproc.tools.attack_training.evaluate import evaluate, format_report
from extproc.tools.attack_training.fitting import lexical_matrix, sigmoid, sparse_logits
from extproc.tools.attack_training.train import train

__all__ = [
    "CorpusRow",
    "TrainConfig",
    "benign_crops",
    "evaluate",
    "format_report",
    "lexical_matrix",
    "load_corpus",
    "main",
    "sigmoid",
    "sparse_logits",
    "train",
]
