"""`extproc train-domain --data DIR [--out DIR] [--eval-only]`: train the shipped subject classifier
on DIR/train.jsonl (plus the project's own extra_train.jsonl beside the weights, and its
head_train.jsonl, rows for stage 2 only; the cascade
threshold by cross-validation on train), write the weights, and print its figures on
DIR/test.jsonl beside the TF-IDF and MiniLM baselines. Deterministic: the same corpus gives
the same files, byte for byte."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from extproc.ops.paths import TRAINING_ONLY, in_repository
from extproc.tools.pinned_numerics import pin_training_numerics
from extproc.tools.progress import heartbeat


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("train-domain", help="train / evaluate the subject classifier", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="folder with train.jsonl and test.jsonl")
    parser.add_argument("--out", type=Path, help="weights folder (default: the packaged one)")
    parser.add_argument("--extra", type=Path, help="extra training rows (default: OUT/extra_train.jsonl)")
    parser.add_argument("--head-extra", type=Path, help="rows for stage 2 only (default: OUT/head_train.jsonl)")
    parser.add_argument("--eval-only", action="store_true", help="evaluate the weights in --out on test.jsonl")
    parser.add_argument("--no-baselines", action="store_true", help="skip the baselines")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: deterministic)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # before the trainer imports numpy and torch: the same bytes on any AVX2 host
    for problem in pin_training_numerics(os.environ):
        print(f"extproc train-domain: numerics not pinned: {problem}", file=sys.stderr)
    from extproc.tools.domain_evaluation import main

    wanted = "test.jsonl" if args.eval_only else "train.jsonl"
    if not (args.data / wanted).is_file():
        print(f"extproc train-domain: no {wanted} in {args.data}", file=sys.stderr)
        return 2
    if not args.eval_only and args.out is None and args.extra is None and not in_repository():
        # The shipped weights were trained with the project's extra rows, which the wheel leaves out:
        # training without them would silently write other weights over the shipped ones.
        print(f"extproc train-domain: {TRAINING_ONLY}", file=sys.stderr)
        return 2
    argv = ["--data", str(args.data), "--threads", str(args.threads)]
    for flag, value in (("--out", args.out), ("--extra", args.extra), ("--head-extra", args.head_extra)):
        if value is not None:
            argv += [flag, str(value)]
    argv += ["--eval-only"] if args.eval_only else []
    argv += ["--no-baselines"] if args.no_baselines else []
    argv += ["--json"] if args.json else []
    with heartbeat("extproc train-domain"):  # on a terminal only
        return main(argv)
