"""The prompt-attack classifier's stage-1 features: hashed character and shape n-grams.

The text is lower-cased, its whitespace collapsed, long texts keep a head and a tail; every
character n-gram (over Unicode code points) is hashed into `2**bits` buckets as sublinear term
frequencies, L2-normalised, with a block of shape n-grams beside them (see `attack_classifier`
for the hash and why the shape block). `reference_lexical_features` spells the computation out
one order at a time; `lexical_features` is the fast path, bit for bit the same. The domain
classifier reads the same features (its shape block off).
"""

from __future__ import annotations

import functools
import math
import unicodedata
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float32]
U32Array = npt.NDArray[np.uint32]
U64Array = npt.NDArray[np.uint64]

# Hash constants (64-bit, odd): the polynomial base, the per-order salt, the finaliser.
_M = np.uint64(0x9E3779B97F4A7C15)
_SALT = 0xBF58476D1CE4E5B9
_F = np.uint64(0x94D049BB133111EB)
_SHIFT32 = np.uint64(32)
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class LexicalConfig:
    """How a text becomes hashed features: character n-grams of the lower-cased text, and
    (when `shape_bits` > 0) n-grams of its case-preserving *shape* in a block of their own."""

    bits: int = 18  # 2**bits buckets for the character n-grams
    ngram_min: int = 1
    ngram_max: int = 5
    head_chars: int = 1536  # long texts keep their first head_chars and last tail_chars characters
    tail_chars: int = 512
    nfkc: bool = True  # Unicode NFKC first: full-width letters and punctuation fold to ASCII
    # Shape n-grams (see `shape_codes`): 2**shape_bits buckets after the character block, 0: none.
    shape_bits: int = 16
    shape_ngram_min: int = 3
    shape_ngram_max: int = 5
    shape_weight: float = 0.5  # the shape block's L2 norm beside the character block's 1

    def __post_init__(self) -> None:
        if not 8 <= self.bits <= 24:
            raise ValueError(f"bits must be in 8..24, got {self.bits}")
        if not 1 <= self.ngram_min <= self.ngram_max <= 8:
            raise ValueError(f"need 1 <= ngram_min <= ngram_max <= 8, got {self.ngram_min}..{self.ngram_max}")
        if self.head_chars < 1 or self.tail_chars < 0:
            raise ValueError("head_chars must be >= 1 and tail_chars >= 0")
        if self.shape_bits != 0 and not 8 <= self.shape_bits <= 24:
            raise ValueError(f"shape_bits must be 0 or in 8..24, got {self.shape_bits}")
        if not 1 <= self.shape_ngram_min <= self.shape_ngram_max <= 8:
            raise ValueError(
                f"need 1 <= shape_ngram_min <= shape_ngram_max <= 8, got {self.shape_ngram_min}..{self.shape_ngram_max}"
            )
        if not (math.isfinite(self.shape_weight) and self.shape_weight > 0.0):
            raise ValueError(f"shape_weight must be a positive number, got {self.shape_weight}")

    @property
    def buckets(self) -> int:
        """Buckets of the character n-gram block."""
        return 1 << self.bits

    @property
    def shape_buckets(self) -> int:
        return (1 << self.shape_bits) if self.shape_bits else 0

    @property
    def n_features(self) -> int:
        """Length of the weight vector: the character block, then the shape block."""
        return self.buckets + self.shape_buckets

    def to_json(self) -> dict[str, int | bool | float]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LexicalConfig:
        ints = (
            "bits",
            "ngram_min",
            "ngram_max",
            "head_chars",
            "tail_chars",
            "shape_bits",
            "shape_ngram_min",
            "shape_ngram_max",
        )
        missing = [f for f in (*ints, "nfkc", "shape_weight") if f not in data]
        if missing:
            raise ValueError(f"lexical config lacks {', '.join(missing)}")
        if not all(isinstance(data[f], int) and not isinstance(data[f], bool) for f in ints):
            raise ValueError(f"lexical config values {', '.join(ints)} must be integers")
        if not isinstance(data["nfkc"], bool):
            raise ValueError("lexical config value nfkc must be true or false")
        weight = data["shape_weight"]
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ValueError("lexical config value shape_weight must be a number")
        return cls(
            bits=data["bits"],
            ngram_min=data["ngram_min"],
            ngram_max=data["ngram_max"],
            head_chars=data["head_chars"],
            tail_chars=data["tail_chars"],
            nfkc=data["nfkc"],
            shape_bits=data["shape_bits"],
            shape_ngram_min=data["shape_ngram_min"],
            shape_ngram_max=data["shape_ngram_max"],
            shape_weight=float(weight),
        )


