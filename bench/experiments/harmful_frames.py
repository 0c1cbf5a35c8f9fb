"""Issue 48, fifth pass: refit the harmful output with the benign request-frame rows
(`benign_frames_latin.jsonl`) beside the written Latin rows, grafted onto the shipped weights
(the attack output unchanged), as the fourth pass did: `_fit_output`, 5 folds, thresholds out of
fold, the cached MiniLM vectors. `--part script` refits the other scripts' stage with
`benign_help_scripts.jsonl` instead (lexical only, no embeddings); `--written-scripts` adds
`harmful_written_scripts.jsonl` (issue 48, sixth pass), `--l2` changes the lexical penalty.

    nice -n 5 .venv/bin/python bench/experiments/harmful_frames.py --part latin --scale 0.25 --out /tmp/w25
    nice -n 5 .venv/bin/python bench/experiments/harmful_frames.py --part script --out /tmp/wscript
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

from extproc.models.attack_classifier import DEFAULT_WEIGHTS_DIR, HEAD_FILE, LEXICAL_FILE, META_FILE  # noqa: E402
from extproc.tools.attack_training.cli import _minilm  # noqa: E402
from extproc.tools.attack_training.corpus import TrainConfig  # noqa: E402
from extproc.tools.attack_training.fitting import lexical_matrix  # noqa: E402
from extproc.tools.attack_training.train import _fit_output, _training_set, embed_texts, fit_script_lexical  # noqa: E402
from extproc.tools.training import save_safetensors  # noqa: E402


class _Later:
    """The vectors, computed when first indexed, once `flag` exists (another process filling the cache)."""

    def __init__(self, make: Callable[[], Any], flag: Path) -> None:
        self.make, self.flag, self.value = make, flag, None

    def __getitem__(self, key: Any) -> Any:
        while not self.flag.exists():
            time.sleep(10)
        if self.value is None:
            self.value = self.make()
        return self.value[key]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent.parent / "shared" / "data" / "safety")
    parser.add_argument("--part", choices=("latin", "script"), required=True)
    parser.add_argument("--scale", type=float, default=0.25, help="written rows' weight (latin part)")
    parser.add_argument("--no-frames", action="store_true", help="without the benign frame rows (the fourth pass)")
    parser.add_argument("--base", type=Path, default=DEFAULT_WEIGHTS_DIR, help="weights to graft onto")
    parser.add_argument("--cache-dir", type=Path, default=Path("/work/wt/cache"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--written-scripts", action="store_true", help="script part: harmful_written_scripts.jsonl too")
    parser.add_argument("--l2", type=float, help="the lexical L2 penalty (default: TrainConfig's)")
    parser.add_argument("--wait-for", type=Path, help="a file whose existence says the cache is filled")
    args = parser.parse_args()
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    cfg = TrainConfig(
        written_harmful=True,
        written_latin=True,
        written_frames=not args.no_frames,
        written_help_scripts=True,
        written_scale=args.scale,
        written_scripts=args.written_scripts,
        **({"lexical_l2": args.l2} if args.l2 is not None else {}),
    )
    if args.out.resolve() != args.base.resolve():
        shutil.copytree(args.base, args.out, dirs_exist_ok=True)
    lexical = dict(load_file(str(args.out / LEXICAL_FILE)))
    head = dict(load_file(str(args.out / HEAD_FILE)))
    meta = json.loads((args.out / META_FILE).read_text(encoding="utf-8"))
    if args.part == "script":
        fit = fit_script_lexical(args.data, cfg, "harmful", say)
        assert fit is not None
        lexical["harmful.script_weight"] = fit.weight
        lexical["harmful.script_bias"] = np.array([fit.bias], dtype=np.float32)
        meta["thresholds"]["harmful"]["script_high"] = fit.script_high
        meta["cv_metrics"]["harmful"]["script_stage"] = fit.metrics
    else:
        data = _training_set(args.data, cfg, say)
        x = lexical_matrix(data.texts, cfg.lexical)
        if args.wait_for is not None:  # the lexical folds need no vectors: start them while the cache fills
            emb: Any = _Later(lambda: embed_texts(_minilm(1, args.cache_dir), data.texts), args.wait_for)
        else:
            emb = embed_texts(_minilm(1, args.cache_dir), data.texts)
        fit = _fit_output(data, x, emb, "harmful", 1, say)
        lexical["harmful.weight"] = fit.lexical_weight
        lexical["harmful.bias"] = np.array([fit.lexical_bias], dtype=np.float32)
        head.update({f"harmful.{k}": v for k, v in asdict(fit.head).items()})
        script_high = meta["thresholds"]["harmful"].get("script_high")
        meta["thresholds"]["harmful"] = {**fit.thresholds, **({"script_high": script_high} if script_high else {})}
        stage = meta["cv_metrics"]["harmful"].get("script_stage")
        meta["cv_metrics"]["harmful"] = {**fit.metrics, **({"script_stage": stage} if stage else {})}
    meta.setdefault("experiment", {})[args.part] = {
        "scale": args.scale,
        "frames": not args.no_frames,
        "written_scripts": args.written_scripts,
        "l2": cfg.lexical_l2,
    }
    save_safetensors(lexical, args.out / LEXICAL_FILE)
    save_safetensors(head, args.out / HEAD_FILE)
    (args.out / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps({"thresholds": meta["thresholds"]["harmful"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
