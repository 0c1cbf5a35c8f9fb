"""Make the int8 copy of the OCR detector that `ocr.det_precision: int8` runs (offline; needs `onnx`).

    .venv/bin/python -m extproc.testing.quantize_ocr [--out DIR]

Static quantization with onnxruntime's own tooling, QDQ format: weights int8, symmetric, one
scale per output channel (the wheel's opset-11 model is converted to opset 13 first, which
per-channel scales need); activations uint8, asymmetric, with MinMax ranges calibrated on
rendered scenes (`extproc/testing/ocr_scenes.py`: documents, code, captions, photos) at the
two detection sizes the router meets most, never on the OCR corpus that evaluates it. Per-tensor
weights changed a document label on one corpus photo; per channel changed none. Calibration runs
the fp32 model, so a host whose kernels round differently may write slightly different scales:
`tests/models/test_ocr_int8.py` checks the shipped file's routing labels, not its bytes.

It lives with the test tooling because it calibrates on the rendered scenes, which the wheel
leaves out: a source checkout runs it, an installed package only runs the int8 file it made.

Beside the model it writes a JSON record with the source detector's sha256; the engine uses the
int8 copy only while that matches the installed wheel's detector.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from extproc.models.ocr_runtime import INT8_DETECTOR, rapidocr_model_files

CALIBRATION_SIDES = (480, 736)  # short sides: documents near 736, photos downscaled


def calibration_inputs() -> list[Any]:
    """Detector inputs (NCHW float32, mean/std 0.5, sides multiples of 32) of rendered scenes."""
    import cv2
    import numpy as np

    from extproc.testing import ocr_scenes as scenes

    images = [
        scenes.passport_page(), scenes.code_screenshot(), scenes.injection_banner(),
        scenes.landscape_photo(seed=11), scenes.car_photo(),
        scenes.text_on_white(["quarterly report", "revenue 12,400 EUR", "contact: ops@example.org"], 18),
        scenes.captioned_photo(20, contrast=0.5, size=(1000, 700)),
        scenes.captioned_photo(16, angle=25, size=(800, 600)),
        scenes.landscape_photo(seed=5).resize((1400, 900)),
    ]  # fmt: skip
    inputs = []
    for image in images:
        bgr = np.asarray(image.convert("RGB"))[:, :, ::-1]
        h, w = bgr.shape[:2]
        for side in CALIBRATION_SIDES:
            ratio = side / min(h, w)
            size = (max(32, round(w * ratio / 32) * 32), max(32, round(h * ratio / 32) * 32))
            x = cv2.resize(bgr, size).astype(np.float32) / 127.5 - 1.0
            inputs.append(np.ascontiguousarray(x.transpose(2, 0, 1)[np.newaxis]))
    return inputs


def quantize_detector(out: Path) -> dict[str, str]:
    """Write the int8 detector to `out` and its record beside it; returns the record."""
    import onnx
    import onnxruntime as ort
    from onnx import version_converter
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    source, _ = rapidocr_model_files()
    with tempfile.TemporaryDirectory() as tmp:
        opset13, prepared = Path(tmp) / "opset13.onnx", Path(tmp) / "prepared.onnx"
        onnx.save(version_converter.convert_version(onnx.load(str(source)), 13), str(opset13))
        quant_pre_process(str(opset13), str(prepared), skip_symbolic_shape=True)
        input_name = ort.InferenceSession(str(prepared)).get_inputs()[0].name

        class Scenes(CalibrationDataReader):  # type: ignore[misc]  # onnxruntime ships no stubs
            def __init__(self) -> None:
                self._feeds: Iterator[dict[str, Any]] = iter({input_name: x} for x in calibration_inputs())

            def get_next(self) -> dict[str, Any] | None:
                return next(self._feeds, None)

        quantize_static(
            str(prepared), str(out), Scenes(), quant_format=QuantFormat.QDQ, per_channel=True,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
            extra_options={"ActivationSymmetric": False, "WeightSymmetric": True},
        )  # fmt: skip
    record = {
        "source": source.name,
        "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        "sha256": hashlib.sha256(out.read_bytes()).hexdigest(),
        "method": "onnxruntime quantize_static: QDQ, activations uint8 (asymmetric, MinMax), "
        "weights int8 per channel (symmetric); opset 11 -> 13 first",
        "calibration": "extproc/testing/ocr_scenes.py renders (not the OCR corpus): "
        f"9 scenes at short sides {' and '.join(map(str, CALIBRATION_SIDES))}",
    }
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=INT8_DETECTOR.parent, help="folder (default: the shipped one)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    record = quantize_detector(args.out / INT8_DETECTOR.name)
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
