"""The shipped subject (domain) classifier: which of 14 subjects a text is about, as a cascade.

Stage 1 (inline on every request, ~0.1 ms): one multinomial logistic regression over the 14
subjects that reads two feature blocks at once:
- the prompt-attack classifier's hashed character n-grams (`lexical_features`, the same
  stable hash; the shape block is off: a subject is in the words, not in their case);
- the text's static MiniLM vector (`static_embedding.py`: token vectors distilled from the
  shipped MiniLM, SIF-weighted, L2-normalised), which carries word meaning to words the
  training split never used.
Fitted jointly, the two beat their average (test split: 76% vs 74%; n-grams alone 69%).
When its top probability reaches `confident` the stage decides alone; the threshold was
chosen on the training split's cross-validated scores (`domain_training.py`) so that only a
small share of texts goes further.

Stage 2, embedding (only texts stage 1 is unsure of): a multinomial logistic regression over
the all-MiniLM-L6-v2 sentence embedding (384-d, L2-normalised; `text_embedder.py`), its
probabilities mixed with stage 1's (`head.mix` in meta.json): the two read different things
and their average beats either. Weights with `head.neighbours` in meta.json combine the head
with a vote of the nearest training rows before that mix (`subject_neighbours.py`).

Weights are safetensors plus `meta.json` (feature config, labels, thresholds, corpus hashes,
cross-validated figures); `domain_training.py` writes them. This module needs numpy,
safetensors and tokenizers only (no torch).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from extproc.models.attack_classifier import LexicalConfig, lexical_features
from extproc.models.number_shapes import drop_number_shapes
from extproc.models.registry import ModelUnavailable
from extproc.models.softmax import softmax
from extproc.models.static_embedding import StaticEmbedding, file_digest, load_tokenizer, packaged_tokenizer_path
from extproc.models.subject_neighbours import NeighbourMemory, NeighbourSettings

DEFAULT_WEIGHTS_DIR = Path(__file__).resolve().parent / "weights" / "domain_classifier"
LEXICAL_FILE = "lexical.safetensors"
HEAD_FILE = "embedding_head.safetensors"
STATIC_FILE = "static.safetensors"
NEIGHBOURS_FILE = "neighbours.safetensors"  # optional: stage 2's neighbour vote (`subject_neighbours.py`)
META_FILE = "meta.json"
FORMAT_VERSION = 2
EMBEDDING_DIM = 384

# The 14 MMLU-Pro subject categories (vLLM Semantic Router's names), in the weights' column order.
SUBJECTS: tuple[str, ...] = (
    "biology",
    "business",
    "chemistry",
    "computer science",
    "economics",
    "engineering",
    "health",
    "history",
    "law",
    "math",
    "other",
    "philosophy",
    "physics",
    "psychology",
)

FloatArray = npt.NDArray[np.float32]

# Hex strings, IDs and reference codes carry no subject: "(question 4821)" or a hex ticket
# number must not move a text to math. Stage 1 reads the text with them removed: a word run of at
# least 6 hex digits (with a digit), or any word with 4 or more digits, goes whole. A short number
# does carry evidence ("what is 2 + 2", "17*23?" are arithmetic), so with a placeholder each other
# digit run becomes it ("2 + 2" -> "0 + 0", "10kN" -> "0kN"): every number reads alike, none names
# a subject by its value. Without one (weights before the placeholder) those runs go too ("2x" ->
# "x"). Chemical formulas stay ("H2SO4").
_WORD_WITH_DIGIT = re.compile(r"[0-9A-Za-z_]*[0-9][0-9A-Za-z_]*")
_FORMULA = re.compile(r"(?:[A-Z][a-z]?[0-9]{0,2}){1,8}")
_HEX = re.compile(r"(?:0[xX])?[0-9A-Fa-f]{6,}")
_DIGITS = re.compile(r"[0-9]+")
_ANY_DIGIT = re.compile(r"\d")


NUMBER_PLACEHOLDER = "0"  # what a short number reads as (the weights' features.number_placeholder)


def _neutral_word(word: str, placeholder: str) -> str:
    if _FORMULA.fullmatch(word) and not word.isdigit() and len(word) <= 12:
        return word
    if _HEX.fullmatch(word) or sum(c.isdigit() for c in word) >= 4:
        return " "
    return _DIGITS.sub(placeholder, word)


def neutralise_numbers(text: str, placeholder: str = "", drop_shapes: bool = False) -> str:
    """The text as stage 1 reads it: hex strings and IDs removed, every other digit run replaced
    by `placeholder` ("" removes it too; see above). With `drop_shapes`, dates, times, versions,
    prices, phone numbers, ordinals and list markers go first (`number_shapes`)."""
    # Every pattern of both passes needs a digit (`\d`, any script's, covers _WORD_WITH_DIGIT's
    # [0-9]): a text without one, most texts, is returned as it is for one scan, not the two
    # passes' ~70 us of alternatives tried at every position.
    if _ANY_DIGIT.search(text) is None:
        return text
    if drop_shapes:
        text = drop_number_shapes(text)
    return _WORD_WITH_DIGIT.sub(lambda m: _neutral_word(m.group(0), placeholder), text)


class DomainClassifierError(ModelUnavailable):
    """The domain classifier's weight files are missing, unreadable or inconsistent."""


