from __future__ import annotations

from pathlib import Path

import pytest

from extproc.cli import main
from extproc.settings import Settings, SettingsError


def test_env_overrides_are_typed_and_nested() -> None:
    settings = Settings.load(
        None, environ={"VSR_SERVER__GRPC_PORT": "50052", "VSR_SERVER__DEBUG_HEADERS": "true", "HOME": "/x"}
    )
    assert settings.server.grpc_port == 50052 and settings.server.debug_headers is True


def test_env_overrides_the_file(tmp_path: Path) -> None:
    file = tmp_path / "settings.yaml"
    file.write_text("server: {grpc_port: 1000, admin_port: 2000}\n")
    settings = Settings.load(file, environ={"VSR_SERVER__GRPC_PORT": "3000"})
    assert (settings.server.grpc_port, settings.server.admin_port) == (3000, 2000)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"VSR_SERVER__GRPC_PORTT": "1"}, "server.grpc_portt (VSR_SERVER__GRPC_PORTT): unknown setting"),
        ({"VSR_DISPATCH__REQUEST_DEADLINE_MS": "soon"}, "VSR_DISPATCH__REQUEST_DEADLINE_MS"),
        ({"VSR_SERVER__GRPC_PORT__X": "1"}, "server.grpc_port (VSR_SERVER__GRPC_PORT)"),
    ],
)
def test_bad_settings_are_one_clear_error(environ: dict[str, str], expected: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.load(None, environ=environ)
    assert expected in str(caught.value)


def test_the_cli_reports_bad_settings_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VSR_LIMITS__MAX_IMAGES", "many")
    assert main(["check", "policies/default.yaml"]) == 2
    err = capsys.readouterr().err
    assert "invalid settings" in err and "VSR_LIMITS__MAX_IMAGES" in err and "Traceback" not in err
    monkeypatch.delenv("VSR_LIMITS__MAX_IMAGES")
    missing = tmp_path / "nope.yaml"
    assert main(["--settings", str(missing), "check", "policies/default.yaml"]) == 2
    assert "cannot read settings file" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("server: [unclosed\n")
    assert main(["--settings", str(broken), "check", "policies/default.yaml"]) == 2
    assert "not valid YAML" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("environ", "expected", "not_expected"),
    [
        # A rule on one setting names that setting, not its section (and never shows the secret).
        (
            {"VSR_SERVER__ADMIN_TOKEN": "short"},
            "server.admin_token (VSR_SERVER__ADMIN_TOKEN): must be at least 16 characters",
            "server (VSR_SERVER)",
        ),
        # A rule over two settings names both, without dumping the section's values.
        (
            {"VSR_SERVER__ADMIN_TOKEN": "a" * 20, "VSR_SERVER__ADMIN_TOKEN_FILE": "/nonexistent"},
            "server.admin_token (VSR_SERVER__ADMIN_TOKEN) and server.admin_token_file",
            "aaaaaaaaaaaaaaaaaaaa",
        ),
    ],
)
def test_a_bad_setting_is_named_not_its_section(environ: dict[str, str], expected: str, not_expected: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.load(None, environ=environ)
    assert expected in str(caught.value)
    assert not_expected not in str(caught.value) and "Value error" not in str(caught.value)
