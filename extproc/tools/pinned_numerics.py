"""Training arithmetic pinned to one x86-64 instruction set, so a retrain gives the same weights,
byte for byte, on any host with AVX2, whatever else it has.

The numerical libraries pick their kernels by the CPU they find: on an AVX-512 host torch's own
kernels (a softmax, a sum) add 8 lanes at a time where an AVX2 host adds 4, and MKL and OpenBLAS
pick other products. Sums in another order differ in their last bits, and full-batch L-BFGS over
hundreds of steps grows those bits into weights that differ by 1e-2 (measured: stage 1 of the
subject classifier retrained on an AVX-512 host against the weights an earlier host committed).
Each library reads its choice from the environment when it loads or first computes, so the pins
are set before numpy or torch is imported and then hold for the whole process. Serving is not
pinned: it reads the weights, it does not make them.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Container, MutableMapping
from pathlib import Path

# variable -> value: each library's kernels as an AVX2 host without AVX-512 runs them
PINS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch's vectorised kernels
    "MKL_CBWR": "AVX2",  # MKL, torch's BLAS and sparse products: its reproducible AVX2 branch
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN, where torch routes a product through it
    "OPENBLAS_CORETYPE": "Haswell",  # numpy's OpenBLAS: the AVX2 kernels (PCA's SVD, float32 products)
    # numpy's own dispatch: its AVX-512 targets off (naming one the host lacks is allowed)
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR",
}
REQUIRED_FLAGS = ("avx2", "fma")  # the pinned kernels need these
LOADED_TOO_EARLY = ("numpy", "torch")


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags (Linux), empty where they cannot be read."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def pin_training_numerics(
    environ: MutableMapping[str, str],
    *,
    machine: str | None = None,
    flags: set[str] | None = None,
    loaded: Container[str] = sys.modules,
) -> list[str]:
    """Sets `PINS` in `environ` (the process environment, for the libraries yet to load) and
    returns why the weights may still differ from another host's: empty when every pin holds.
    A value the caller set already is kept and reported, never overridden."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        return [
            f"the pins are for x86-64 and this is {machine}: weights may differ from an x86-64 host's in the last bits"
        ]
    flags = cpu_flags() if flags is None else flags
    missing = [flag for flag in REQUIRED_FLAGS if flag not in flags]
    if missing:
        return [f"this CPU lacks {', '.join(missing)}: weights may differ from an AVX2 host's"]
    early = [name for name in LOADED_TOO_EARLY if name in loaded]
    if early:
        return [f"{' and '.join(early)} loaded before the pins could be set: kernels as this CPU picks them"]
    problems = []
    for name, value in PINS.items():
        current = environ.setdefault(name, value)
        if current != value:
            problems.append(f"{name}={current} set by the caller (the pinned value is {value})")
    return problems