def _probs(logits: npt.NDArray[Any]) -> FloatArray:
    """One text's probabilities from its logits: the softmax in float64, stored as float32."""
    return np.asarray(softmax(np.asarray(logits, dtype=np.float64)), dtype=np.float32)


def lexical_logits(text: str, config: LexicalConfig, weights: npt.NDArray[Any], bias: FloatArray) -> FloatArray:
    """Stage 1's logits: the text's hashed n-gram values times their weight rows, plus the bias."""
    ids, values = lexical_features(text, config)
    if ids.shape[0] == 0:
        return bias.copy()
    rows = np.asarray(weights[ids], dtype=np.float32)
    return np.asarray(values @ rows + bias, dtype=np.float32)


@dataclass(frozen=True, slots=True)
class DomainVerdict:
    probs: FloatArray  # per label, summing to 1
    stage: str  # "first" or "embedding"

    def top(self, labels: Sequence[str]) -> list[tuple[str, float]]:
        order = np.argsort(-self.probs, kind="stable")
        return [(labels[int(i)], float(self.probs[int(i)])) for i in order]


def _read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    try:
        from safetensors.numpy import load_file
    except ImportError as exc:  # pragma: no cover - safetensors is a dependency
        raise DomainClassifierError("the safetensors package is not installed") from exc
    if not path.is_file():
        raise DomainClassifierError(f"domain classifier weights {path} are missing")
    try:
        return dict(load_file(str(path)))
    except Exception as exc:
        raise DomainClassifierError(f"cannot read {path}: {exc}") from exc


def _tensor(tensors: Mapping[str, npt.NDArray[Any]], name: str, shape: tuple[int, ...], path: Path) -> FloatArray:
    if name not in tensors:
        raise DomainClassifierError(f"{path} has no tensor {name!r}")
    array = tensors[name]
    if tuple(array.shape) != shape:
        raise DomainClassifierError(f"{path}: tensor {name!r} has shape {tuple(array.shape)}, expected {shape}")
    if not np.all(np.isfinite(array)):
        raise DomainClassifierError(f"{path}: tensor {name!r} holds non-finite values")
    return np.asarray(array)


