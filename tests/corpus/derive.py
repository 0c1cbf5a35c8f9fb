"""How the corpus was made (kept for the record; the tests do not run it).

Usage: python tests/corpus/derive.py SRC_DIR OUT_DIR, where SRC_DIR holds the files
extracted from the scikit-image 0.26.0 and matplotlib 3.11.2 wheels (skimage/data/*,
matplotlib/mpl-data/sample_data/*). Originals are copied byte for byte; every other file is
derived from one of them as written below and in SOURCES.md.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

ORIGINALS = {
    "camera.png": "skimage/data/camera.png",
    "coins.png": "skimage/data/coins.png",
    "microaneurysms.png": "skimage/data/microaneurysms.png",
    "rocket.jpg": "skimage/data/rocket.jpg",
    "text.png": "skimage/data/text.png",
    "clock_motion.png": "skimage/data/clock_motion.png",
    "horse.png": "skimage/data/horse.png",
    "cell.png": "skimage/data/cell.png",
    "retina.jpg": "skimage/data/retina.jpg",
    "grace_hopper.jpg": "matplotlib/mpl-data/sample_data/grace_hopper.jpg",
}


def main(src: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, rel in ORIGINALS.items():
        shutil.copyfile(src / rel, out / name)
    sk = src / "skimage/data"
    astronaut = Image.open(sk / "astronaut.png").convert("RGB")
    coffee = Image.open(sk / "coffee.png").convert("RGB")
    chelsea = Image.open(sk / "chelsea.png").convert("RGB")
    rocket = Image.open(sk / "rocket.jpg").convert("RGB")
    retina = Image.open(sk / "retina.jpg").convert("RGB")
    camera = Image.open(sk / "camera.png").convert("L")
    hopper = Image.open(src / "matplotlib/mpl-data/sample_data/grace_hopper.jpg").convert("RGB")

    # Re-encodings of large PNG photographs (same pixels up to JPEG/WebP loss).
    astronaut.save(out / "astronaut.jpg", quality=90)
    coffee.save(out / "coffee.jpg", quality=90)
    Image.open(sk / "ihc.png").convert("RGB").save(out / "ihc.jpg", quality=90)
    Image.open(sk / "hubble_deep_field.jpg").convert("RGB").save(out / "hubble_deep_field.webp", quality=85)

    # RGBA: the cat with a soft elliptical alpha vignette (transparent corners).
    small = chelsea.resize((300, 200), Image.Resampling.LANCZOS)
    alpha = Image.new("L", small.size, 0)
    ImageDraw.Draw(alpha).ellipse((15, 10, 285, 190), fill=255)
    small.putalpha(alpha.filter(ImageFilter.GaussianBlur(12)))
    small.save(out / "chelsea_rgba.png")

    # P (palette) and P with a transparent palette index (GIF).
    coffee.resize((300, 200), Image.Resampling.LANCZOS).quantize(64).save(out / "coffee_palette.png")
    gif = coffee.resize((240, 160), Image.Resampling.LANCZOS).quantize(32)
    gif.save(out / "coffee_palette_transparent.gif", transparency=0)

    # CMYK JPEG.
    rocket.convert("CMYK").save(out / "rocket_cmyk.jpg", quality=90)
    # Extreme aspect ratio strip (NaFlex grids, antialiasing along one axis).
    rocket.crop((0, 150, 640, 270)).save(out / "rocket_strip.png")
    # Tiny image (upsampled by the processor).
    astronaut.resize((16, 12), Image.Resampling.LANCZOS).save(out / "astronaut_tiny.png")
    # LA: grey plus alpha.
    la = camera.resize((256, 256), Image.Resampling.LANCZOS).convert("LA")
    la.putalpha(Image.linear_gradient("L").resize((256, 256)))
    la.save(out / "camera_la.png")
    # Greyscale JPEG.
    hopper.convert("L").save(out / "grace_hopper_gray.jpg", quality=90)
    # EXIF orientation 6: stored rotated 90 degrees counter-clockwise, displayed upright.
    exif = Image.Exif()
    exif[0x0112] = 6
    hopper.transpose(Image.Transpose.ROTATE_90).save(out / "grace_hopper_exif6.jpg", quality=90, exif=exif)
    # Large (2000+ px): the fundus photograph upscaled to 2400x2400.
    retina.resize((2400, 2400), Image.Resampling.BICUBIC).save(out / "retina_2400.jpg", quality=80)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
