"""The load script's short mode, in CI: 50 and 200 concurrent clients mixing text and image
requests through the real Envoy + ext_proc server for a few seconds each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_short_load_has_no_errors_no_5xx_no_leaks(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "load.py"), "--short", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    print(run.stdout[-4000:], run.stderr[-4000:])
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["problems"] == []
    levels = {level["clients"]: level for level in report["levels"]}
    assert set(levels) == {50, 200}
    for level in levels.values():
        assert level["requests"] > 100
        assert level["image_requests"] > 0 and level["text_requests"] > 0
        assert level["errors"] == 0 and level["status_5xx"] == 0
        assert level["misrouted"] == 0  # no passport image at a non-restricted model, overload or not
        assert level["ext_proc_streams_after"] == 0
        assert level["rss_end_mib"] - level["rss_peak_before_mib"] < 64  # no new high-water mark: no leak
        assert level["p99_ms"] < 10_000
    for line in ("clients=50", "clients=200", "p50=", "p99=", "rss_start=", "rss_end=", "req/s=", "shed=", "fail_safe="):
        assert line in run.stdout