def _trimmed(text: str, config: LexicalConfig) -> str:
    """A huge text cut to a head and a tail with room to spare (bounding the work before
    normalising), then NFKC-normalised if configured."""
    limit = config.head_chars + config.tail_chars
    if len(text) > 2 * limit + 64:
        text = text[: limit + 32] + " " + text[len(text) - limit - 32 :]
    if config.nfkc and not text.isascii():
        text = unicodedata.normalize("NFKC", text)
    return text


def _head_and_tail(text: str, config: LexicalConfig) -> str:
    """A whitespace-collapsed text longer than head_chars + tail_chars keeps its head and tail
    joined by " | "; padded with one space each side."""
    if len(text) > config.head_chars + config.tail_chars:
        tail = text[len(text) - config.tail_chars :] if config.tail_chars else ""
        text = text[: config.head_chars] + " | " + tail
    return " " + text + " "


def _bounded(text: str, config: LexicalConfig, *, lower: bool) -> str:
    """NFKC-normalised (if configured), lower-cased if `lower`, whitespace collapsed to single
    spaces, cut to head and tail (`_head_and_tail`)."""
    text = _trimmed(text, config)
    if lower:
        text = text.lower()
    return _head_and_tail(" ".join(text.split()), config)


def normalise_text(text: str, config: LexicalConfig) -> str:
    """The text the character n-grams are taken from (see `_bounded`), lower-cased."""
    return _bounded(text, config, lower=True)


def _code_points(text: str) -> U64Array:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.uint64)


def _hash_ngrams(codes: U64Array, ngram_min: int, ngram_max: int, salt_base: int, bits: int) -> U32Array:
    """Bucket ids of the n-grams (n = ngram_min..ngram_max) of `codes` (code points + 1):
    a rolling polynomial per order, salted by (salt_base + n), finalised, top `bits` bits."""
    parts: list[U64Array] = []
    rolling = codes
    for n in range(1, ngram_max + 1):
        if n > 1:
            if rolling.shape[0] < 2:
                break
            rolling = rolling[:-1] * _M + codes[n - 1 :]
        if n >= ngram_min:
            parts.append(rolling + np.uint64(((salt_base + n) * _SALT) & _MASK64))
    if not parts:
        return np.zeros(0, dtype=np.uint32)
    x = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
    x ^= x >> _SHIFT32
    x *= _F
    x >>= np.uint64(64 - bits)
    return x.astype(np.uint32)


def hashed_ngrams(text: str, config: LexicalConfig) -> U32Array:
    """Bucket ids of every character n-gram of the normalised text (with repeats)."""
    codes = _code_points(normalise_text(text, config)) + np.uint64(1)
    return _hash_ngrams(codes, config.ngram_min, config.ngram_max, 0, config.bits)


def _shape_table() -> U64Array:
    table = np.arange(128, dtype=np.uint64)  # ASCII punctuation, the space: themselves
    table[ord("a") : ord("z") + 1] = ord("a")
    table[ord("A") : ord("Z") + 1] = ord("A")
    table[ord("0") : ord("9") + 1] = ord("0")
    return table


_SHAPE_OF_ASCII = _shape_table()
_SHAPE_OTHER = np.uint64(ord("u"))
_ASCII_END = np.uint64(128)
_ASCII_LAST = np.uint64(127)


def shape_codes(text: str, config: LexicalConfig) -> U64Array:
    """The text's shape, one code per code point of the case-preserving normalised text:
    a-z -> "a", A-Z -> "A", 0-9 -> "0", any non-ASCII code point -> "u", ASCII punctuation
    and the space as themselves. Optimised adversarial suffixes (GCG-style: "ggplotCharField
    @{loc_{ !=\"$]{") are runs of mixed case, digits and brackets whose lower-cased character
    n-grams look like ordinary words; their shape does not."""
    c = _code_points(_bounded(text, config, lower=False))
    return np.where(c < _ASCII_END, _SHAPE_OF_ASCII[np.minimum(c, _ASCII_LAST)], _SHAPE_OTHER)


# The shape block's n-gram orders are salted apart from the character orders (salt_base).
_SHAPE_SALT_BASE = 16


