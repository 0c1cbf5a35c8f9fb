"""`extproc models pull NAME [--dir DIR]` and `extproc models check DIR`.

`pull` downloads a checkpoint from the Hugging Face Hub (machines with internet only) into
DIR/NAME and checks it; `check` says whether a directory holds a complete SigLIP-family
checkpoint (weights, the pooling head, logit scale and bias, tokenizer, processor config).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

# What a SigLIP-family checkpoint needs; nothing else is downloaded.
PULL_PATTERNS = [
    "config.json",
    "*.safetensors",
    "model.safetensors.index.json",
    "preprocessor_config.json",
    "processor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "spiece.model",
    "tokenizer.model",
]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("models", help="fetch or check model checkpoints", description=__doc__)
    sub = parser.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    pull = sub.add_parser("pull", help="download a checkpoint (needs internet)")
    pull.add_argument("name", help="Hub repository, e.g. google/siglip-base-patch16-224")
    pull.add_argument("--dir", type=Path, default=Path("models"), help="parent directory (default: ./models)")
    pull.add_argument("--revision", default=None, help="branch, tag or commit")
    pull.set_defaults(func=run_pull)
    check = sub.add_parser("check", help="check a local checkpoint directory")
    check.add_argument("path", type=Path)
    check.set_defaults(func=run_check)


def target_dir(parent: Path, name: str) -> Path:
    return parent / name.replace("/", "--")


def run_pull(args: argparse.Namespace) -> int:
    from extproc.models.siglip import CheckpointError, inspect_checkpoint

    target = target_dir(args.dir, args.name)
    existed = target.exists()
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        print("models pull: huggingface_hub is not installed (pip install huggingface_hub)", file=sys.stderr)
        return 2
    try:
        snapshot_download(
            repo_id=args.name, revision=args.revision, local_dir=str(target), allow_patterns=PULL_PATTERNS
        )
    except Exception as exc:  # offline mode, no network, unknown repo, auth: all end here
        if not existed:
            shutil.rmtree(target, ignore_errors=True)  # leave no half-made checkpoint behind
        print(
            f"models pull: could not download {args.name!r} from the Hugging Face Hub "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}).\n"
            "This command needs internet access (and HF_HUB_OFFLINE unset). On an offline machine, "
            f"copy a checkpoint directory there instead and point vision.model_dir at it; "
            "`extproc models check DIR` verifies it.",
            file=sys.stderr,
        )
        return 2
    try:
        info = inspect_checkpoint(target)
    except CheckpointError as exc:
        print(f"models pull: downloaded, but the checkpoint is not usable: {exc}", file=sys.stderr)
        return 1
    print(f"pulled {args.name} -> {target}\n{info.describe()}\nset VSR_VISION__MODEL_DIR={target}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    from extproc.models.siglip import CheckpointError, inspect_checkpoint

    try:
        info = inspect_checkpoint(args.path)
    except CheckpointError as exc:
        print(f"models check: {exc}", file=sys.stderr)
        return 1
    print(f"OK: {info.describe()}")
    return 0
