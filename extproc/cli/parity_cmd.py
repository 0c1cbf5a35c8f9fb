"""`extproc parity --model DIR --images DIR [--precision bf16]`: our image path vs the reference.

Exit 0 when every image meets the cosine threshold (fp32 >= 0.9999, bf16 >= 0.999) and
the pixel tensors match; 1 when not; 2 when the model or images cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from extproc.cli.common import load_settings


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("parity", help="compare the image path with the reference", description=__doc__)
    parser.add_argument("--model", type=Path, help="checkpoint directory (default: settings vision.model_dir)")
    parser.add_argument("--images", type=Path, required=True, help="directory of images (png, jpg, gif, webp)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="our path's precision")
    parser.add_argument(
        "--drift",
        choices=["none", "no_normalize", "bilinear", "mean_pool"],
        default="none",
        help="inject a known drift into our path (to see the harness fail)",
    )
    parser.add_argument("--min-cosine", type=float, default=None, help="override the cosine threshold")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON after the table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from extproc.models.siglip import CheckpointError
    from extproc.tools.parity import run_parity

    model = args.model or load_settings(args).vision.model_dir
    if model is None:
        print("parity: no model: pass --model DIR or set vision.model_dir", file=sys.stderr)
        return 2
    try:
        report = run_parity(
            model,
            args.images,
            precision=args.precision,
            drift=args.drift,
            threads=args.threads,
            min_cosine=args.min_cosine,
        )
    except (CheckpointError, FileNotFoundError) as exc:
        print(f"parity: {exc}", file=sys.stderr)
        return 2
    print(report.format())
    if args.json:
        print(json.dumps(report.to_dict()))
    return 0 if report.passed else 1
