"""Every detector stays linear on hostile input: 200 KB adversarial strings finish quickly.

The bound is a generous timeout on a worker thread, not a wall-clock assertion: a
catastrophically backtracking pattern takes minutes or hours on these inputs, not seconds.
"""

from __future__ import annotations

import concurrent.futures

import pytest

from extproc.detectors import find_jailbreak, find_pii, find_secrets
from extproc.detectors.encoded import decode_payloads
from extproc.detectors.retraction import strip_retractions

N = 200_000
ADVERSARIAL = {
    "digit_groups": "1 " * (N // 2),
    "digits": "1" * N,
    "dotted_digits": "1." * (N // 2),
    "parens": "(1" * (N // 2),
    "plus_groups": "+1 " * (N // 3),
    "at_signs": "a@" * (N // 2),
    "email_domains": "a@b." * (N // 4),
    "long_local_part": "a" * N + "@",
    "hyphen_domain": "x@" + "a-" * (N // 2),
    "aws_prefix": "AKIA" * (N // 4),
    "jwt_header": "eyJ" + "a" * N,
    "jwt_parts": "eyJaaaaa." * (N // 9),
    "openai_prefix": "sk-" * (N // 3),
    "openai_body": "sk-" + "a" * N,
    "assignments": "password=" * (N // 9),
    "open_quote": "password = '" + "a" * N,
    "secret_colons": "secret: " * (N // 8),
    "pem_begins": "-----BEGIN PRIVATE KEY-----" * (N // 27),
    "slack_prefix": "xoxb-1" * (N // 6),
    "iban_prefix": "DE89 " * (N // 5),
    "passport_fillers": "passport " + "no " * (N // 3),
    "ignore_repeated": "ignore " * (N // 7),
    "you_are": "you are " * (N // 8),
    "cjk_leads": "忽略之前" * (N // 4),
    "cjk_leads_spaced": "忽略 所有 " * (N // 6),
    "kana_hidden": "システムプロンプトを" * (N // 10),
    "hangul_before": "이전 지침을 " * (N // 7),
    "cyrillic_leads": "игнорируй все " * (N // 14),
    "leet": "a1b" * (N // 3),
    "zero_width": "i\u200bg" * (N // 3),
    "accents": "é " * (N // 2),
    "spaces": " " * N,
    "binary_groups": "01010101 " * (N // 9) + "0",
    "morse_groups": ".- " * (N // 3) + "x",
    "hex_pairs": "4a " * (N // 3) + "x",
    "base64_run": "QUJD" * (N // 4) + "=" * 7,
    "ascii85_marks": '=)r"sAK' * (N // 7),
    "ascii85_opens": "<~" * (N // 2),
    "rot13_words": "gur " * (N // 4) + ",",
    "letter_then_commas": "a" + "," * N,
    "retractions": "ignore my " * (N // 10),
    "retraction_words": "forget my last last last " * (N // 25),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_input_finishes(name: str) -> None:
    text = ADVERSARIAL[name]

    def run() -> int:
        decoded = decode_payloads(text)
        decoded_or_kept = decoded is not None or strip_retractions(text) is not None
        return len(find_pii(text)) + len(find_secrets(text)) + len(find_jailbreak(text)) + decoded_or_kept

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(run)
        # Linear patterns take well under a second here; backtracking ones would take hours.
        assert future.result(timeout=30) >= 0
