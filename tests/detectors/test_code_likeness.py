"""code_likeness on code, OCR'd code without indentation, and prose-like texts."""

from __future__ import annotations

import pytest

from extproc.detectors.code import code_likeness
from extproc.testing.ocr_scenes import CODE_LINES, FORM_LINES

CODE = "\n".join(line for line, _ in CODE_LINES)
JS = (
    'const fs = require("fs");\nfunction load(p) {\n  if (!p) { return null; }\n'
    '  return fs.readFileSync(p, "utf8");\n}'
)


@pytest.mark.parametrize("text", [CODE, JS, "\n".join(ln.strip() for ln in CODE.splitlines())])
def test_code_scores_high(text: str) -> None:
    assert code_likeness(text) >= 0.6


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(FORM_LINES),
        "The patient reported chest pain for three days and no fever. Please summarize the case for me.",
        "Find the bug",
        "P<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<<<<<<<<<\nL898902C36UTO7408122F1204159ZE184226B<<<<<10",
        "MILK 2.49\nBREAD 3.10\nTOTAL 5.59\nCASH 10.00",
        "",
    ],
)
def test_non_code_scores_low(text: str) -> None:
    assert code_likeness(text) < 0.4
