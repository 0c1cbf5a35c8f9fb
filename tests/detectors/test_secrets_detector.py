"""Secrets detector: each credential kind, the placeholders and code that are not secrets."""

from __future__ import annotations

import base64
import json

import pytest

from extproc.detectors.secrets import SECRET_KINDS, find_secrets


def b64url(obj: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


JWT = (
    b64url({"alg": "HS256", "typ": "JWT"})
    + "."
    + b64url({"sub": "1234", "name": "x"})
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n4lgOEePzNm0tRgeLezV6ffAt0gunVTLw\n"
    "-----END RSA PRIVATE KEY-----"
)


def found(text: str) -> list[tuple[str, str]]:
    return [(f.kind, text[f.start : f.end]) for f in find_secrets(text)]


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("key AKIAIOSFODNN7EXAMPLE here", "aws_access_key", "AKIAIOSFODNN7EXAMPLE"),
        ("ASIAY34FZKBOKMUTVV7A", "aws_access_key", "ASIAY34FZKBOKMUTVV7A"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_key",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        (
            '{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}',
            "aws_secret_key",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        (
            "# aws\nsecret_key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_key",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        ),
        (
            "token ghp_aBcD1234EfGh5678IjKl9012MnOp3456QrSt ok",
            "github_token",
            "ghp_aBcD1234EfGh5678IjKl9012MnOp3456QrSt",
        ),
        ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "github_token", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
        ("ghs_16C7e42F292c6912E7710c838347Ae178B4a", "github_token", "ghs_16C7e42F292c6912E7710c838347Ae178B4a"),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
            "github_token",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF",
        ),
        (
            "SLACK=xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "slack_token",
            "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        ),
        (
            "xoxp-1234567890-1234567890-1234567890-abcdef1234567890",
            "slack_token",
            "xoxp-1234567890-1234567890-1234567890-abcdef1234567890",
        ),
        (
            "OPENAI_API_KEY=sk-proj-Ab3dEf5hIj7lMn9pQr1tUv3xYz5Ab7dE",
            "openai_key",
            "sk-proj-Ab3dEf5hIj7lMn9pQr1tUv3xYz5Ab7dE",
        ),
        (
            "key: sk-Ab3dEf5hIj7lMn9pQr1tT3BlbkFJuV3xYz5Ab7dEf9hIj1k",
            "openai_key",
            "sk-Ab3dEf5hIj7lMn9pQr1tT3BlbkFJuV3xYz5Ab7dEf9hIj1k",
        ),
        (f"here:\n{PEM}\nend", "private_key", PEM),
        (f"Authorization: Bearer {JWT}", "jwt", JWT),
        ('password = "Xk9#mP2$vL8qR4nT"', "high_entropy_assignment", "Xk9#mP2$vL8qR4nT"),
        ("DB_PASSWORD=Zq8rT2vX9wLm4Kp", "high_entropy_assignment", "Zq8rT2vX9wLm4Kp"),
        ('"api_key": "9fA2kLq7Zx1Vb3Nm8Qw4"', "high_entropy_assignment", "9fA2kLq7Zx1Vb3Nm8Qw4"),
        ("client_secret: aB3dE5gH7jK9mN1p", "high_entropy_assignment", "aB3dE5gH7jK9mN1p"),
    ],
)
def test_secret_found(text: str, kind: str, value: str) -> None:
    assert found(text) == [(kind, value)]
    (f,) = find_secrets(text)
    assert value not in f.redacted
    assert f.redacted.startswith(kind)


def test_pem_without_end_marker_still_found() -> None:
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ"
    (f,) = find_secrets(text)
    assert f.kind == "private_key" and f.score < 0.99


def test_specific_kind_wins_over_generic_assignment() -> None:
    text = "api_key = 'sk-proj-Ab3dEf5hIj7lMn9pQr1tUv3xYz5Ab7dE'"
    assert [f.kind for f in find_secrets(text)] == ["openai_key"]
    assert [f.kind for f in find_secrets(text, ["high_entropy_assignment"])] == ["high_entropy_assignment"]


