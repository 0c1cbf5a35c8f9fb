"""The MRZ detector: TD1/TD2/TD3 parsing, check digits, OCR-confusion repair, tamper refusal."""

from __future__ import annotations

import pytest

from extproc.detectors.mrz import check_digit, find_mrz
from extproc.testing.ocr_scenes import PASSPORT_FIELDS, tampered_mrz, td3_lines, valid_mrz

# ICAO Doc 9303 specimens.
TD3 = "P<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<<<<<<<<<\nL898902C36UTO7408122F1204159ZE184226B<<<<<10"
TD2 = "I<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<\nD231458907UTO7408122F1204159<<<<<<<6"
TD1 = "I<UTOD231458907<<<<<<<<<<<<<<<\n7408122F1204159UTO<<<<<<<<<<<6\nERIKSSON<<ANNA<MARIA<<<<<<<<<<"


def test_check_digit_matches_icao_examples() -> None:
    assert check_digit("L898902C3") == "6"
    assert check_digit("740812") == "2"
    assert check_digit("120415") == "9"
    assert check_digit("ZE184226B<<<<<") == "1"


@pytest.mark.parametrize(("text", "fmt"), [(TD3, "TD3"), (TD2, "TD2"), (TD1, "TD1")])
def test_specimens_parse_valid(text: str, fmt: str) -> None:
    [mrz] = find_mrz("Some header text\n" + text + "\nfooter")
    assert mrz.format == fmt
    assert mrz.valid and mrz.repairs == 0
    fields = (mrz.surname, mrz.given_names, mrz.birth_date, mrz.expiry_date)
    assert fields == ("ERIKSSON", "ANNA MARIA", "740812", "120415")
    assert mrz.issuing_state == "UTO"


def test_ocr_confusions_are_repaired_by_check_digits() -> None:
    l1, l2 = valid_mrz()
    # What OCR does to OCR-B: O/0, I/1, S/5, B/8 swapped in both directions, a space inside.
    bad1 = l1.replace("UTO", "UT0")
    bad2 = l2.replace("8503172", "85O3I72").replace("X52B9", "X5289").replace("UTO", "UT0")
    bad2 = bad2[:20] + " " + bad2[20:]
    [mrz] = find_mrz(f"{bad1}\n{bad2}")
    assert mrz.valid
    assert mrz.repairs >= 4
    assert mrz.document_number == PASSPORT_FIELDS["number"]
    assert mrz.birth_date == PASSPORT_FIELDS["birth"]
    assert mrz.issuing_state == "UTO" and mrz.nationality == "UTO"


def test_filler_count_errors_are_fixed() -> None:
    l1, l2 = valid_mrz()
    [mrz] = find_mrz(f"{l1[:-2]}\n{l2.replace('<<<<<1', '<<<<1')}")
    assert mrz.valid


def test_tampered_birth_date_is_invalid() -> None:
    l1, l2 = tampered_mrz()
    [mrz] = find_mrz(f"{l1}\n{l2}")
    assert not mrz.valid
    assert mrz.checks["birth_date"] is False and mrz.checks["composite"] is False
    assert "invalid(birth_date,composite)" in mrz.redacted()


def test_forged_check_digit_is_invalid() -> None:
    l1, l2 = valid_mrz()
    forged = l2[:27] + str((int(l2[27]) + 1) % 10) + l2[28:]
    [mrz] = find_mrz(f"{l1}\n{forged}")
    assert not mrz.valid and mrz.checks["expiry_date"] is False


def test_redacted_summary_holds_no_personal_data() -> None:
    [mrz] = find_mrz(TD3)
    text = mrz.redacted()
    for secret in ("L898902C3", "ERIKSSON", "740812", "ANNA"):
        assert secret not in text


def test_no_mrz_in_ordinary_text() -> None:
    assert find_mrz("Please summarize this document <<< for me\nTotal 12.00") == []
    assert find_mrz("") == []


def test_td3_builder_round_trips() -> None:
    l1, l2 = td3_lines(**{**PASSPORT_FIELDS, "personal": ""})
    [mrz] = find_mrz(f"{l1}\n{l2}")
    assert mrz.valid and mrz.optional_data == ""
