"""Run a bench script with every ONNX-runtime TextEmbedder it builds at one precision (fp32 / int8),
to set the signal figures of `embedder.precision: int8` beside fp32's (docs/encoder_precision.md).

    .venv/bin/python bench/with_precision.py int8 bench/bench_safety.py --data ../shared/data/safety
    .venv/bin/python bench/with_precision.py int8 bench/bench_domain.py --data ../shared/data/domain

bench_safety and bench_domain build their embedders without reading the environment, so
`VSR_EMBEDDER__PRECISION` does not reach them; this sets the precision where the embedder is made.
For int8 the temporary folder moves to a private one, so that bench_domain's on-disk embedding
cache (keyed by the model, not the precision) does not answer with fp32 vectors. The embedders'
precisions are printed on exit, to show the override took.
"""

from __future__ import annotations

import atexit
import runpy
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from extproc.models import text_embedder


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in ("fp32", "int8"):
        raise SystemExit("usage: with_precision.py {fp32,int8} SCRIPT [ARGS...]")
    precision, script = sys.argv[1], Path(sys.argv[2])
    sys.argv = sys.argv[2:]
    made: list[str] = []
    original = text_embedder.TextEmbedder.__init__

    def init(self: text_embedder.TextEmbedder, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("runtime", "onnx") == "onnx":
            kwargs["precision"] = precision
        original(self, *args, **kwargs)
        made.append(self.precision)

    text_embedder.TextEmbedder.__init__ = init  # type: ignore[method-assign]
    if precision != "fp32":
        tempfile.tempdir = tempfile.mkdtemp(prefix=f"extproc-{precision}-")
    atexit.register(lambda: print(f"[with_precision] embedders made: {made}", file=sys.stderr))
    sys.path.insert(0, str(script.resolve().parent))
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
