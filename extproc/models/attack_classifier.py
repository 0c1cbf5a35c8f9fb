"""A learned prompt-attack (jailbreak / prompt-injection) classifier: a two-stage cascade.

Stage 1, lexical (inline on every request): the text is lower-cased, its
whitespace collapsed, long texts keep a head and a tail; every character n-gram (n from
`ngram_min` to `ngram_max`, over Unicode code points, so Chinese, Hindi or Korean text is
covered like English) is hashed into a fixed number of buckets; bucket counts become
sublinear term frequencies (1 + ln tf), L2-normalised. Beside them, in a block of their
own, n-grams of the text's *shape* (case kept; letters, digits and other scripts folded to
one symbol each, punctuation kept: "ggplotCharField @{" -> "aaaaaaAaaaAaaaa @{"), which see
the mixed-case, bracket-heavy fragments of optimised adversarial suffixes that lower-cased
character n-grams read as ordinary words; that block is normalised to `shape_weight`. A
logistic regression over both blocks gives the probability `p` that the text is an attack.

The hash is stable across processes and machines (no salted `hash()`): for an n-gram of
code points c_0 .. c_{n-1}, h = sum_k (c_k + 1) * M^(n-1-k) mod 2^64, then
x = h + n * S, x ^= x >> 32, x *= F (mod 2^64) and the bucket is the top `bits` bits of x.
`hashed_ngrams`, `hashed_shape_ngrams` and `reference_lexical_features` (in `lexical_features.py`,
with the fast path; importable from here too) spell this out one
order at a time; `lexical_features` computes the same ids and float32 values, bit for bit, in
about half the numpy calls (every order of both blocks at once from prefix sums), since on a
short prompt nearly all of the cost is numpy's per-call overhead: ~20 us a prompt. Served,
the stage runs in C (`_lexical_kernel.c`, built at install when a compiler is there; ~2.5 us a
prompt): the same ids, its logit within KERNEL_TOLERANCE of the numpy path's
(`check_kernel_parity`), which serves when the kernel is not built and for training.

Stage 2, embedding (only when `low <= p < sure`): a small MLP over the 384-d
all-MiniLM-L6-v2 sentence embedding (see `text_embedder.py`) plus the lexical logit.
Below `low` the text is confidently benign, at or above its sure threshold (`short_high` or
`long_high` by its length, at least `high`) confidently an attack; in between the head's
probability is compared with `decision`.

Weights are safetensors files plus `meta.json` (feature config, thresholds, corpus hash,
cross-validated training metrics); `attack_training.py` writes them. This module needs
numpy and safetensors only (no torch).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

# The stage-1 features live in `lexical_features`; their names stay importable from here.
from extproc.models.lexical_features import LexicalConfig as LexicalConfig
from extproc.models.lexical_features import bounded_pair, sublinear_table
from extproc.models.lexical_features import hashed_ngrams as hashed_ngrams
from extproc.models.lexical_features import hashed_shape_ngrams as hashed_shape_ngrams
from extproc.models.lexical_features import lexical_features as lexical_features
from extproc.models.lexical_features import normalise_text as normalise_text
from extproc.models.lexical_features import reference_lexical_features as reference_lexical_features
from extproc.models.lexical_features import shape_codes as shape_codes
from extproc.models.registry import ModelUnavailable

_kernel_module: ModuleType | None
try:  # the lexical logit in C (`_lexical_kernel.c`), built at install when a C compiler is there
    from extproc.models import _lexical_kernel

    _kernel_module = _lexical_kernel
except ImportError:  # pragma: no cover - exercised by installs without a compiler
    _kernel_module = None

LexicalBackend = Literal["c", "numpy"]
# _lexical_kernel.lexical_logit's signature: (lowered, cased, weights, sublinear, bias, bits,
# ngram_min, ngram_max, shape_bits, shape_ngram_min, shape_ngram_max, shape_weight) -> logit.
KernelFunction = Callable[..., float]
# The kernel sums in double, numpy in float32: logits agree to ~3e-6 on the corpus.
KERNEL_TOLERANCE = 1e-5

DEFAULT_WEIGHTS_DIR = Path(__file__).resolve().parent / "weights" / "attack_classifier"
LEXICAL_FILE = "lexical.safetensors"
HEAD_FILE = "embedding_head.safetensors"
META_FILE = "meta.json"
# 2: the lexical weights carry a shape n-gram block after the character block; 3: several outputs
# (`attack`, `harmful`), each with its own lexical weights, head and thresholds, named by prefix.
FORMAT_VERSION = 3
DEFAULT_OUTPUT = "attack"
EMBEDDING_DIM = 384

FloatArray = npt.NDArray[np.float32]


class AttackClassifierError(ModelUnavailable):
    """The attack classifier's weight files are missing, unreadable or inconsistent."""