class DomainClassifier:
    """The two stages, with their weights; `first_stage_probs` inline, `embedding_probs` on an embedding."""

    def __init__(
        self,
        labels: Sequence[str],
        config: LexicalConfig,
        lexical_weight: npt.NDArray[Any],
        bias: FloatArray,
        static: StaticEmbedding,
        static_weight: FloatArray,
        head_weight: FloatArray,
        head_bias: FloatArray,
        confident: float,
        meta: Mapping[str, Any] | None = None,
        head_mix: float = 0.5,
        neutralise: bool = False,
        number_placeholder: str = "",
        drop_shapes: bool = False,
        neighbours: NeighbourMemory | None = None,
    ) -> None:
        k = len(labels)
        if k < 2 or len(set(labels)) != k:
            raise DomainClassifierError(f"need two or more distinct labels, got {list(labels)}")
        if lexical_weight.shape != (config.n_features, k) or bias.shape != (k,):
            raise DomainClassifierError("lexical weights do not match the feature config and labels")
        if static_weight.shape != (static.dim, k):
            raise DomainClassifierError(f"static weights {static_weight.shape} do not match the token table and labels")
        if head_weight.shape != (EMBEDDING_DIM, k) or head_bias.shape != (k,):
            raise DomainClassifierError("embedding head weights do not match the labels")
        if not 0.0 <= confident <= 1.0:
            raise DomainClassifierError(f"confident threshold must be in 0..1, got {confident}")
        if not 0.0 <= head_mix <= 1.0:
            raise DomainClassifierError(f"head mix must be in 0..1, got {head_mix}")
        self.labels: tuple[str, ...] = tuple(labels)
        self.config = config
        self.lexical_weight = np.asarray(lexical_weight, dtype=np.float32)  # float16 on disk; gathers faster
        self.bias = np.asarray(bias, dtype=np.float32)
        self.static = static
        self.static_weight = np.asarray(static_weight, dtype=np.float32)
        self.head_weight = np.asarray(head_weight, dtype=np.float32)
        self.head_bias = np.asarray(head_bias, dtype=np.float32)
        self.confident = float(confident)
        self.head_mix = float(head_mix)
        self.neutralise = bool(neutralise)  # stage 1 reads the text without numbers and IDs
        self.number_placeholder = number_placeholder  # what its short numbers read as ("": removed)
        self.drop_shapes = bool(drop_shapes)  # dates, times, versions, prices... go before the placeholder
        self.meta: Mapping[str, Any] = meta or {}
        if neighbours is not None and (neighbours.prior.shape != (k,) or neighbours.input_dim != EMBEDDING_DIM):
            raise DomainClassifierError("neighbour memory does not match the labels and the embedding")
        self.neighbours = neighbours

    @classmethod
    def load(cls, directory: Path | None = None, tokenizer_path: Path | None = None) -> DomainClassifier:
        """The weights in `directory` (default: the packaged ones), tokenised by the MiniLM package's
        tokenizer (or `tokenizer_path`), which must be the one the table was distilled with."""
        directory = Path(directory) if directory is not None else DEFAULT_WEIGHTS_DIR
        meta_path = directory / META_FILE
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise DomainClassifierError(f"domain classifier metadata {meta_path} is missing: {exc}") from exc
        except ValueError as exc:
            raise DomainClassifierError(f"{meta_path} is not valid JSON: {exc}") from exc
        if not isinstance(meta, dict) or meta.get("format_version") != FORMAT_VERSION:
            raise DomainClassifierError(f"{meta_path}: format_version must be {FORMAT_VERSION}")
        try:
            labels = [str(x) for x in meta["labels"]]
            config = LexicalConfig.from_json(meta["lexical"])
            confident = float(meta["thresholds"]["confident"])
            head_mix = float(meta["head"]["mix"])
            tokenizer_digest = str(meta["static"]["tokenizer_sha256"])
            features = meta.get("features", {})
            neutralise = bool(features.get("neutralise_numbers", False))
            number_placeholder = str(features.get("number_placeholder", ""))
            drop_shapes = bool(features.get("drop_number_shapes", False))
            raw_neighbours = meta["head"].get("neighbours")
            vote_settings = NeighbourSettings.from_json(raw_neighbours) if raw_neighbours is not None else None
        except (KeyError, TypeError, ValueError) as exc:
            raise DomainClassifierError(f"{meta_path}: bad or missing field: {exc}") from exc
        tokenizer_path = tokenizer_path or packaged_tokenizer_path()
        if not tokenizer_path.is_file() or file_digest(tokenizer_path) != tokenizer_digest:
            raise DomainClassifierError(
                f"{tokenizer_path} is not the tokenizer the token table was distilled with "
                f"(sha256 {tokenizer_digest[:12]})"
            )
        k = len(labels)
        lex_path, head_path, static_path = directory / LEXICAL_FILE, directory / HEAD_FILE, directory / STATIC_FILE
        lex = _read_safetensors(lex_path)
        head = _read_safetensors(head_path)
        static_tensors = _read_safetensors(static_path)
        static = StaticEmbedding.from_tensors(static_tensors, load_tokenizer(tokenizer_path), str(static_path))
        head_tensors = (
            _tensor(head, "weight", (EMBEDDING_DIM, k), head_path).astype(np.float32),
            _tensor(head, "bias", (k,), head_path).astype(np.float32),
        )
        neighbours = None
        if vote_settings is not None:
            memory_path = directory / NEIGHBOURS_FILE
            try:
                neighbours = NeighbourMemory.from_tensors(_read_safetensors(memory_path), k, vote_settings)
            except (KeyError, ValueError) as exc:
                raise DomainClassifierError(f"{memory_path}: bad neighbour memory: {exc}") from exc
        return cls(
            labels,
            config,
            _tensor(lex, "weight", (config.n_features, k), lex_path),
            _tensor(lex, "bias", (k,), lex_path).astype(np.float32),
            static,
            _tensor(static_tensors, "weight", (static.dim, k), static_path).astype(np.float32),
            *head_tensors,
            confident,
            meta,
            head_mix,
            neutralise,
            number_placeholder,
            drop_shapes,
            neighbours,
        )

    def first_stage_logits(self, text: str) -> FloatArray:
        if self.neutralise:
            text = neutralise_numbers(text, self.number_placeholder, self.drop_shapes)
        lexical = lexical_logits(text, self.config, self.lexical_weight, self.bias)
        return np.asarray(lexical + self.static.vector(text) @ self.static_weight, dtype=np.float32)

    def first_stage_probs(self, text: str) -> FloatArray:
        return _probs(self.first_stage_logits(text))

    def decides(self, first: FloatArray) -> bool:
        """Is stage 1 sure enough to decide alone?"""
        return float(first.max()) >= self.confident

    def embedding_probs(self, embedding: npt.ArrayLike, first: FloatArray) -> FloatArray:
        """Stage 2: the head's probabilities on the embedding, mixed with stage 1's."""
        x = np.asarray(embedding, dtype=np.float32).reshape(-1)
        logits = x @ self.head_weight + self.head_bias
        head = _probs(logits) if self.neighbours is None else self.neighbours.probs(logits[None, :], x[None, :])[0]
        mixed = self.head_mix * head + (1.0 - self.head_mix) * np.asarray(first, dtype=np.float32)
        return np.asarray(mixed, dtype=np.float32)

    def classify(self, text: str, embedding: npt.ArrayLike | None = None) -> DomainVerdict:
        """The cascade on one text; without `embedding`, stage 1's answer even when unsure."""
        first = self.first_stage_probs(text)
        if self.decides(first) or embedding is None:
            return DomainVerdict(first, "first")
        return DomainVerdict(self.embedding_probs(embedding, first), "embedding")
