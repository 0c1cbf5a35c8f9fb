"""`extproc probe --model DIR --probe FILE`: top-1 accuracy and inversion rate on known images.

Exit 0, or 1 when `--min-accuracy` / `--max-inversion` is given and not met; 2 when the
model or the probe file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from extproc.cli.common import load_settings


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("probe", help="zero-shot accuracy of a vision checkpoint", description=__doc__)
    parser.add_argument("--model", type=Path, help="checkpoint directory (default: settings vision.model_dir)")
    parser.add_argument("--probe", type=Path, required=True, help="probe YAML (labels by vertical, images)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default=None, help="default: settings")
    parser.add_argument("--min-accuracy", type=float, default=None, help="fail under this top-1 accuracy (0..1)")
    parser.add_argument("--max-inversion", type=float, default=None, help="fail over this inversion rate (0..1)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON after the table")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from extproc.models.siglip import CheckpointError, VisionEncoder
    from extproc.tools.image_labels_probe import Probe, ProbeError, run_probe

    settings = load_settings(args)
    model = args.model or settings.vision.model_dir
    if model is None:
        print("probe: no model: pass --model DIR or set vision.model_dir", file=sys.stderr)
        return 2
    try:
        probe = Probe.load(args.probe)
        encoder = VisionEncoder.load(
            model, precision=args.precision or settings.vision.precision, cache_size=0, threads=args.threads
        )
        report = run_probe(encoder, probe)
    except (CheckpointError, ProbeError, OSError) as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return 2
    print(report.format())
    if args.json:
        print(json.dumps(report.to_dict()))
    failed = (args.min_accuracy is not None and report.top1_accuracy < args.min_accuracy) or (
        args.max_inversion is not None and report.inversion_rate > args.max_inversion
    )
    return 1 if failed else 0