HEAD_SCRIPTS = ("any", "latin")
_LATIN_END = 0x250  # Basic Latin to Latin Extended-B: the letters MiniLM's vocabulary reads


# Runs of characters outside Latin, and of those inside it: `mostly_latin` counts the letters of
# each with str.isalpha mapped in C, not in a Python loop per character (it runs on every view of
# every non-ASCII text: ~30 us a text by the loop).
_OUTSIDE_LATIN = re.compile(r"[^\x00-\u024f]+")  # \u024f: _LATIN_END - 1
_INSIDE_LATIN = re.compile(r"[\x00-\u024f]+")


def mostly_latin(text: str) -> bool:
    """True when at least half of the text's letters are Latin (ASCII text always is).

    Uncached: a caller that needs the answer for several outputs or checks of one text computes it
    once and passes it on (`latin=` of `head_reads`, `sure_for`, `uses_script_model`)."""
    if text.isascii():
        return True
    other = sum(map(str.isalpha, "".join(_OUTSIDE_LATIN.findall(text))))
    return other == 0 or sum(map(str.isalpha, "".join(_INSIDE_LATIN.findall(text)))) >= other


def mostly_latin_by_letter(text: str) -> bool:
    """`mostly_latin` one character at a time: the reference its tests hold it to."""
    letters = latin = 0
    for ch in text:
        if ch.isalpha():
            letters += 1
            latin += ord(ch) < _LATIN_END
    return latin * 2 >= letters


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def probability_to_logit(p: float, clip: float) -> float:
    """The logit of `p`, clipped to [-clip, clip] (p of 0 or 1 gives the clip value)."""
    if p <= 0.0:
        return -clip
    if p >= 1.0:
        return clip
    return max(-clip, min(clip, math.log(p) - math.log1p(-p)))


@dataclass(frozen=True, slots=True)
class Thresholds:
    low: float  # lexical p below it: benign, no embedding
    high: float  # lexical p at or above it: attack, no embedding
    decision: float  # embedding-stage probability at or above it: attack
    # A text shorter than short_chars carries little evidence: the lexical stage alone decides it
    # only at short_high (>= high); between high and short_high the embedding stage confirms.
    short_chars: int = 0
    short_high: float | None = None  # None: high
    # A longer text is decided by the lexical stage alone only at long_high (>= high; None: high):
    # n-grams that read as an attack in the corpus also fill ordinary long requests (an essay
    # plan on a war, a "behave like a shell" setup), so between high and long_high the embedding
    # stage confirms too.
    long_high: float | None = None
    # Which texts the embedding stage may judge: "any", or "latin" (texts mostly in Latin letters):
    # all-MiniLM-L6-v2 reads English; on other scripts its embedding is noise, and a head trained on
    # few such texts can turn "write a thank-you letter to my teacher" in Chinese into a refusal.
    # A text it may not judge is decided by the lexical stage alone (at the sure threshold).
    head_scripts: str = "any"
    # The sure threshold of a text the embedding stage may not read (None: as any other text): the
    # lexical stage alone decides those, so their threshold is chosen on their own benign texts
    # (out of fold, other scripts than Latin), lower than a Latin text's where that pays. Weights with
    # a lexical model of their own for those texts (`OUTPUT.script_weight`) score them with it.
    script_high: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.low <= self.high <= 1.0 or not 0.0 <= self.decision <= 1.0:
            raise ValueError(f"thresholds must satisfy 0 <= low <= high <= 1 and 0 <= decision <= 1, got {self}")
        if self.short_chars < 0:
            raise ValueError(f"short_chars must be >= 0, got {self.short_chars}")
        if self.short_high is not None and not self.high <= self.short_high <= 1.0:
            raise ValueError(f"short_high must lie between high and 1, got {self}")
        if self.long_high is not None and not self.high <= self.long_high <= 1.0:
            raise ValueError(f"long_high must lie between high and 1, got {self}")
        if self.script_high is not None and not 0.0 < self.script_high <= 1.0:
            raise ValueError(f"script_high must lie in (0, 1], got {self}")
        if self.head_scripts not in HEAD_SCRIPTS:
            raise ValueError(f"head_scripts must be one of {', '.join(HEAD_SCRIPTS)}, got {self.head_scripts!r}")

    def head_reads(self, text: str, latin: bool | None = None) -> bool:
        """May the embedding stage judge `text`? (See `head_scripts`.) `latin`: `mostly_latin(text)`
        where the caller has it already."""
        if self.head_scripts == "any":
            return True
        return mostly_latin(text) if latin is None else latin

    def sure(self, length: int) -> float:
        """The lexical probability at or above which a text of `length` characters is decided
        without the embedding stage."""
        if length < self.short_chars:
            return self.high if self.short_high is None else self.short_high
        return self.high if self.long_high is None else self.long_high

    def sure_for(self, text: str, override: float | None = None, latin: bool | None = None) -> float:
        """The sure threshold of `text`: `script_high` when the embedding stage may not read it,
        else `override` (a policy's threshold) when given, else `sure(len(text))`. A policy's
        threshold is a bar for the texts the head reads: the others' bar is chosen on their own
        benign texts (and scored by their own lexical model where the weights carry one).
        `latin`: `mostly_latin(text)` where the caller has it already."""
        if self.script_high is not None and not self.head_reads(text, latin):
            return self.script_high
        return self.sure(len(text)) if override is None else override


