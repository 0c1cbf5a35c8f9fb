"""PII detector: every kind found, and the look-alikes (versions, dates, hashes...) not."""

from __future__ import annotations

import pytest

from extproc.detectors.pii import PII_KINDS, find_pii, iban_valid, luhn_valid


def kinds(text: str) -> list[str]:
    return [f.kind for f in find_pii(text)]


def spans(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start : f.end]) for f in find_pii(text)]


# --- credit cards --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "number",
    [
        "4111 1111 1111 1111",  # Visa, grouped
        "4111-1111-1111-1111",
        "4111111111111111",
        "5555555555554444",  # Mastercard
        "2223003122003222",  # Mastercard 2-series
        "3782 822463 10005",  # Amex 4-6-5
        "6011111111111117",  # Discover
        "3530111333300000",  # JCB
    ],
)
def test_card_found(number: str) -> None:
    text = f"my card is {number}, thanks"
    assert spans(text) == [("credit_card", number)]


def test_card_redaction_shows_last_four_only() -> None:
    (f,) = find_pii("pay with 4111 1111 1111 1111")
    assert f.redacted == "credit_card ****1111"
    assert "4111 1111" not in f.redacted


@pytest.mark.parametrize(
    "number",
    [
        "4111 1111 1111 1112",  # Luhn fails
        "4111111111111112",
        "1234 5678 9012 3456",  # no issuer starts with 1, and Luhn fails
        "9111111111111119",  # Luhn-valid but no plausible IIN
        "0000 0000 0000 0000",  # Luhn-valid but all zeros
        "41111 1111 1111 111",  # odd grouping
    ],
)
def test_card_rejected(number: str) -> None:
    assert "credit_card" not in kinds(f"number {number} here")


def test_luhn() -> None:
    assert luhn_valid("79927398713")
    assert not luhn_valid("79927398710")


def test_card_inside_longer_run_of_numbers() -> None:
    text = "order 12345 4111 1111 1111 1111"
    assert spans(text) == [("credit_card", "4111 1111 1111 1111")]


# --- US SSN --------------------------------------------------------------------------------


@pytest.mark.parametrize("ssn", ["123-45-6789", "078 05 1120", "536-22-1234"])
def test_ssn_found(ssn: str) -> None:
    assert spans(f"SSN: {ssn}.") == [("us_ssn", ssn)]


def test_ssn_bare_digits_need_context() -> None:
    assert spans("my social security number is 536221234") == [("us_ssn", "536221234")]
    assert "us_ssn" not in kinds("invoice 536221234 is due")


@pytest.mark.parametrize(
    "ssn", ["000-12-3456", "666-12-3456", "900-12-3456", "987-65-4321", "123-00-4567", "123-45-0000"]
)
def test_ssn_invalid_areas_groups_serials(ssn: str) -> None:
    assert "us_ssn" not in kinds(f"ssn {ssn}")


# --- phones --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "phone",
    [
        "+1 415 555 2671",
        "+44 20 7946 0958",
        "+44 (0)20 7946 0958",
        "+33 1 23 45 67 89",
        "+4930123456",
        "(415) 555-2671",
        "415-555-2671",
        "415.555.2671",
        "1-800-555-0199",
        "0049 30 1234567",
        "06 12 34 56 78",
        "020 7946 0958",
    ],
)
def test_phone_found(phone: str) -> None:
    assert spans(f"call me at {phone} tomorrow") == [("phone", phone)]


@pytest.mark.parametrize(
    "phone",
    [
        "555-120-3344",  # exchange starts with 1: not a valid NANP number, clearly a phone
        "555.120.3344",
        "123-456-7890",  # area code starts with 1
        "(123) 456-7890",
        "(555)120-3344",
        "1-555-120-3344",
    ],
)
def test_formatted_phone_outside_numbering_plan_reported_lower(phone: str) -> None:
    (f,) = find_pii(f"call me at {phone} tomorrow")
    assert (f.kind, f"call me at {phone} tomorrow"[f.start : f.end]) == ("phone", phone)
    # Reported at the PII signal's default min_score (0.5, compared with >=), below checked shapes.
    assert f.score == 0.5
    assert f.score < find_pii("call 415-555-2671")[0].score


@pytest.mark.parametrize(
    "text",
    [
        "555-120.3344",  # mixed separators
        "1.555-120-3344",
        "100 200 3000 units",  # spaces only: a list of numbers
        "5551203344",  # bare digits outside the numbering plan
        "id 555-120-33445",
    ],
)
def test_phone_layout_needs_consistent_formatting(text: str) -> None:
    assert "phone" not in kinds(text)


def test_phone_trailing_number_is_not_part_of_it() -> None:
    assert spans("call +1 415 555 2671 2 times") == [("phone", "+1 415 555 2671")]


@pytest.mark.parametrize(
    "text",
    [
        "Python 3.11.7 and numpy 1.26.4",
        "released on 2024-01-15 at 10:30",
        "dates 15.01.2024 and 01/15/2024",
        "server 192.168.100.200 port 8080",
        "id 550e8400-e29b-41d4-a716-446655440000",
        "commit 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
        "we have 1000000 users and 12345678 rows",
        "build 20240115123045 passed",
        "pi is 3.14159265358979",
        "price: 1 234 567 euros",
        "ISBN 978-3-16-148410-0",
        "see RFC 2616 section 14.9",
        "version v1.2.3-rc.4",
        "coordinates 48.8566, 2.3522",
    ],
)
def test_no_pii_in_ordinary_numbers(text: str) -> None:
    assert find_pii(text) == []


