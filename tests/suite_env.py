"""The settings environment the suite builds its routers and stacks with.

Everything as the defaults give it, except the OCR recognizer's load-time warm-up over every line
width (`ocr.warm_width`): that is most of a default router's build time, the suite builds routers
and stacks by the hundred, and the warm-up itself is tested on the engine
(tests/models/test_ocr_fast_settings.py). Results do not change, only when a width is first prepared.
"""

from __future__ import annotations

SUITE_ENVIRON: dict[str, str] = {"VSR_OCR__WARM_WIDTH": "0"}