@dataclass(frozen=True, slots=True)
class AttackVerdict:
    """The cascade's answer for one text. `is_attack` is None when the embedding stage
    was needed but no embedding function was given."""

    is_attack: bool | None
    stage: Literal["lexical", "embedding"]
    lexical: float  # the lexical probability
    score: float  # the probability the decision used (lexical or embedding stage)


@dataclass(frozen=True, slots=True)
class HeadParams:
    """A one-hidden-layer MLP: sigmoid(w2 . relu(w1 @ [embedding, z] + b1) + b2), where z is
    the clipped lexical logit divided by `logit_scale`."""

    w1: FloatArray  # (hidden, 385)
    b1: FloatArray  # (hidden,)
    w2: FloatArray  # (hidden,)
    b2: float
    logit_clip: float
    logit_scale: float


def _read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    if not path.is_file():
        raise AttackClassifierError(f"attack classifier: missing weight file {path}")
    try:
        from safetensors.numpy import load_file

        tensors: dict[str, npt.NDArray[Any]] = load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise AttackClassifierError(f"attack classifier: cannot read {path}: {exc}") from exc
    return tensors


def _tensor(tensors: Mapping[str, npt.NDArray[Any]], name: str, shape: tuple[int, ...], path: Path) -> FloatArray:
    if name not in tensors:
        raise AttackClassifierError(f"attack classifier: {path.name} has no tensor {name!r}")
    arr = tensors[name]
    if arr.dtype not in (np.float16, np.float32):
        raise AttackClassifierError(f"attack classifier: {path.name}:{name} has dtype {arr.dtype}, want float16/32")
    if tuple(arr.shape) != shape:
        raise AttackClassifierError(
            f"attack classifier: {path.name}:{name} has shape {tuple(arr.shape)}, expected {shape}"
        )
    out = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(out).all():
        raise AttackClassifierError(f"attack classifier: {path.name}:{name} holds non-finite values")
    return out


def _meta_float(section: Mapping[str, Any], key: str, where: str) -> float:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AttackClassifierError(f"attack classifier: meta.json {where}.{key} must be a number, got {value!r}")
    return float(value)