# --- emails --------------------------------------------------------------------------------


@pytest.mark.parametrize("email", ["john.doe@example.com", "a+tag@mail.example.co.uk", "x_y-z@sub-domain.io"])
def test_email_found(email: str) -> None:
    text = f"write to <{email}>."
    assert spans(text) == [("email", email)]
    assert find_pii(text)[0].redacted.startswith("email " + email[0] + "***@")


@pytest.mark.parametrize("text", ["@decorator on a method", "user@localhost", "a @ b . com", "foo@bar", "email me@"])
def test_email_not_found(text: str) -> None:
    assert "email" not in kinds(text)


# --- IBAN ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "iban",
    [
        "DE89 3704 0044 0532 0130 00",
        "DE89370400440532013000",
        "GB82 WEST 1234 5698 7654 32",
        "FR14 2004 1010 0505 0001 3M02 606",
    ],
)
def test_iban_found(iban: str) -> None:
    text = f"IBAN {iban} THEN more"
    assert spans(text) == [("iban", iban)]


def test_iban_checks() -> None:
    assert iban_valid("DE89370400440532013000")
    assert not iban_valid("DE88370400440532013000")  # mod-97 fails
    assert not iban_valid("DE8937040044053201300")  # wrong length for DE
    assert not iban_valid("XX89370400440532013000")  # unknown country


@pytest.mark.parametrize(
    "text", ["IBAN DE88 3704 0044 0532 0130 00", "code AB12 CDEF GHIJ KLMN", "GB82 WEST 1234 5698 7654"]
)
def test_iban_rejected(text: str) -> None:
    assert "iban" not in kinds(text)


# --- passports -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("passport no. X1234567", "X1234567"),
        ("Passport number: 123456789", "123456789"),
        ("my passport # is AB1234567", "AB1234567"),
        ("número de pasaporte: XDA123456", "XDA123456"),
        ("pasaporte n.º AB1234567", "AB1234567"),
        ("numéro de passeport : 12AB34567", "12AB34567"),
        ("Reisepassnummer: C01X00T47", "C01X00T47"),
        ("Pass-Nr. C01X00T47", "C01X00T47"),
        ("numero di passaporto YA1234567", "YA1234567"),
    ],
)
def test_passport_found(text: str, number: str) -> None:
    assert spans(text) == [("passport", number)]


@pytest.mark.parametrize(
    ("text", "number"),
    [
        # A first mention of "passport" used to take the second as its number candidate
        # (rejected: no digits) and hide the real "passport number ..." phrase.
        ("My passport, passport number X1234567", "X1234567"),
        ("passport passport no. X1234567", "X1234567"),
        ("Passport: passport number is AB1234567", "AB1234567"),
        ("Passports - passport # C01X00T47", "C01X00T47"),
        ("pasaporte, pasaporte número X1234567", "X1234567"),
        ("passeport du passeport n° 12AB34567", "12AB34567"),
        ("Reisepass / Reisepassnummer: C01X00T47", "C01X00T47"),
        ("паспорт, паспорт № 450912345", "450912345"),
    ],
)
def test_passport_phrase_after_another_mention(text: str, number: str) -> None:
    assert spans(text) == [("passport", number)]


def test_passport_numbers_in_overlapping_phrases() -> None:
    text = "Her passport: passport no. X1234567; his passport - passport number Y7654321."
    assert spans(text) == [("passport", "X1234567"), ("passport", "Y7654321")]


@pytest.mark.parametrize(
    "text",
    [
        "my passport expired in 2019",
        "passport photo 2024-01-01",
        "passport number: ABCDEFGH",  # no digits
        "X1234567 is a part number",  # no passport phrase
        "I passed 123456 tests",
        "compass bearing 1234567",
    ],
)
def test_passport_not_found(text: str) -> None:
    assert "passport" not in kinds(text)


# --- selection and shape -------------------------------------------------------------------


def test_kinds_filter() -> None:
    text = "mail a@example.com card 4111 1111 1111 1111"
    assert [f.kind for f in find_pii(text, ["email"])] == ["email"]
    assert [f.kind for f in find_pii(text, ["credit_card"])] == ["credit_card"]
    assert find_pii(text, []) == []


def test_unknown_kind_raises() -> None:
    with pytest.raises(ValueError, match="unknown PII kind"):
        find_pii("x", ["dna"])


def test_findings_sorted_and_in_range() -> None:
    text = "card 4111 1111 1111 1111, phone +1 415 555 2671, mail a@example.com, SSN 536-22-1234"
    found = find_pii(text)
    assert [f.kind for f in found] == ["credit_card", "phone", "email", "us_ssn"]
    for f in found:
        assert 0 <= f.start < f.end <= len(text)
        assert 0.0 < f.score <= 1.0
        assert f.kind in PII_KINDS
        assert text[f.start : f.end] not in f.redacted
