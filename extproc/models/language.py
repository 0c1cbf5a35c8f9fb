"""Language identification with lingua, whose models ship in its wheel, loaded once per set of languages."""

from __future__ import annotations

import threading
from typing import Any

from extproc.models.registry import ModelRegistry, ModelUnavailable

DEFAULT_LANGUAGES: tuple[str, ...] = ("en", "es", "fr", "de", "it", "pt", "nl", "ru", "zh", "ja", "ko", "ar")


class LanguageDetector:
    """lingua over a fixed set of ISO 639-1 languages, models preloaded."""

    def __init__(self, codes: list[str], *, low_accuracy: bool = False) -> None:
        from lingua import IsoCode639_1, Language, LanguageDetectorBuilder

        langs = []
        for code in codes:
            iso = getattr(IsoCode639_1, code.upper(), None)
            if iso is None:
                raise ModelUnavailable(f"lingua does not know the language {code!r}")
            langs.append(Language.from_iso_code_639_1(iso))
        builder = LanguageDetectorBuilder.from_languages(*langs).with_preloaded_language_models()
        if low_accuracy:
            builder = builder.with_low_accuracy_mode()
        self._detector: Any = builder.build()
        self.codes = frozenset(codes)
        self._lock = threading.Lock()

    def detect(self, text: str) -> tuple[str, float] | None:
        """(ISO 639-1 code, confidence 0..1) of the most likely language, or None for no text."""
        if sum(c.isalpha() for c in text) < 3:
            return None
        values = self._detector.compute_language_confidence_values(text)
        if not values:
            return None
        top = values[0]
        return str(top.language.iso_code_639_1.name).lower(), float(top.value)


def get_language_detector(models: ModelRegistry, codes: list[str], *, low_accuracy: bool) -> LanguageDetector:
    key = "language:" + ",".join(sorted(codes)) + (":low" if low_accuracy else "")
    return models.get(
        key,
        lambda: LanguageDetector(codes, low_accuracy=low_accuracy),
        detail=f"lingua ({len(codes)} languages{', low accuracy' if low_accuracy else ''})",
    )