@pytest.mark.parametrize(
    "text",
    [
        "AKIAIOSFODNN7EXAMPLEXX",  # too long: not a key id
        "xAKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}",
        "secret_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",  # no AWS context: generic at most
        "ghp_short",
        "risk-free investment with sk-learn",
        "sk-this-is-not-a-real-key-at-all-really",
        "xoxb-not-a-token",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIBIjANBgkq\n-----END CERTIFICATE-----",
        "eyJhbGciOi.not-a-jwt.x",
        "eyJub3RhbGciOiJ4In0.eyJzdWIiOiIxIn0.c2ln",  # header without "alg"
        "password = get_password()",
        "password = self.password",
        "DB_PASSWORD=hunter2",
        'api_key: "<your-api-key>"',
        'password: "changeme123"',
        "token = os.environ['TOKEN']",
        "token_count: 12345678",
        "keyboard: qwertyuiop",
        "The key: remember to be kind.",
        "commit 3f2a1b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a",
        "uuid 550e8400-e29b-41d4-a716-446655440000",
        "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    ],
)
def test_not_a_secret(text: str) -> None:
    kinds = [f.kind for f in find_secrets(text)]
    if text.startswith("secret_key = wJalr"):
        assert "aws_secret_key" not in kinds
    else:
        assert kinds == []


# Anthropic-style keys: their own kind, never "openai_key".
ANTHROPIC_KEYS = [
    "sk-ant-api03-Xy7kQ2mN9pL4vR8sT1wZ3bC6dF0gH5jK2lM8nP4qR7sT1uV9wX3yZ6aB8cD0eF2gH4iJ6kL8mN0oP2qR4sT6uV8wX0yZ2aB4cD6eF8gA-Bc1AA",
    "sk-ant-admin01-Ab3dEf5hIj7lMn9pQr1tUv3xYz5Ab7dE_f9Hi1Kl3",
    "sk-ant-oat01-Qw3eRt5yUi7oPa9sDf1gHj3kLz5xCv7bNm9Qw1eR",
    "sk-ant-Ab3dEf5hIj7lMn9pQr1tUv3xYz5Ab7dE",  # no purpose tag
]


@pytest.mark.parametrize("key", ANTHROPIC_KEYS)
@pytest.mark.parametrize(
    "template", ["{k}", "ANTHROPIC_API_KEY={k}", 'client = Anthropic(api_key="{k}")', "key: {k}\n"]
)
def test_anthropic_key_has_its_own_kind(key: str, template: str) -> None:
    text = template.format(k=key)
    assert found(text) == [("anthropic_key", key)]
    (f,) = find_secrets(text)
    assert f.redacted.startswith("anthropic_key sk-ant-")
    assert key[12:] not in f.redacted
    assert f.score >= 0.9


@pytest.mark.parametrize("key", ANTHROPIC_KEYS)
def test_openai_kind_does_not_match_anthropic_keys(key: str) -> None:
    assert find_secrets(f"ANTHROPIC_API_KEY={key}", ["openai_key"]) == []
    assert find_secrets(f"ANTHROPIC_API_KEY={key}", ["anthropic_key"])[0].kind == "anthropic_key"


def test_anthropic_and_openai_keys_side_by_side() -> None:
    openai_key = "sk-proj-Ab3dEf5hIj7lMn9pQr1tUv3xYz5Ab7dE"
    anthropic_key = ANTHROPIC_KEYS[1]
    text = f"OPENAI_API_KEY={openai_key}\nANTHROPIC_API_KEY={anthropic_key}\n"
    assert found(text) == [("openai_key", openai_key), ("anthropic_key", anthropic_key)]
    assert "anthropic_key" in SECRET_KINDS


@pytest.mark.parametrize(
    "text",
    ["sk-ant-short", "sk-ant-api03-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "ask-ant-api03-Ab3dEf5hIj7lMn9pQr1tUv3xYz5Ab7dE"],
)
def test_anthropic_look_alikes(text: str) -> None:
    assert find_secrets(text) == []


def test_jwt_alg_none_needs_no_signature() -> None:
    token = b64url({"alg": "none"}) + "." + b64url({"sub": "1"}) + "."
    assert found(f"token {token} end") == [("jwt", token)]
    unsigned_hs = b64url({"alg": "HS256"}) + "." + b64url({"sub": "1"}) + "."
    assert find_secrets(f"token {unsigned_hs} end", ["jwt"]) == []


def test_kinds_filter_and_unknown() -> None:
    text = "AKIAIOSFODNN7EXAMPLE and ghp_aBcD1234EfGh5678IjKl9012MnOp3456QrSt"
    assert [f.kind for f in find_secrets(text, ["github_token"])] == ["github_token"]
    with pytest.raises(ValueError, match="unknown secret kind"):
        find_secrets(text, ["password"])
    assert set(SECRET_KINDS) >= {f.kind for f in find_secrets(text)}
