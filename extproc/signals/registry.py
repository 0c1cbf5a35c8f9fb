"""Signal types by their policy `type:` name: spec class and signal class, imported on first use.

Lazy imports keep a text-only policy from importing torch, OCR or language models. Tests
extend a catalog with their own types (a deliberately slow or failing signal) without
touching the built-in one.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from extproc.signals.base import Signal, SignalSpecBase


@dataclass(frozen=True, slots=True)
class SignalType:
    name: str
    spec: type[SignalSpecBase]
    signal: type[Signal]


# type name -> (module, spec class, signal class)
BUILTIN_SIGNAL_TYPES: dict[str, tuple[str, str, str]] = {
    "keyword": ("extproc.signals.keyword", "KeywordSpec", "KeywordSignal"),
    "pii": ("extproc.signals.pii", "PiiSpec", "PiiSignal"),
    "secrets": ("extproc.signals.secrets", "SecretsSpec", "SecretsSignal"),
    "jailbreak": ("extproc.signals.jailbreak", "JailbreakSpec", "JailbreakSignal"),
    "context": ("extproc.signals.context", "ContextSpec", "ContextSignal"),
    "structure": ("extproc.signals.structure", "StructureSpec", "StructureSignal"),
    "modality": ("extproc.signals.modality", "ModalitySpec", "ModalitySignal"),
    "tools": ("extproc.signals.tools", "ToolsSpec", "ToolsSignal"),
    "image_labels": ("extproc.signals.image_labels", "ImageLabelsSpec", "ImageLabelsSignal"),
    "image_text": ("extproc.signals.image_text", "ImageTextSpec", "ImageTextSignal"),
    "document": ("extproc.signals.document", "DocumentSpec", "DocumentSignal"),
    "code": ("extproc.signals.code", "CodeSpec", "CodeSignal"),
    "semantic": ("extproc.signals.semantic", "SemanticSpec", "SemanticSignal"),
    "language": ("extproc.signals.language", "LanguageSpec", "LanguageSignal"),
    "classifier": ("extproc.signals.prompt_attack", "ClassifierSpec", "ClassifierSignal"),
    "domain": ("extproc.signals.domain", "DomainSpec", "DomainSignal"),
    "complexity": ("extproc.signals.complexity", "ComplexitySpec", "ComplexitySignal"),
    # Derived signals (computed by the engine from other signals' results) and their companions.
    "score": ("extproc.signals.derived", "ScoreSpec", "ScoreSignal"),
    "partition": ("extproc.signals.derived", "PartitionSpec", "PartitionSignal"),
    "feature": ("extproc.signals.features", "FeatureSpec", "FeatureSignal"),
    "kb": ("extproc.signals.kb", "KbSpec", "KbSignal"),
    "reask": ("extproc.signals.reask", "ReaskSpec", "ReaskSignal"),
    "remote_guard": ("extproc.signals.remote_guard", "RemoteGuardSpec", "RemoteGuardSignal"),
}


class SignalCatalog:
    def __init__(self, extra: Iterable[SignalType] = (), *, builtin: bool = True) -> None:
        self._lazy = dict(BUILTIN_SIGNAL_TYPES) if builtin else {}
        self._loaded: dict[str, SignalType] = {t.name: t for t in extra}

    def with_types(self, *types: SignalType) -> SignalCatalog:
        catalog = SignalCatalog(builtin=False)
        catalog._lazy = dict(self._lazy)
        catalog._loaded = {**self._loaded, **{t.name: t for t in types}}
        return catalog

    def names(self) -> list[str]:
        return sorted(set(self._lazy) | set(self._loaded))

    def get(self, type_name: str) -> SignalType | None:
        found = self._loaded.get(type_name)
        if found is not None:
            return found
        entry = self._lazy.get(type_name)
        if entry is None:
            return None
        module_name, spec_name, signal_name = entry
        module = importlib.import_module(module_name)
        found = SignalType(type_name, getattr(module, spec_name), getattr(module, signal_name))
        self._loaded[type_name] = found
        return found
