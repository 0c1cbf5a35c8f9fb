"""rapidocr's own detector edges, the reference `extproc/models/ocr_det.py` must match.

The tests compare `det_tensor` and `text_boxes` with these on real detector maps, and
`bench/bench_ocr.py --edges` times an engine that uses them (the pipeline as it was before
`ocr_det`) beside the default one in the same run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from extproc.models.ocr import RapidOcrEngine


def rapidocr_det_tensor(img: NDArray[np.uint8], height: int, width: int) -> NDArray[np.float32]:
    """rapidocr's detector preprocessing: resize, `x / 127.5 - 1.0` in float32, HWC to NCHW."""
    import cv2
    import numpy as np

    resized = cv2.resize(img, (width, height)).astype(np.float32)
    tensor: NDArray[np.float32] = np.ascontiguousarray((resized / 127.5 - 1.0).transpose((2, 0, 1))[np.newaxis])
    return tensor


def rapidocr_text_boxes(post: Any, pred: NDArray[np.float32], shape: tuple[int, int]) -> tuple[Any, bool]:
    """DBPostProcess's `boxes_from_bitmap` and `filter_det_res` on one map, with the candidate
    count checked first by a contour search of its own (the engine's steps before `ocr_det`)."""
    import cv2
    import numpy as np

    mask = (pred[0, 0] > post.thresh).astype(np.uint8)
    if post.dilation_kernel is not None:
        mask = cv2.dilate(mask, post.dilation_kernel)
    contours, _ = cv2.findContours(mask * 255, cv2.RETR_LIST, cv2.CHAIN_APPROX_SIMPLE)
    src_h, src_w = shape
    boxes, scores = post.boxes_from_bitmap(pred[0, 0], mask, src_w, src_h)
    found, _ = post.filter_det_res(boxes, scores, src_h, src_w)
    return found, len(contours) > post.max_candidates


def use_rapidocr_edges(engine: RapidOcrEngine) -> RapidOcrEngine:
    """Make this engine prepare detector input and read detector maps with rapidocr's own steps."""

    def det_input(img: NDArray[np.uint8]) -> NDArray[np.float32] | None:
        height, width = engine._det_size(img.shape[0], img.shape[1])
        return rapidocr_det_tensor(img, height, width) if height > 0 and width > 0 else None

    def boxes(post: Any, pred: NDArray[np.float32], shape: tuple[int, int]) -> tuple[Any, bool]:
        found, overflow = rapidocr_text_boxes(post, pred, shape)
        if overflow:
            engine.stats.det_overflow += 1
        return found, overflow

    engine._det_input = det_input  # type: ignore[method-assign]
    engine._text_boxes = boxes  # type: ignore[method-assign]
    return engine
