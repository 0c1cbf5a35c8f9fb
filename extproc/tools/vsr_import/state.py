"""What the importer collects while it reads, and how it reports each construct."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from extproc.policy.reasoning import BUILTIN_FAMILIES
from extproc.signals.registry import SignalCatalog
from extproc.tools.vsr_import.reading import Capabilities, VsrModel, detect_layout, join_path
from extproc.tools.vsr_import.report import ReportItem
from extproc.tools.vsr_import.vocabulary import EFFORTS, Layout


class ImporterState:
    """The state of one import and the report it writes; the mappers below add one construct each."""

    def __init__(self, config: Mapping[str, Any], caps: Capabilities, catalog: SignalCatalog) -> None:
        self.config = config
        self.caps = caps
        self.catalog = catalog
        self.layout: Layout = detect_layout(config)
        self.complexity_composers: dict[str, Mapping[str, Any]] = {}  # complexity rule -> VSR composer
        self.from_recipe = False  # one of a v0.3 config's `recipes` (set by import_vsr)
        self.items: list[ReportItem] = []
        self.models: dict[str, VsrModel] = {}  # VSR model name -> card
        self.lora_models: dict[tuple[str, str], str] = {}
        self.signals: list[dict[str, Any]] = []  # our signal specs, in order
        self.signal_names: set[str] = set()
        self.leaves: dict[tuple[str, str], dict[str, Any]] = {}  # (section, VSR name) -> our leaf
        self.leaf_missing: dict[tuple[str, str], str] = {}  # (section, VSR name) -> why unmapped
        self.used_signals: set[str] = set()
        self.signal_paths: dict[str, str] = {}
        self.decision_names: set[str] = set()
        self.reasoning_effort_default: str | None = None
        self.families: dict[str, tuple[str, str]] = {}
        self.family_paths: dict[str, str] = {}  # VSR family name -> where it is declared
        self.custom_families: dict[str, str] = {}  # VSR family name -> our families-table row
        self.family_rows: dict[str, dict[str, str]] = {}  # our row name -> ReasoningFamily fields
        self.family_row_names: set[str] = set(BUILTIN_FAMILIES)  # a row of ours never replaces a built-in one
        self.model_cards: dict[str, dict[str, Any]] = {}
        self.prompt_guard: Mapping[str, Any] | None = None
        self.category_model: Mapping[str, Any] = {}
        self.reasoning_of_refs: list[tuple[Any, Any]] = []
        self.decision_paths: dict[str, str] = {}  # our decision name -> its VSR path
        self.constants: dict[tuple[str, str], bool] = {}  # (section, VSR name) -> a leaf that never changes
        self.tiers: dict[str, int] = {}  # VSR decision name -> its tier
        self.assignments: dict[str, list[dict[str, Any]]] = {}  # VSR decision -> the entrypoint's model refs

    # -- reporting
    def mapped(self, item: str, path: str, why: str) -> None:
        self.items.append(ReportItem(item, path, "mapped", why))

    def approx(self, item: str, path: str, why: str) -> None:
        self.items.append(ReportItem(item, path, "approximated", why))

    def unmapped(self, item: str, path: str, why: str) -> None:
        self.items.append(ReportItem(item, path, "unmapped", why))

    def fields(
        self, raw: Mapping[str, Any], path: str, known: Iterable[str], dropped: Mapping[str, str] | None = None
    ) -> None:
        """Report the keys of `raw` that are neither read (`known`) nor known to have no counterpart."""
        known_set = set(known)
        for key in raw:
            if key in known_set:
                continue
            if dropped and key in dropped:
                self.unmapped(f"field {key}", join_path(path, key), dropped[key])
            else:
                self.unmapped(
                    f"unknown key {key}", join_path(path, key), "unknown key: not a VSR field this importer knows"
                )

    @contextlib.contextmanager
    def guarded(self, item: str, path: str) -> Iterator[None]:
        """Whatever a malformed construct raises becomes a report item; the import goes on."""
        try:
            yield
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            self.unmapped(item, path, f"could not be read: {exc}")

    def _effort(self, raw: Any, path: str, item: str) -> str | None:
        """A VSR reasoning effort as one of ours; anything else is reported and left out."""
        if raw is None:
            return None
        if isinstance(raw, str) and raw.lower() in EFFORTS:
            return raw.lower()
        self.unmapped(item, path, f"not carried over: effort {raw!r} is none of {', '.join(EFFORTS)}")
        return None

    def _strategy(self, raw: Any, path: str) -> None:
        if raw is None:
            return
        if str(raw).lower() == "priority":
            self.mapped("decision strategy", path, "as priority order (highest priority wins)")
        else:
            self.approx("decision strategy", path, f"approximated: {raw!r} as priority order")
