from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from extproc.stack import free_port


def test_serve_with_an_invalid_policy_exits_1_with_the_diagnostics(tmp_path: Path) -> None:
    policy = tmp_path / "bad.yaml"
    policy.write_text("version: 1\nmodels: []\ndefault: {action: {type: route, models: [nope]}}\n")
    env = {
        **os.environ,
        "VSR_POLICY_PATH": str(policy),
        "VSR_SERVER__GRPC_PORT": str(free_port()),
        "VSR_SERVER__ADMIN_PORT": str(free_port()),
    }
    done = subprocess.run(
        [sys.executable, "-m", "extproc", "serve"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    records = [json.loads(line) for line in (done.stdout + done.stderr).splitlines() if line.startswith("{")]
    invalid = [r for r in records if r.get("msg") == "policy is invalid; not serving"]
    assert invalid and any("models" in p for p in invalid[0]["problems"])
    assert "Traceback" not in done.stdout + done.stderr
