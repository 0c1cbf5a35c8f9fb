"""`extproc train-classifier --data DIR [--out DIR] [--eval-only] [--recipe NAME]`: train the shipped prompt-attack
classifier on DIR/train.jsonl (thresholds by cross-validation on it), write the weights, and
print its metrics on DIR/test.jsonl. Deterministic: the same corpus gives the same files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from extproc.ops.paths import TRAINING_ONLY, in_repository
from extproc.tools.progress import heartbeat

# The training recipes (`extproc.tools.attack_training.cli.RECIPES`, imported only when training).
RECIPE_NAMES = ("default", "issue48", "written-latin", "written-frames")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "train-classifier", help="train / evaluate the prompt-attack classifier", description=__doc__
    )
    parser.add_argument("--data", type=Path, required=True, help="folder with train.jsonl and test.jsonl")
    parser.add_argument("--out", type=Path, help="weights folder (default: the packaged one)")
    parser.add_argument("--eval-only", action="store_true", help="evaluate the weights in --out on test.jsonl")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: deterministic)")
    parser.add_argument("--json", action="store_true", help="print the evaluation report as JSON")
    parser.add_argument(
        "--recipe",
        choices=RECIPE_NAMES,
        default="default",
        help="training recipe ('default' reproduces the shipped weights; 'issue48': every script, "
        "thresholds chosen out of fold; 'written-latin': the harmful output also learns the Latin-script "
        "written rows at a quarter weight, measured and not shipped; 'written-frames': those rows with benign "
        "requests in the same frames at a quarter weight, measured and not shipped; every recipe's other-scripts "
        "stage learns the help-seeking rows)",
    )
    parser.add_argument("--cache-dir", type=Path, help="where MiniLM embeddings of the corpus are cached")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from extproc.tools.attack_training.cli import main

    if not (args.data / ("test.jsonl" if args.eval_only else "train.jsonl")).is_file():
        wanted = "test.jsonl" if args.eval_only else "train.jsonl"
        print(f"extproc train-classifier: no {wanted} in {args.data}", file=sys.stderr)
        return 2
    if not args.eval_only and not in_repository():
        # The requests written for training (tools/attack_everyday_written.jsonl) are not in the
        # wheel: training without them would silently write other weights.
        print(f"extproc train-classifier: {TRAINING_ONLY}", file=sys.stderr)
        return 2
    argv = ["--data", str(args.data), "--threads", str(args.threads)]
    if args.out is not None:
        argv += ["--out", str(args.out)]
    argv += ["--eval-only"] if args.eval_only else []
    argv += ["--recipe", args.recipe]
    argv += ["--cache-dir", str(args.cache_dir)] if args.cache_dir is not None else []
    argv += ["--json"] if args.json else []
    with heartbeat("extproc train-classifier"):  # on a terminal only
        return main(argv)
