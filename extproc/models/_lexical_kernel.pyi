from typing import Any

def lexical_logit(
    lowered: str | None,
    cased: str,
    weights: Any,
    sublinear: Any,
    bias: float,
    bits: int,
    ngram_min: int,
    ngram_max: int,
    shape_bits: int,
    shape_ngram_min: int,
    shape_ngram_max: int,
    shape_weight: float,
    /,
) -> float: ...
