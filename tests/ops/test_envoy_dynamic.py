"""The Envoy config as file-based dynamic resources (`extproc envoy-config --xds-dir`): a policy
that adds a model reaches a running Envoy by rewriting cds.yaml / lds.yaml, with no restart.
Tested with the real Envoy binary: its admin port shows the new cluster and route, and the CDS /
LDS update counters, while the process stays the same."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from extproc.ops.envoy_config import EnvoyOptions, envoy_binary, render
from extproc.ops.envoy_config.dynamic import BOOTSTRAP_NAME, CDS_NAME, LDS_NAME, split_dynamic, write_dynamic
from extproc.ops.stack import free_port

MODEL = '  - {{name: {name}, cluster: {cluster}, address: "127.0.0.1:{port}"}}\n'
POLICY = """version: 1
models:
{models}default:
  action: {{type: route, models: [model-a]}}
"""


def policy(path: Path, *models: tuple[str, str]) -> Path:
    rows = "".join(MODEL.format(name=n, cluster=c, port=free_port()) for n, c in models)
    path.write_text(POLICY.format(models=rows), encoding="utf-8")
    return path


def admin_text(port: int, path: str) -> str:
    return httpx.get(f"http://127.0.0.1:{port}{path}", timeout=5).text


def wait_for(check: object, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


def counter(port: int, name: str) -> int:
    match = re.search(rf"^{re.escape(name)}: (\d+)$", admin_text(port, f"/stats?filter={name}"), re.MULTILINE)
    return int(match.group(1)) if match else -1


@pytest.fixture
def options() -> EnvoyOptions:
    return EnvoyOptions(listener_port=free_port(), admin_port=free_port(), ext_proc_port=free_port())


@pytest.fixture
def running_envoy(tmp_path: Path, options: EnvoyOptions) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    xds = tmp_path / "xds"
    full, _ = render(policy(tmp_path / "a.yaml", ("model-a", "ca")), options)
    write_dynamic(full, xds)
    log = (tmp_path / "envoy.log").open("wb")
    proc = subprocess.Popen(
        [str(envoy_binary()), "-c", str(xds / BOOTSTRAP_NAME), "--use-dynamic-base-id", "--log-level", "warning"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        assert wait_for(lambda: admin_text(options.admin_port, "/ready").strip() == "LIVE"), (
            tmp_path / "envoy.log"
        ).read_text()
        yield proc, xds
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def test_a_new_model_reaches_the_running_envoy_without_a_restart(
    running_envoy: tuple[subprocess.Popen[bytes], Path], options: EnvoyOptions, tmp_path: Path
) -> None:
    proc, xds = running_envoy
    port = options.admin_port
    assert "ca::" in admin_text(port, "/clusters") and "cc::" not in admin_text(port, "/clusters")
    cds_before = counter(port, "cluster_manager.cds.update_success")
    # the policy gains a model: its cluster and its routes, written as the running Envoy reads them
    full, _ = render(policy(tmp_path / "b.yaml", ("model-a", "ca"), ("model-c", "cc")), options)
    changed = write_dynamic(full, xds)
    assert sorted(p.name for p in changed) == [CDS_NAME, LDS_NAME]  # the bootstrap stays
    assert wait_for(lambda: "cc::" in admin_text(port, "/clusters")), admin_text(port, "/clusters")
    # the listener's new routes: LDS replaced the listener in place (its dump holds the route)
    assert wait_for(lambda: "vsr-cc" in admin_text(port, "/config_dump?resource=dynamic_listeners"))
    assert counter(port, "cluster_manager.cds.update_success") > cds_before
    assert proc.poll() is None  # the same process: no restart
    assert "LIVE" in admin_text(port, "/ready")
    # writing the same render again changes nothing (no spurious reload)
    assert write_dynamic(full, xds) == []


def test_a_bootstrap_change_is_refused_and_the_files_are_whole(tmp_path: Path, options: EnvoyOptions) -> None:
    path = policy(tmp_path / "a.yaml", ("model-a", "ca"))
    full, _ = render(path, options)
    xds = tmp_path / "xds"
    write_dynamic(full, xds)
    moved = EnvoyOptions(
        listener_port=options.listener_port, admin_port=free_port(), ext_proc_port=options.ext_proc_port
    )
    with pytest.raises(ValueError, match="restart Envoy"):
        write_dynamic(render(path, moved)[0], xds)
    files = split_dynamic(full, xds)
    assert str(xds.resolve() / CDS_NAME) in files[BOOTSTRAP_NAME] and "static_resources" not in files[BOOTSTRAP_NAME]
    assert not list(xds.glob(".*.tmp"))  # no temporary file left behind
    ok = subprocess.run(
        [str(envoy_binary()), "--mode", "validate", "-c", str(xds / BOOTSTRAP_NAME), "--use-dynamic-base-id"],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_the_cli_writes_and_updates_the_dynamic_files(tmp_path: Path) -> None:
    from extproc.cli import main

    xds = tmp_path / "xds"
    first = policy(tmp_path / "a.yaml", ("model-a", "ca"))
    assert (
        main(["envoy-config", "--policy", str(first), "--xds-dir", str(xds), "--admin", f"127.0.0.1:{free_port()}"])
        == 0
    )
    assert {p.name for p in xds.iterdir()} == {BOOTSTRAP_NAME, CDS_NAME, LDS_NAME}
    cds = (xds / CDS_NAME).read_text(encoding="utf-8")
    assert "name: ca" in cds and "name: cc" not in cds
