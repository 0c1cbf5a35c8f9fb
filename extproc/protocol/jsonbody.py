"""JSON bodies as bytes, the way every answer and rewritten request is written (one place)."""

from __future__ import annotations

import json
from typing import Any


def dumps(obj: Any) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:
        # A lone surrogate (valid JSON `\ud800`, not valid UTF-8): keep it escaped, as the client sent it.
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode()