def hashed_shape_ngrams(text: str, config: LexicalConfig) -> U32Array:
    """Bucket ids (within the shape block) of every shape n-gram of the text (with repeats)."""
    if not config.shape_bits:
        return np.zeros(0, dtype=np.uint32)
    codes = shape_codes(text, config) + np.uint64(1)
    return _hash_ngrams(codes, config.shape_ngram_min, config.shape_ngram_max, _SHAPE_SALT_BASE, config.shape_bits)


def _sublinear_unit(ids: U32Array) -> tuple[U32Array, FloatArray]:
    """Sorted unique ids and their values 1 + ln(count) (not yet normalised)."""
    ids.sort()
    starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
    counts = np.diff(np.append(starts, ids.shape[0]))
    return ids[starts], (1.0 + np.log(counts)).astype(np.float32)


def reference_lexical_features(text: str, config: LexicalConfig) -> tuple[U32Array, FloatArray]:
    """`lexical_features` the plain way, one n-gram order and one block at a time: the
    definition the fast path is tested against (bit for bit)."""
    ids = hashed_ngrams(text, config)
    if config.shape_bits:
        # One sort for both blocks (it costs more per call than per element); the shape
        # block's ids all lie above the character block's, so it is the sorted tail.
        ids = np.concatenate((ids, hashed_shape_ngrams(text, config) + np.uint32(config.buckets)))
    ids, values = _sublinear_unit(ids)
    split = int(np.searchsorted(ids, config.buckets)) if config.shape_bits else ids.shape[0]
    chars, shapes = values[:split], values[split:]  # views: normalised in place
    if chars.shape[0]:
        chars /= np.float32(math.sqrt(float(chars @ chars)))
    if shapes.shape[0]:
        shapes /= np.float32(math.sqrt(float(shapes @ shapes)))
        shapes *= np.float32(config.shape_weight)
    return ids, values


# --- the fast path ---------------------------------------------------------------------------------
#
# Both texts (lower-cased for the character block, its shape for the shape block) lie side by
# side in one row of 2 * width codes, the shorter one padded. With prefix sums
# P[j] = sum_{k<j} c_k * M^-k (M is odd, so invertible mod 2^64), the order-n polynomial at
# position i is (P[i+n] - P[i]) * M^(i+n-1): every order of both texts in three numpy calls,
# laid out as an (orders, 2, width) array that the salts, the finaliser, the shifts and the
# block offset each reach in one broadcast call. A precomputed mask then keeps the n-grams
# that lie inside their own text and belong to its block's orders. The "+ 1" of every code
# point is folded into the salts: sum_k (c_k + 1) M^(n-1-k) = sum_k c_k M^(n-1-k) + sum_j M^j.

_U64 = 1 << 64
_M_INT = int(_M)


@dataclass(frozen=True, slots=True)
class _FeaturePlan:
    """The per-config constants of `lexical_features`, computed once per config."""

    orders: int  # polynomials of orders 1..orders are computed for both texts
    longest: int  # the longest text `_bounded` returns (head, " | ", tail and the two pads)
    salts: U64Array  # (orders, 2, 1): each order's salt in each block, the folded "+ 1" included
    shifts: U64Array  # (2, 1): 64 - bits of each block
    offsets: U64Array  # (2, 1): where each block's ids start
    inverse_powers: U64Array  # M^-k for k < 2 * longest
    powers: U64Array  # (orders, 2 * longest): M^(i + n - 1) in row n - 1
    # (2, orders, 2 * longest): True where an n-gram counts, for a text whose last n-gram of
    # order n starts at column longest - n; `lexical_features` slides it to each text's length.
    valid: npt.NDArray[np.bool_]
    valid_both: npt.NDArray[np.bool_]  # the same as (orders, 2, 2 * longest), for texts of one length
    shape_start: np.uint32  # the shape block's first id
    sublinear: FloatArray  # 1 + ln(count) as float32, by count (index 0 unused)
    shape_scale: np.float32 | None  # the shape block's norm divisor scale when shape_weight is a power of 2


def _salt(salt_base: int, n: int) -> int:
    ones = sum(pow(_M_INT, j, _U64) for j in range(n))  # the "+ 1" of every code point, folded in
    return ((salt_base + n) * _SALT + ones) % _U64


