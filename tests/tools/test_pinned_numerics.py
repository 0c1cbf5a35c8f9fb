"""The trainers' pinned numerics (`extproc/tools/pinned_numerics.py`): the pins reach the process
before numpy and torch load, a caller's own value is kept and reported, and where a pin cannot
hold the trainer says so instead of claiming reproducible weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from extproc.tools.pinned_numerics import PINS, cpu_flags, pin_training_numerics

AVX2_HOST = {"avx2", "fma", "sse4_2"}
REPO = Path(__file__).resolve().parents[2]


def test_every_pin_is_set_on_an_x86_host_before_the_libraries_load() -> None:
    environ: dict[str, str] = {}
    assert pin_training_numerics(environ, machine="x86_64", flags=AVX2_HOST, loaded=()) == []
    assert environ == PINS


def test_a_value_the_caller_chose_is_kept_and_reported() -> None:
    environ = {"ATEN_CPU_CAPABILITY": "avx512"}
    problems = pin_training_numerics(environ, machine="x86_64", flags=AVX2_HOST, loaded=())
    assert environ["ATEN_CPU_CAPABILITY"] == "avx512"
    assert problems == ["ATEN_CPU_CAPABILITY=avx512 set by the caller (the pinned value is avx2)"]


@pytest.mark.parametrize(
    ("machine", "flags", "loaded", "reason"),
    [
        ("aarch64", AVX2_HOST, (), "the pins are for x86-64 and this is aarch64"),
        ("x86_64", {"sse4_2"}, (), "this CPU lacks avx2, fma"),
        ("x86_64", AVX2_HOST, ("numpy",), "numpy loaded before the pins could be set"),
        ("AMD64", AVX2_HOST, ("numpy", "torch"), "numpy and torch loaded before the pins could be set"),
    ],
)
def test_where_a_pin_cannot_hold_it_says_why_and_sets_nothing(
    machine: str, flags: set[str], loaded: tuple[str, ...], reason: str
) -> None:
    environ: dict[str, str] = {}
    problems = pin_training_numerics(environ, machine=machine, flags=flags, loaded=loaded)
    assert len(problems) == 1 and problems[0].startswith(reason)
    assert environ == {}


def test_cpu_flags_reads_the_flags_line(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n", encoding="utf-8")
    assert cpu_flags(info) == {"fpu", "sse2", "avx2", "fma"}
    assert cpu_flags(tmp_path / "missing") == set()


@pytest.mark.skipif(pin_training_numerics({}, loaded=()) != [], reason="the pins hold on x86-64 hosts with AVX2 only")
@pytest.mark.parametrize(
    ("caller", "capability_seen", "problems_seen"),
    [
        ({}, "AVX2", []),
        # the control: a caller's own choice wins, is reported, and torch runs it
        ({"ATEN_CPU_CAPABILITY": "default"}, "DEFAULT", ["ATEN_CPU_CAPABILITY=default set by the caller"]),
    ],
)
def test_in_a_fresh_process_torch_and_numpy_run_the_pinned_kernels(
    caller: dict[str, str], capability_seen: str, problems_seen: list[str]
) -> None:
    # the trainer's own order: pin, then import; torch must report AVX2 and OpenBLAS Haswell even
    # where the host has AVX-512 (the pins only name kernels every AVX2 host has)
    script = (
        "import os, json\n"
        "from extproc.tools.pinned_numerics import pin_training_numerics\n"
        "problems = pin_training_numerics(os.environ)\n"
        "import numpy, torch\n"
        "try:\n"
        "    from threadpoolctl import threadpool_info\n"
        "    blas = [i.get('architecture') for i in threadpool_info() if i.get('internal_api') == 'openblas']\n"
        "except ImportError:\n"
        "    blas = []\n"
        "print(json.dumps([problems, torch.backends.cpu.get_cpu_capability(), blas]))\n"
    )
    environ = {k: v for k, v in os.environ.items() if k not in PINS}
    environ["PYTHONPATH"] = str(REPO)
    environ.update(caller)
    out = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, check=True)
    problems, capability, blas = json.loads(out.stdout.strip().splitlines()[-1])
    assert [p.split(" (")[0] for p in problems] == problems_seen
    assert capability == capability_seen
    assert blas in ([], ["Haswell"])  # numpy's OpenBLAS, where threadpoolctl sees it
