"""Helpers shared by subcommands: settings and a build context from the command line."""

from __future__ import annotations

import argparse
import sys

from extproc.models.executor import HeavyExecutor
from extproc.models.registry import ModelRegistry
from extproc.policy.load import PolicyError
from extproc.router import Router
from extproc.settings import Settings
from extproc.signals.base import BuildContext


def load_settings(args: argparse.Namespace) -> Settings:
    return Settings.load(getattr(args, "settings", None))


def build_context(settings: Settings) -> BuildContext:
    executor = HeavyExecutor(settings.dispatch.executor_workers, settings.dispatch.torch_threads)
    return BuildContext(settings=settings, executor=executor, models=ModelRegistry())


def router_or_report(settings: Settings) -> Router | None:
    """The router for `settings`, or None after printing every policy problem to stderr."""
    try:
        return Router.from_settings(settings)
    except PolicyError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic.format(), file=sys.stderr)
        return None
