"""Import a vLLM Semantic Router (VSR) configuration as a policy, with a report of what did not carry.

`import_vsr(config)` (`importer.py`) is pure: a parsed VSR config (a mapping) in, a policy mapping and report
items out. It reads both of VSR's published layouts:

- current: `providers.models` (backends, provider model ids, reasoning families),
  `routing.modelCards`, `routing.signals` by type, `routing.decisions` with `rules` trees and
  `modelRefs`, `global` (router aliases, the response cache);
- flat (older): top-level `vllm_endpoints`, `model_config`, `default_model`, `categories`,
  `keyword_rules`, `embedding_rules`, `decisions`, `reasoning_families`, `semantic_cache`,
  `prompt_guard`.

Every construct read becomes one report item: mapped exactly, approximated (with what it became),
or not carried over (with why). Keys the importer does not know are reported, never ignored.

Rule trees keep their meaning where they can: an unmapped leaf makes its subtree unknown; an
`OR` (or an `AND` under a `NOT`) may drop unknown children, which only makes the decision fire
less often than VSR's (reported as approximated); anything else drops the decision.

The `domain` and `complexity` signals, a route's `reasoning` and a model's `reasoning_family` are
mapped onto their real specs (extproc.signals.domain, extproc.signals.complexity,
extproc.policy.reasoning), every value checked against them first: a value they would refuse is a
report item, never part of the policy. `Capabilities` still lets a build without those types report
them as "no counterpart yet".
"""

from extproc.tools.vsr_import.importer import import_vsr
from extproc.tools.vsr_import.reading import Capabilities, VsrImportError, parse_tokens, sanitize_name
from extproc.tools.vsr_import.report import ImportResult, ReportItem, render_policy, report_table, summary_line
from extproc.tools.vsr_import.vocabulary import (
    NEEDS_COMPLEXITY,
    NEEDS_DOMAIN,
    NEEDS_REASONING_FAMILY,
    NEEDS_ROUTE_REASONING,
)

__all__ = [
    "NEEDS_COMPLEXITY",
    "NEEDS_DOMAIN",
    "NEEDS_REASONING_FAMILY",
    "NEEDS_ROUTE_REASONING",
    "Capabilities",
    "ImportResult",
    "ReportItem",
    "VsrImportError",
    "import_vsr",
    "parse_tokens",
    "render_policy",
    "report_table",
    "sanitize_name",
    "summary_line",
]