@functools.lru_cache(maxsize=16)
def sublinear_table(config: LexicalConfig) -> FloatArray:
    """1 + ln(count) as float32 by count (index 0 unused), for every count one text can reach:
    the values `_sublinear_unit` computes (float64 log, then float32), looked up instead of
    computed per call. Both the numpy fast path and the C kernel read it."""
    orders = config.ngram_max - config.ngram_min + 1
    if config.shape_bits:
        orders += config.shape_ngram_max - config.shape_ngram_min + 1
    most = (config.head_chars + config.tail_chars + 5) * orders + 1  # n-grams of the longest bounded text
    counts = np.arange(most + 1, dtype=np.int64)
    counts[0] = 1
    table = (1.0 + np.log(counts)).astype(np.float32)
    table.flags.writeable = False  # shared by every call and thread
    return table


@functools.lru_cache(maxsize=16)
def _feature_plan(config: LexicalConfig) -> _FeaturePlan:
    char_orders = range(config.ngram_min, config.ngram_max + 1)
    shape_orders = range(config.shape_ngram_min, config.shape_ngram_max + 1) if config.shape_bits else range(0)
    orders = max(config.ngram_max, config.shape_ngram_max if config.shape_bits else 0)
    longest = config.head_chars + config.tail_chars + 5
    span = 2 * longest
    salts = np.zeros((orders, 2, 1), dtype=np.uint64)
    for n in range(1, orders + 1):
        salts[n - 1, 0, 0] = _salt(0, n)
        salts[n - 1, 1, 0] = _salt(_SHAPE_SALT_BASE, n)
    inverse = pow(_M_INT, -1, _U64)
    inverse_powers = np.array([pow(inverse, k, _U64) for k in range(span)], dtype=np.uint64)
    all_powers = np.array([pow(_M_INT, k, _U64) for k in range(span + orders)], dtype=np.uint64)
    powers = np.stack([all_powers[n - 1 : n - 1 + span] for n in range(1, orders + 1)])
    column = np.arange(span)
    valid = np.zeros((2, orders, span), dtype=np.bool_)
    for block, block_orders in enumerate((char_orders, shape_orders)):
        for n in block_orders:
            valid[block, n - 1] = column <= longest - n
    shifts = np.array([[64 - config.bits], [64 - config.shape_bits if config.shape_bits else 0]], dtype=np.uint64)
    offsets = np.array([[0], [config.buckets]], dtype=np.uint64)
    # x / s * w == x / (s / w) exactly when w is a power of two (scaling by 2^e commutes with
    # rounding): one pass instead of two over the shape values.
    weight = np.float32(config.shape_weight)
    shape_scale = weight if math.frexp(config.shape_weight)[0] == 0.5 and float(weight) == config.shape_weight else None
    plan = _FeaturePlan(
        orders=orders,
        longest=longest,
        salts=salts,
        shifts=shifts,
        offsets=offsets,
        inverse_powers=inverse_powers,
        powers=powers,
        valid=valid,
        valid_both=np.ascontiguousarray(valid.transpose(1, 0, 2)),
        shape_start=np.uint32(config.buckets),
        sublinear=sublinear_table(config),
        shape_scale=shape_scale,
    )
    # Shared by every call (and thread): a stray in-place write would corrupt every later score.
    for array in (salts, shifts, offsets, inverse_powers, powers, valid, plan.valid_both):
        array.flags.writeable = False
    return plan


# The plan by config object: hashing a 10-field dataclass for the lru_cache costs more than
# some of the numpy calls it saves. The entry keeps its config alive, so the id stays its own.
_PLANS: dict[int, tuple[LexicalConfig, _FeaturePlan]] = {}


def _plan_of(config: LexicalConfig) -> _FeaturePlan:
    entry = _PLANS.get(id(config))
    if entry is None or entry[0] is not config:
        if len(_PLANS) >= 64:
            _PLANS.clear()
        entry = _PLANS[id(config)] = (config, _feature_plan(config))
    return entry[1]


def bounded_pair(text: str, config: LexicalConfig) -> tuple[str | None, str]:
    """`_bounded(text, lower=True)` and `_bounded(text, lower=False)` sharing their work; the
    first is None when the text is ASCII, where it is the second lower-cased (ASCII
    lower-casing maps one character to one, so it commutes with the cut)."""
    text = _trimmed(text, config)
    cased = _head_and_tail(" ".join(text.split()), config)
    if text.isascii():
        return None, cased
    # Elsewhere lower-casing may change the length (U+0130) or depend on context (a final
    # sigma), so the lower-cased text is cut on its own, as `_bounded` does.
    return _head_and_tail(" ".join(text.lower().split()), config), cased


