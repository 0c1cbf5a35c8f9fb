"""`extproc import-vsr CONFIG.yaml [-o POLICY.yaml] [--recipe NAME] [--kb NAME=DIR] [--no-calibrate]
[--strict] [--explain REQUEST.json...]`: turn a vLLM Semantic Router config (a file, or a ConfigMap
holding one) into a policy, and say what could not be carried over.

A v0.3 config with several `recipes` imports one (`--recipe`, default the first). Knowledge bases
VSR ships beside its router are read from `--kb NAME=DIR` (labels.json, taxonomy.json) or from
`knowledge_bases/` beside the config. Embedding thresholds VSR tuned to its own encoder are
calibrated for ours from the recipe's own candidates (`--no-calibrate` keeps them as written).

The report (item, VSR path, why) is printed and written as comments at the top of the policy.
The written policy is checked as `extproc check` does; `--explain` then routes the given
requests through it, as `extproc explain --policy` would.

Exit status: 0 written and valid; 1 the written policy does not pass `check`, or an explained
request could not be read; 2 the input cannot be read or is not a VSR config; 3 `--strict` and
something was approximated or not carried over (nothing is written).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import yaml

from extproc.cli import explain
from extproc.cli.common import build_context, load_settings, router_or_report
from extproc.policy.load import check_text
from extproc.settings import Settings
from extproc.tools.vsr_import import VsrImportError, import_vsr, render_policy, report_table, summary_line
from extproc.tools.vsr_import.calibration import Embed


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "import-vsr", help="convert a vLLM Semantic Router config into a policy", description=__doc__
    )
    parser.add_argument("config", type=Path, metavar="CONFIG.yaml", help="the VSR config (current or flat layout)")
    parser.add_argument("-o", "--output", type=Path, help="write the policy here (default: print it)")
    parser.add_argument("--strict", action="store_true", help="fail when anything is approximated or not carried over")
    parser.add_argument("--recipe", help="which recipe of a multi-recipe config (default: the first)")
    parser.add_argument(
        "--kb", action="append", default=[], metavar="NAME=DIR", help="a knowledge base's folder (repeatable)"
    )
    parser.add_argument(
        "--no-calibrate", action="store_true", help="keep VSR's embedding thresholds as written (no encoder load)"
    )
    parser.add_argument(
        "--explain",
        nargs="+",
        metavar="REQUEST.json",
        default=[],
        help="route these requests through the imported policy",
    )
    parser.add_argument("--json", action="store_true", help="with --explain: one JSON object per request")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        raw = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    except OSError as exc:
        print(f"{args.config}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except yaml.YAMLError as exc:
        print(f"{args.config}: invalid YAML: {exc}", file=sys.stderr)
        return 2
    kb_dirs: dict[str, Path] = {}
    for entry in args.kb:
        name, sep, folder = str(entry).partition("=")
        if not sep or not name or not folder:
            print(f"--kb {entry!r}: expected NAME=DIR", file=sys.stderr)
            return 2
        kb_dirs[name] = Path(folder)
    settings = load_settings(args)
    embed = None if args.no_calibrate else _embedder(settings)
    try:
        result = import_vsr(
            raw if isinstance(raw, dict) else {},
            recipe=args.recipe,
            kb_dirs=kb_dirs,
            base_dir=args.config.parent,
            embed=embed,
        )
    except VsrImportError as exc:
        print(f"{args.config}: {exc}", file=sys.stderr)
        return 2
    # The report goes to stdout when the policy goes to a file, else to stderr beside the policy.
    report = sys.stdout if args.output else sys.stderr
    print(summary_line(result), file=report)
    not_exact = result.not_exact()
    if not_exact:
        print(report_table(not_exact), file=report)
    if args.strict and not_exact:
        print(
            f"--strict: {len(not_exact)} construct(s) approximated or not carried over; nothing written",
            file=sys.stderr,
        )
        return 3
    text = render_policy(result, source=args.config.name)
    ctx = build_context(settings)
    try:
        diagnostics = check_text(text, ctx, file=str(args.output or "<imported policy>"))
    finally:
        ctx.executor.shutdown()
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    for diagnostic in diagnostics:
        print(diagnostic.format(), file=sys.stderr)
    if any(d.severity == "error" for d in diagnostics):
        print("the imported policy does not pass `extproc check` (see above)", file=sys.stderr)
        return 1
    if not args.explain:
        return 0
    return _explain(args, text)


def _embedder(settings: Settings) -> Embed:
    """The shared text embedder for calibration, loaded on first use (only a recipe with embedding
    rules needs it); a failure to load it is reported by the calibration and thresholds stay as written."""
    loaded: list[Embed] = []

    def embed(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if not loaded:
            ctx = build_context(settings)
            try:
                loaded.append(ctx.text_embedder().embed)
            finally:
                ctx.executor.shutdown()
        return loaded[0](texts)

    return embed


def _explain(args: argparse.Namespace, text: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = args.output or Path(tmp) / "imported.yaml"
        if not args.output:
            path.write_text(text, encoding="utf-8")
        settings = load_settings(args).model_copy(update={"policy_path": path})
        router = router_or_report(settings)
        if router is None:
            return 1
        try:
            ns = argparse.Namespace(requests=args.explain, json=args.json, path=None)
            return asyncio.run(explain._explain_all(router, ns, settings))
        finally:
            router.close()
