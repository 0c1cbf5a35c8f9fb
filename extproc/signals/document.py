"""document: what kind of document an image is, from its OCR text and layout.

Labels: `identity_document` (a valid machine-readable zone, or several identity-page
field names), `form` (label: value lines, signature lines, form vocabulary), `receipt`
(prices and totals), `code` (code-likeness of the text with its indentation), `text` (a
page of prose that is none of the above) and `photo` (little or no text). Each image gets
a score per label; the request's score per label is its best image's. Labels below
`min_score` are left out, so a rule leaf on a label means "at least min_score".
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field

from extproc.detectors.code import code_likeness
from extproc.detectors.mrz import find_mrz
from extproc.models.ocr import OcrResult, OcrService
from extproc.protocol.request import RoutingRequest
from extproc.signals.base import COST_OCR, BuildContext, Evaluation, ModelSignal, SignalContext, SignalSpecBase
from extproc.signals.ocr_support import load_ocr, read_images

DocumentLabel = Literal["identity_document", "form", "receipt", "code", "text", "photo"]
DOCUMENT_LABELS: tuple[DocumentLabel, ...] = ("identity_document", "form", "receipt", "code", "text", "photo")

_ID_CUES = re.compile(
    r"passport|passeport|pasaporte|reisepass|identity card|identity document|carte d'identit|"
    r"surname|given names?|nationality|nationalit|date of birth|place of birth|date of expiry|date of issue|"
    r"driver'?s? licen[cs]e|driving licen[cs]e|personal no|document no|authority|sex\b",
    re.IGNORECASE,
)
_RECEIPT_CUES = re.compile(
    r"\b(?:sub ?total|total|tax|vat|cash|change|receipt|invoice|qty|amount due|balance|visa|mastercard|tip)\b",
    re.IGNORECASE,
)
_PRICE = re.compile(r"(?<![\d.])[$€£]?\d{1,5}[.,]\d{2}(?![\d])")
_FORM_CUES = re.compile(
    r"\bform\b|signature|applicant|please (?:print|complete|fill)|\bdate:|\bname:|address:|"
    r"reason for|\bcheck (?:one|all)|_{4,}|☐|☑",
    re.IGNORECASE,
)
_LABEL_VALUE = re.compile(r"^\s*[A-Za-z][A-Za-z /'()#.-]{1,30}:\s*\S")


def classify(result: OcrResult) -> dict[str, float]:
    """Scores 0..1 for every document label of one image's OCR result (pure)."""
    text = result.text
    chars = result.char_count
    lines = [ln.text for ln in result.lines if ln.text.strip()]
    n = max(1, len(lines))
    scores: dict[str, float] = dict.fromkeys(DOCUMENT_LABELS, 0.0)
    if chars < 12:
        scores["photo"] = 1.0 - chars / 24
        return scores
    scores["photo"] = max(0.0, 0.5 - chars / 120)

    mrz = find_mrz(text)
    id_cues = {m.group(0).lower() for m in _ID_CUES.finditer(text)}
    id_score = min(0.9, 0.25 * len(id_cues))
    if any(m.valid for m in mrz):
        id_score = 0.99
    elif mrz:
        id_score = max(id_score, 0.8)  # MRZ-shaped, but a check digit fails: still an identity page
    scores["identity_document"] = id_score

    prices = len(_PRICE.findall(text))
    receipt_cues = {m.group(0).lower() for m in _RECEIPT_CUES.finditer(text)}
    scores["receipt"] = min(1.0, 0.08 * min(prices, 6) + 0.2 * len(receipt_cues)) if prices >= 2 else 0.0

    label_lines = sum(1 for ln in lines if _LABEL_VALUE.match(ln))
    form_cues = {m.group(0).lower() for m in _FORM_CUES.finditer(text)}
    scores["form"] = min(1.0, 0.45 * (label_lines / n) + 0.15 * len(form_cues) + (0.15 if label_lines >= 3 else 0.0))
    if id_score >= 0.8:
        scores["form"] = min(scores["form"], 0.4)  # an identity page is labelled as such, not as a form

    scores["code"] = code_likeness(result.layout_text())

    words = len(text.split())
    prose = min(1.0, words / 80)
    best_other = max(scores[k] for k in ("identity_document", "form", "receipt", "code"))
    scores["text"] = prose * (1.0 - best_other) if words >= 20 else 0.0
    return scores


class DocumentSpec(SignalSpecBase):
    type: Literal["document"]
    labels: list[DocumentLabel] = Field(
        default_factory=lambda: list[DocumentLabel](["identity_document", "form", "receipt", "code"]), min_length=1
    )  # which labels count as a match
    min_score: float = Field(default=0.5, ge=0.0, le=1.0)


class DocumentSignal(ModelSignal[OcrService]):
    reads: ClassVar[frozenset[str]] = frozenset({"image"})
    cost: ClassVar[int] = COST_OCR
    implies_image: ClassVar[bool] = True

    def __init__(self, spec: DocumentSpec, ocr: OcrService | None = None, reason: str | None = None) -> None:
        super().__init__(spec, ocr, reason)
        self.spec: DocumentSpec = spec

    @classmethod
    def build(cls, spec: DocumentSpec, ctx: BuildContext) -> DocumentSignal:
        ocr, reason = load_ocr(ctx)
        return cls(spec, ocr, reason)

    def known_labels(self) -> frozenset[str]:
        return frozenset(DOCUMENT_LABELS)

    async def evaluate(self, request: RoutingRequest, ctx: SignalContext) -> Evaluation:
        read = await read_images(self.model, self.reason, request, ctx)
        labels: dict[str, float] = {}
        evidence: list[str] = []
        for item in read:
            scores = classify(item.result)
            kept = {k: v for k, v in scores.items() if v >= self.spec.min_score}
            for label, score in kept.items():
                labels[label] = max(labels.get(label, 0.0), score)
            top = max(scores, key=lambda k: scores[k])
            note = " truncated" if item.result.truncated else ""
            evidence.append(f"image[{item.index}] {top}={scores[top]:.2f} chars={item.result.char_count}{note}")
        if any(item.result.truncated for item in read) and not labels:
            raise TimeoutError("OCR budget ran out before every text box was read")
        wanted = {k: v for k, v in labels.items() if k in self.spec.labels}
        return Evaluation(
            matched=bool(wanted),
            score=max(wanted.values(), default=0.0),
            labels=labels,
            evidence=tuple(evidence),
        )
