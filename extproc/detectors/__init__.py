"""Pure text detectors: PII, secrets and jailbreak phrasing.

They depend on nothing but the standard library, so the text signals and the OCR path
(text read out of images) share them. Every pattern is precompiled at import, every
quantifier that can span text is bounded, and cheap substring gates skip whole pattern
families when their anchors are absent, so a typical chat message costs microseconds.
"""

from extproc.detectors.common import Finding
from extproc.detectors.jailbreak import JAILBREAK_CATEGORIES, find_jailbreak
from extproc.detectors.pii import PII_KINDS, find_pii
from extproc.detectors.secrets import SECRET_KINDS, find_secrets

__all__ = [
    "JAILBREAK_CATEGORIES",
    "PII_KINDS",
    "SECRET_KINDS",
    "Finding",
    "find_jailbreak",
    "find_pii",
    "find_secrets",
]