# ASCII shapes as a bytes.translate table (the upper half is never looked up: ASCII only).
_SHAPE_BYTES = bytes(int(code) for code in _SHAPE_OF_ASCII) + bytes(128)
# Any code point's shape by np.minimum(code, 128): ASCII by the table, 128 and above "u".
_SHAPE_OF_CODE = np.append(_SHAPE_OF_ASCII, _SHAPE_OTHER)
_SHAPE_CLIP = np.uint32(128)


def lexical_features(text: str, config: LexicalConfig) -> tuple[U32Array, FloatArray]:
    """Sparse feature vector of `text`: sorted unique feature ids and their values, 1 + ln
    count. The character block (ids < buckets) is L2-normalised to 1; the shape block (ids
    offset by buckets) on its own to shape_weight. Bit for bit `reference_lexical_features`."""
    plan = _plan_of(config)
    lowered, cased = bounded_pair(text, config)
    shaped = config.shape_bits > 0
    codes: npt.NDArray[Any]
    if lowered is None:
        raw = cased.encode("ascii")
        n_lower = n_cased = width = len(raw)
        codes = np.frombuffer(raw.lower() + raw.translate(_SHAPE_BYTES), dtype=np.uint8)
    else:
        n_lower, n_cased = len(lowered), len(cased)
        width = max(n_lower, n_cased)
        points = np.frombuffer((lowered + cased).encode("utf-32-le", "surrogatepass"), dtype="<u4")
        codes = np.zeros(2 * width, dtype=np.uint64)
        codes[:n_lower] = points[:n_lower]
        codes[width : width + n_cased] = _SHAPE_OF_CODE[np.minimum(points[n_lower:], _SHAPE_CLIP)]
    if width > plan.longest:  # cannot happen (`_bounded` caps the length); the mask would not cover it
        return reference_lexical_features(text, config)
    total, orders = 2 * width, plan.orders
    # prefix[j] = sum_{k<j} c_k M^-k; its tail past total + 1 is never written: the n-grams that
    # would read it run past their text and are masked out.
    prefix = np.empty(total + orders, dtype=np.uint64)
    prefix[0] = 0
    summed = prefix[1 : total + 1]
    np.multiply(codes, plan.inverse_powers[:total], out=summed).cumsum(out=summed)
    windows = np.ndarray((orders + 1, total), dtype=np.uint64, buffer=prefix, strides=(8, 8))
    hashes = windows[1:] - windows[0]
    hashes *= plan.powers[:, :total]
    grams = hashes.reshape(orders, 2, width)
    grams += plan.salts
    grams ^= grams >> _SHIFT32
    grams *= _F
    grams >>= plan.shifts
    grams += plan.offsets
    # Column i of a text of n characters holds an n-gram of order n only if i <= n - order:
    # the plan's mask, shifted so that its cut-off column lands there. Texts of one length (any
    # ASCII text) take both blocks through one mask; the sort below puts the shape block last.
    start = plan.longest - n_lower
    if not shaped:
        ids = grams[:, 0][plan.valid[0][:, start : start + width]].astype(np.uint32)
    elif n_lower == n_cased:
        ids = grams[plan.valid_both[:, :, start : start + width]].astype(np.uint32)
    else:
        chars = grams[:, 0][plan.valid[0][:, start : start + width]]
        start = plan.longest - n_cased
        shapes = grams[:, 1][plan.valid[1][:, start : start + width]]
        ids = np.concatenate((chars, shapes), dtype=np.uint32, casting="unsafe")
    ids.sort()
    n = ids.shape[0]
    starts = np.empty(n + 1, dtype=np.bool_)  # True where a run of equal ids starts, and at n
    starts[0] = starts[n] = True
    np.not_equal(ids[1:], ids[:-1], out=starts[1:n])
    edges = starts.nonzero()[0]
    ids = ids[edges[:-1]]
    split = int(ids.searchsorted(plan.shape_start)) if shaped else ids.shape[0]  # the character block's distinct ids
    values = plan.sublinear[edges[1:] - edges[:-1]]
    char_values, shape_values = values[:split], values[split:]  # views: normalised in place
    if char_values.shape[0]:
        char_values /= np.float32(math.sqrt(float(char_values @ char_values)))
    if shape_values.shape[0]:
        norm = np.float32(math.sqrt(float(shape_values @ shape_values)))
        if plan.shape_scale is not None:
            shape_values /= norm / plan.shape_scale
        else:
            shape_values /= norm
            shape_values *= np.float32(config.shape_weight)
    return ids, values
