"""image_text: text read out of images (OCR) run through the text detectors.

A passport photo is decided by its machine-readable zone, a code screenshot by the key it
leaks, and prompt injection written inside an image by the same jailbreak patterns that
catch it in plain text. Labels say what matched: `pii`, `pii:passport`, `secrets`,
`secrets:aws_access_key`, `jailbreak`, `jailbreak:instruction_override`, `keyword`,
`keyword:<word>`, `mrz` (a machine-readable zone whose check digits all agree, after OCR
repair; a valid passport MRZ also gives `pii:passport`, since it carries the number),
`mrz_invalid` (MRZ-shaped, but a check digit fails: never counted as a match), and `code`.
Evidence names the image and carries only redacted findings.

A safety signal: if OCR is unavailable or runs out of time on an image request, the
result is unknown, which fails closed by default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from extproc.detectors.code import code_likeness
from extproc.detectors.common import Finding, check_kinds
from extproc.detectors.jailbreak import JAILBREAK_CATEGORIES, find_jailbreak
from extproc.detectors.mrz import find_mrz
from extproc.detectors.pii import PII_KINDS, find_pii
from extproc.detectors.secrets import SECRET_KINDS, find_secrets
from extproc.models.ocr import OcrService
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import COST_OCR, BuildContext, Evaluation, ModelSignal, SignalContext, SignalSpecBase
from extproc.signals.ocr_support import load_ocr, read_images

ImageDetector = Literal["pii", "secrets", "jailbreak", "keyword", "mrz", "code"]
DEFAULT_DETECTORS: tuple[ImageDetector, ...] = ("pii", "secrets", "jailbreak", "mrz", "code")


def _wants_passport(pii_kinds: list[str] | None) -> bool:
    return pii_kinds is None or "passport" in pii_kinds


class ImageTextSpec(SignalSpecBase):
    type: Literal["image_text"]
    detectors: list[ImageDetector] = Field(default_factory=lambda: list(DEFAULT_DETECTORS), min_length=1)
    pii_kinds: list[str] | None = None  # None: every kind the detector knows
    secret_kinds: list[str] | None = None
    jailbreak_categories: list[str] | None = None
    keywords: list[str] = Field(default_factory=list)  # whole words/phrases, for the `keyword` detector
    case_sensitive: bool = False
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)  # findings below this are ignored
    code_threshold: float = Field(default=0.6, ge=0.0, le=1.0)  # code_likeness of the OCR text

    @field_validator("pii_kinds")
    @classmethod
    def _pii(cls, v: list[str] | None) -> list[str] | None:
        return _known(v, PII_KINDS, "PII kind")

    @field_validator("secret_kinds")
    @classmethod
    def _secrets(cls, v: list[str] | None) -> list[str] | None:
        return _known(v, SECRET_KINDS, "secret kind")

    @field_validator("jailbreak_categories")
    @classmethod
    def _jailbreak(cls, v: list[str] | None) -> list[str] | None:
        return _known(v, JAILBREAK_CATEGORIES, "jailbreak category")


def _known(values: list[str] | None, known: tuple[str, ...], what: str) -> list[str] | None:
    check_kinds(values, known, what)
    return values


def _keyword_label(word: str) -> str:
    return "keyword:" + word.lower()


class ImageTextSignal(ModelSignal[OcrService]):
    safety: ClassVar[bool] = True
    reads: ClassVar[frozenset[str]] = frozenset({"image"})
    cost: ClassVar[int] = COST_OCR
    implies_image: ClassVar[bool] = True

    def __init__(self, spec: ImageTextSpec, ocr: OcrService | None = None, reason: str | None = None) -> None:
        super().__init__(spec, ocr, reason)
        self.spec: ImageTextSpec = spec
        flags = 0 if spec.case_sensitive else re.IGNORECASE
        self._keywords = [
            (kw, re.compile(r"(?<!\w)" + re.escape(kw).replace(r"\ ", r"\s+") + r"(?!\w)", flags))
            for kw in spec.keywords
        ]

    @classmethod
    def build(cls, spec: ImageTextSpec, ctx: BuildContext) -> ImageTextSignal:
        ocr, reason = load_ocr(ctx)
        return cls(spec, ocr, reason)

    def known_labels(self) -> frozenset[str]:
        labels: set[str] = set()
        d = set(self.spec.detectors)
        if "pii" in d:
            labels |= {"pii", *(f"pii:{k}" for k in (self.spec.pii_kinds or PII_KINDS))}
        if "secrets" in d:
            labels |= {"secrets", *(f"secrets:{k}" for k in (self.spec.secret_kinds or SECRET_KINDS))}
        if "jailbreak" in d:
            cats = self.spec.jailbreak_categories or JAILBREAK_CATEGORIES
            labels |= {"jailbreak", *(f"jailbreak:{c}" for c in cats)}
        if "keyword" in d:
            labels |= {"keyword", *(_keyword_label(k) for k, _ in self._keywords)}
        if "mrz" in d:
            labels |= {"mrz", "mrz_invalid"}
        if "code" in d:
            labels.add("code")
        return frozenset(labels)

    def scan(self, text: str, layout_text: str | None = None) -> tuple[dict[str, float], list[str]]:
        """Labels and redacted evidence for one image's OCR text (pure; used by evaluate and tests)."""
        labels: dict[str, float] = {}
        evidence: list[str] = []
        spec = self.spec
        d = set(spec.detectors)

        def add(family: str, findings: Iterable[Finding]) -> None:
            for f in findings:
                if f.score < spec.min_score:
                    continue
                for label in (family, f"{family}:{f.kind}"):
                    labels[label] = max(labels.get(label, 0.0), f.score)
                evidence.append(f"{family} {f.redacted}")

        if "pii" in d:
            add("pii", find_pii(text, spec.pii_kinds))
        if "secrets" in d:
            add("secrets", find_secrets(text, spec.secret_kinds))
        if "jailbreak" in d:
            # OCR breaks a sentence at every line; read the lines as one paragraph too.
            add("jailbreak", find_jailbreak(" ".join(text.split()), spec.jailbreak_categories))
        if "keyword" in d:
            for word, pattern in self._keywords:
                if pattern.search(text):
                    labels["keyword"] = 1.0
                    labels[_keyword_label(word)] = 1.0
                    evidence.append(f"keyword {word!r}")
        if "mrz" in d:
            for mrz in find_mrz(text):
                label = "mrz" if mrz.valid else "mrz_invalid"
                score = 1.0 if mrz.valid else 0.5
                labels[label] = max(labels.get(label, 0.0), score)
                evidence.append(f"mrz {mrz.redacted()}")
                if mrz.valid and mrz.kind == "passport" and "pii" in d and _wants_passport(spec.pii_kinds):
                    # A valid passport MRZ carries the passport number, however OCR ordered the
                    # lines around the printed "Passport No." box (which the text detector needs).
                    add("pii", [Finding("passport", 0, 0, 0.9, "passport number in the machine-readable zone")])
        if "code" in d:
            score = code_likeness(layout_text if layout_text is not None else text)
            if score >= spec.code_threshold:
                labels["code"] = score
                evidence.append(f"code likeness={score:.2f}")
        return labels, evidence

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        read = await read_images(self.model, self.reason, request, ctx)
        labels: dict[str, float] = {}
        evidence: list[str] = []
        truncated = False
        for item in read:
            found, notes = self.scan(item.result.text, item.result.layout_text())
            for label, score in found.items():
                labels[label] = max(labels.get(label, 0.0), score)
            evidence += [f"image[{item.index}] {note}" for note in notes]
            truncated = truncated or item.result.truncated
        matched = {k: v for k, v in labels.items() if k != "mrz_invalid"}
        if truncated and not matched:
            # Part of an image went unread: "nothing found" would be a guess.
            raise TimeoutError("OCR budget ran out before every text box was read")
        if truncated:
            evidence.append("ocr truncated by its time budget")
        return Evaluation(
            matched=bool(matched),
            score=max(matched.values(), default=0.0),
            labels=labels,
            evidence=tuple(evidence[:16]),
        )
