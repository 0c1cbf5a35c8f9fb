"""Small policies for loader and engine tests, compiled with the fake signal catalog."""

from __future__ import annotations

import textwrap

from extproc.policy.load import CompiledPolicy, Diagnostic, PolicyLoader, check_text, compile_text
from extproc.signals.base import BuildContext
from tests.fakes import fake_catalog

BASE = """
version: 1
models:
  - {name: text-model, cluster: text_cluster, modalities: [text], context_window: 100}
  - {name: big-text, cluster: big_cluster, modalities: [text]}
  - {name: vlm, cluster: vlm_cluster, modalities: [text, image]}
"""


def policy_text(body: str, base: str = BASE) -> str:
    return textwrap.dedent(base) + textwrap.dedent(body)


def compile_policy(body: str, ctx: BuildContext, base: str = BASE) -> CompiledPolicy:
    text = policy_text(body, base)
    return compile_text(text, ctx, loader=PolicyLoader(fake_catalog(), file="test.yaml"))


def diagnostics(body: str, ctx: BuildContext, base: str = BASE) -> list[Diagnostic]:
    return check_text(policy_text(body, base), ctx, catalog=fake_catalog(), file="test.yaml")


def errors(body: str, ctx: BuildContext, base: str = BASE) -> list[str]:
    return [d.format() for d in diagnostics(body, ctx, base) if d.severity == "error"]
