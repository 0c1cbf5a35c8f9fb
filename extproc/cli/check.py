"""`extproc check [POLICY...]`: print every problem in a policy in one run; exit 1 on any error.

Without `--models` no model is loaded (the check takes well under a second): every rule,
reference, priority and reachability check still runs; only what a model alone knows (a
checkpoint's label names, whether a model directory loads) waits for `--models`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.policy.load import Diagnostic, check_text
from extproc.settings import Settings
from extproc.signals.base import BuildContext

NOT_LOADED = "its model is not loaded by `extproc check` (--models loads it)"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("check", help="validate policy files", description=__doc__)
    parser.add_argument(
        "policies", nargs="*", type=Path, metavar="POLICY", help="policy files (default: settings' policy_path)"
    )
    parser.add_argument(
        "--models",
        action="store_true",
        help="also load the models the signals use (seconds): checks label names against checkpoints",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = Settings.load(getattr(args, "settings", None))  # not cli.common: it imports the router
    executor = HeavyExecutor(settings.dispatch.executor_workers, settings.dispatch.torch_threads)
    models = ModelRegistry() if args.models else ModelRegistry(load=False, not_loaded=NOT_LOADED)
    ctx = BuildContext(settings=settings, executor=executor, models=models)
    failed = False
    try:
        for path in args.policies or [settings.policy_path]:
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                print(Diagnostic("error", "", f"cannot read policy: {exc.strerror or exc}", str(path)).format())
                failed = True
                continue
            with _quiet_unless(args.models):
                diagnostics = check_text(text, ctx, file=str(path))
            for diagnostic in diagnostics:
                print(diagnostic.format())
            errors = sum(d.severity == "error" for d in diagnostics)
            warnings = sum(d.severity == "warning" for d in diagnostics)
            if errors:
                failed = True
                print(f"{path}: {errors} error(s)", file=sys.stderr)
            else:
                print(f"{path}: OK" + (f" ({warnings} warning(s))" if warnings else ""))
    finally:
        executor.shutdown()
    return 1 if failed else 0


@contextmanager
def _quiet_unless(models: bool) -> Iterator[None]:
    """Without --models every model signal logs that it is unavailable: expected here, not news."""
    logger = logging.getLogger("extproc")
    level = logger.level
    if not models:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