def _meta_section(meta: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    section = meta.get(key)
    if not isinstance(section, dict):
        raise AttackClassifierError(f"attack classifier: meta.json lacks the {key!r} object")
    return section


def read_meta(directory: Path) -> dict[str, Any]:
    """The weights folder's meta.json, checked for its format version."""
    meta_path = directory / META_FILE
    if not meta_path.is_file():
        raise AttackClassifierError(f"attack classifier: missing {meta_path}")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AttackClassifierError(f"attack classifier: cannot read {meta_path}: {exc}") from exc
    if not isinstance(meta, dict):
        raise AttackClassifierError(f"attack classifier: {meta_path} is not a JSON object")
    if meta.get("format_version") != FORMAT_VERSION:
        raise AttackClassifierError(
            f"attack classifier: {meta_path} format_version {meta.get('format_version')!r}, "
            f"this code reads {FORMAT_VERSION}"
        )
    return meta


def output_names(meta: Mapping[str, Any]) -> list[str]:
    """The outputs a weights folder holds, in order (the first is the attack output)."""
    outputs = meta.get("outputs")
    if not isinstance(outputs, list) or not outputs or not all(isinstance(o, str) and o for o in outputs):
        raise AttackClassifierError("attack classifier: meta.json outputs must be a non-empty list of names")
    return list(outputs)


class AttackClassifier:
    """The loaded cascade: `lexical_score`, `needs_embedding`, `embedding_score`, `classify`."""

    def __init__(
        self,
        config: LexicalConfig,
        lexical_weights: FloatArray,
        lexical_bias: float,
        head: HeadParams,
        thresholds: Thresholds,
        meta: Mapping[str, Any] | None = None,
        backend: LexicalBackend | None = None,
        label: str = DEFAULT_OUTPUT,
        script_lexical: tuple[FloatArray, float] | None = None,
    ) -> None:
        if lexical_weights.shape != (config.n_features,):
            raise ValueError(f"lexical weights shape {lexical_weights.shape} != ({config.n_features},)")
        if script_lexical is not None:
            if script_lexical[0].shape != (config.n_features,):
                raise ValueError(f"script lexical weights shape {script_lexical[0].shape} != ({config.n_features},)")
            if thresholds.head_scripts == "any" or thresholds.script_high is None:
                raise ValueError("script lexical weights need head_scripts 'latin' and a script_high threshold")
        self.config = config
        self.lexical_weights = np.ascontiguousarray(lexical_weights, dtype=np.float32)
        self.lexical_bias = float(lexical_bias)
        self.head = head
        self.thresholds = thresholds
        self.label = label  # the output this instance scores (`attack`, `harmful`)
        self.meta: Mapping[str, Any] = meta or {}
        if backend == "c" and _kernel_module is None:
            raise AttackClassifierError("attack classifier: the C lexical kernel is not built in this install")
        # The stage-1 path: the C kernel when built (default), else numpy. Both give the same
        # feature ids; the logits agree to ~1e-6 (the kernel sums in double, numpy in float32).
        # The kernel's arguments are fixed here: the weights and config are not changed later.
        # (Only the count table: the numpy path's plan is built on its first use, if any.)
        self.backend: LexicalBackend = backend or ("c" if _kernel_module is not None else "numpy")
        self._kernel_args = (
            self.lexical_weights,
            sublinear_table(config),
            self.lexical_bias,
            config.bits,
            config.ngram_min,
            config.ngram_max,
            config.shape_bits,
            config.shape_ngram_min,
            config.shape_ngram_max,
            config.shape_weight,
        )
        # The lexical model of the texts the embedding stage may not read (other scripts than
        # Latin), decided alone at `script_high`; None: the one model scores every text.
        self._script_kernel_args: tuple[Any, ...] | None = None
        self.script_weights: FloatArray | None = None
        self.script_bias = 0.0
        if script_lexical is not None:
            self.script_weights = np.ascontiguousarray(script_lexical[0], dtype=np.float32)
            self.script_bias = float(script_lexical[1])
            table = self._kernel_args[1]
            self._script_kernel_args = (self.script_weights, table, self.script_bias, *self._kernel_args[3:])

    def uses_script_model(self, text: str, latin: bool | None = None) -> bool:
        """Is `text` scored by the other scripts' lexical model (one the embedding stage may not read)?
        `latin`: `mostly_latin(text)` where the caller has it already."""
        return self.script_weights is not None and not self.thresholds.head_reads(text, latin)

    @property
    def reads_script(self) -> bool:
        """Does a text's script (`mostly_latin`) change how this output scores or decides it?"""
        return self.thresholds.head_scripts != "any"

    # --- loading ---------------------------------------------------------------------------

    @classmethod
    def load(
        cls, directory: Path | None = None, backend: LexicalBackend | None = None, output: str = DEFAULT_OUTPUT
    ) -> AttackClassifier:
        """Load one output (default `attack`) from `directory` (default: the weights shipped in
        the package); `backend` forces the stage-1 path (default: C when built)."""
        directory = Path(directory) if directory is not None else DEFAULT_WEIGHTS_DIR
        meta = read_meta(directory)
        if output not in output_names(meta):
            raise AttackClassifierError(
                f"attack classifier: {directory / META_FILE} has no output {output!r}; outputs: {output_names(meta)}"
            )
        try:
            config = LexicalConfig.from_json(_meta_section(meta, "lexical"))
        except ValueError as exc:
            raise AttackClassifierError(f"attack classifier: meta.json lexical: {exc}") from exc

        lex_path = directory / LEXICAL_FILE
        lex = _read_safetensors(lex_path)
        weights = _tensor(lex, f"{output}.weight", (config.n_features,), lex_path)
        bias = _tensor(lex, f"{output}.bias", (1,), lex_path)
        script_lexical = None
        if f"{output}.script_weight" in lex:
            script_lexical = (
                _tensor(lex, f"{output}.script_weight", (config.n_features,), lex_path),
                float(_tensor(lex, f"{output}.script_bias", (1,), lex_path)[0]),
            )

        head_meta = _meta_section(meta, "head")
        hidden = head_meta.get("hidden")
        if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 1:
            raise AttackClassifierError(
                f"attack classifier: meta.json head.hidden must be a positive int, got {hidden!r}"
            )
        head_path = directory / HEAD_FILE
        ht = _read_safetensors(head_path)
        head = HeadParams(
            w1=_tensor(ht, f"{output}.w1", (hidden, EMBEDDING_DIM + 1), head_path),
            b1=_tensor(ht, f"{output}.b1", (hidden,), head_path),
            w2=_tensor(ht, f"{output}.w2", (hidden,), head_path),
            b2=float(_tensor(ht, f"{output}.b2", (1,), head_path)[0]),
            logit_clip=_meta_float(head_meta, "logit_clip", "head"),
            logit_scale=_meta_float(head_meta, "logit_scale", "head"),
        )
        if head.logit_clip <= 0 or head.logit_scale <= 0:
            raise AttackClassifierError("attack classifier: meta.json head.logit_clip/logit_scale must be > 0")
        all_thresholds = _meta_section(meta, "thresholds")
        where = f"thresholds.{output}"
        th = all_thresholds.get(output)
        if not isinstance(th, dict):
            raise AttackClassifierError(f"attack classifier: meta.json lacks the {where!r} object")
        short_chars = th.get("short_chars", 0)
        if not isinstance(short_chars, int) or isinstance(short_chars, bool):
            raise AttackClassifierError(f"attack classifier: meta.json {where}.short_chars must be an integer")
        try:
            thresholds = Thresholds(
                low=_meta_float(th, "low", where),
                high=_meta_float(th, "high", where),
                decision=_meta_float(th, "decision", where),
                short_chars=short_chars,
                short_high=_meta_float(th, "short_high", where) if "short_high" in th else None,
                long_high=_meta_float(th, "long_high", where) if "long_high" in th else None,
                head_scripts=str(th.get("head_scripts", "any")),
                script_high=_meta_float(th, "script_high", where) if "script_high" in th else None,
            )
        except ValueError as exc:
            raise AttackClassifierError(f"attack classifier: meta.json: {exc}") from exc
        try:
            return cls(config, weights, float(bias[0]), head, thresholds, meta, backend, output, script_lexical)
        except ValueError as exc:
            raise AttackClassifierError(f"attack classifier: {output}: {exc}") from exc

    # --- stage 1 ---------------------------------------------------------------------------

    def lexical_logit(self, text: str) -> float:
        if self.backend == "c":
            return self.kernel_lexical_logit(text)
        return self.numpy_lexical_logit(text)

    def kernel_lexical_logit(self, text: str, kernel: KernelFunction | None = None) -> float:
        """The stage-1 logit on the C kernel (or on `kernel`, a test's drifted stand-in)."""
        kernel = kernel or (_kernel_module.lexical_logit if _kernel_module is not None else None)
        if kernel is None:
            raise AttackClassifierError("attack classifier: the C lexical kernel is not built in this install")
        lowered, cased = bounded_pair(text, self.config)
        return self.kernel_logit_of_bounded(lowered, cased, self.uses_script_model(text), kernel)

    def kernel_logit_of_bounded(
        self, lowered: str | None, cased: str, other_script: bool = False, kernel: KernelFunction | None = None
    ) -> float:
        """The C kernel's logit of a text already cut by `_bounded_pair` (shared by outputs);
        `other_script`: by the other scripts' model (`uses_script_model` of the whole text)."""
        if kernel is None:
            assert _kernel_module is not None
            kernel = _kernel_module.lexical_logit
        args = self._script_kernel_args if other_script and self._script_kernel_args is not None else self._kernel_args
        return float(kernel(lowered, cased, *args))

    def numpy_lexical_logit(self, text: str) -> float:
        """The stage-1 logit on the numpy path (`lexical_features`): the C kernel's reference."""
        weights, bias = self.lexical_weights, self.lexical_bias
        if self.script_weights is not None and self.uses_script_model(text):
            weights, bias = self.script_weights, self.script_bias
        ids, values = lexical_features(text, self.config)
        if ids.shape[0] == 0:
            return bias
        return bias + float(values @ weights[ids])

    def lexical_score(self, text: str) -> float:
        """Probability (0..1) that `text` is a prompt attack, from the lexical stage alone."""
        return _sigmoid(self.lexical_logit(text))

    def needs_embedding(self, lexical: float, length: int | None = None) -> bool:
        """True when the lexical probability lies between `low` and the sure threshold of a text
        of `length` characters (`short_high` or `long_high` by its length; None: `high`)."""
        sure = self.thresholds.high if length is None else self.thresholds.sure(length)
        return self.thresholds.low <= lexical < sure

    # --- stage 2 ---------------------------------------------------------------------------

    def embedding_score(self, embedding: npt.ArrayLike, lexical: float) -> float:
        """Probability that the text is an attack, from its MiniLM embedding (384-d,
        L2-normalised) and its lexical probability."""
        emb = np.asarray(embedding, dtype=np.float32).reshape(-1)
        if emb.shape[0] != EMBEDDING_DIM:
            raise ValueError(f"embedding must have {EMBEDDING_DIM} values, got {emb.shape[0]}")
        h = self.head
        z = probability_to_logit(lexical, h.logit_clip) / h.logit_scale
        hidden = h.w1[:, :EMBEDDING_DIM] @ emb + h.w1[:, EMBEDDING_DIM] * np.float32(z) + h.b1
        np.maximum(hidden, 0.0, out=hidden)
        return _sigmoid(float(h.w2 @ hidden) + h.b2)

    # --- the cascade -----------------------------------------------------------------------

    def classify(self, text: str, embed: Callable[[str], npt.ArrayLike] | None = None) -> AttackVerdict:
        """Run the cascade on `text`; `embed` maps a text to its MiniLM embedding and is
        called only when the lexical stage is not confident."""
        p = self.lexical_score(text)
        if p < self.thresholds.low:
            return AttackVerdict(False, "lexical", p, p)
        latin = mostly_latin(text) if self.reads_script else True
        if p >= self.thresholds.sure_for(text, latin=latin):
            return AttackVerdict(True, "lexical", p, p)
        if not self.thresholds.head_reads(text, latin):
            return AttackVerdict(False, "lexical", p, p)
        if embed is None:
            return AttackVerdict(None, "embedding", p, p)
        s = self.embedding_score(embed(text), p)
        return AttackVerdict(s >= self.thresholds.decision, "embedding", p, s)


def lexical_scores(classifiers: Sequence[AttackClassifier], text: str, latin: bool | None = None) -> list[float]:
    """Each classifier's lexical probability of `text`. Outputs of one weights folder share their
    feature config: on the C kernel the text is normalised and cut once for all of them, and its
    script counted once (`latin`: `mostly_latin(text)` where the caller has it already)."""
    if not classifiers:
        return []
    first = classifiers[0]
    if first.backend != "c" or any(c.config != first.config or c.backend != "c" for c in classifiers[1:]):
        return [c.lexical_score(text) for c in classifiers]
    lowered, cased = bounded_pair(text, first.config)
    if latin is None:
        latin = mostly_latin(text) if any(c.reads_script for c in classifiers) else True
    return [_sigmoid(c.kernel_logit_of_bounded(lowered, cased, c.uses_script_model(text, latin))) for c in classifiers]


def load_outputs(directory: Path | None = None, backend: LexicalBackend | None = None) -> dict[str, AttackClassifier]:
    """Every output of a weights folder (the shipped one by default), by name, in meta.json order."""
    directory = Path(directory) if directory is not None else DEFAULT_WEIGHTS_DIR
    return {name: AttackClassifier.load(directory, backend, name) for name in output_names(read_meta(directory))}


def check_kernel_parity(
    classifier: AttackClassifier, texts: Iterable[str], kernel: KernelFunction | None = None
) -> tuple[float, str | None]:
    """The largest |C kernel - numpy| lexical logit over `texts`, and the text it was found on
    (None when `texts` is empty); `kernel` stands in for the built one (a test's drifted kernel).
    Above KERNEL_TOLERANCE the two paths disagree on some feature, not on rounding."""
    worst, where = 0.0, None
    for text in texts:
        gap = abs(classifier.kernel_lexical_logit(text, kernel) - classifier.numpy_lexical_logit(text))
        if where is None or gap > worst:
            worst, where = gap, text
    return worst, where
