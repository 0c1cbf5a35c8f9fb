"""A small real policy (text and image signals) in a temp file, and routers built from it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from extproc.router import Router
from extproc.settings import Settings
from tests.protocol.images_util import chat_with_images, data_uri, image_bytes

POLICY = """\
version: 1
aliases: [auto]
client_models: [general]
models:
  - {name: general, cluster: general, modalities: [text], context_window: 4096}
  - {name: vlm, cluster: vlm, modalities: [text, image]}
  - {name: secure, cluster: secure, modalities: [text, image]}
signals:
  - {name: has_image, type: modality, min_images: 1}
  - {name: code_words, type: keyword, keywords: [bug, exploit]}
  - {name: secret, type: secrets}
decisions:
  - name: security
    priority: 200
    when: {any: [{signal: secret}, {signal: code_words}]}
    action: {type: route, models: [secure]}
  - name: image
    priority: 100
    when: {signal: has_image}
    action: {type: route, models: [vlm]}
default:
  name: general
  action: {type: route, models: [general, vlm]}
"""

# The same policy with `exploit` questions no longer special and a new signal routing "poem" to vlm.
CHANGED = (
    POLICY.replace("keywords: [bug, exploit]", "keywords: [bug]")
    .replace("signals:\n", "signals:\n  - {name: poetry, type: keyword, keywords: [poem]}\n")
    .replace(
        "decisions:\n",
        "decisions:\n  - name: poetry\n    priority: 50\n    when: {signal: poetry}\n    action: {type: route, models: [vlm]}\n",
    )
)

VISION = POLICY.replace(
    "signals:\n",
    'signals:\n  - {name: scan, type: image_labels, labels: {xray: ["a chest x-ray"], car: ["a photo of a car"]}}\n',
).replace(
    "decisions:\n",
    "decisions:\n  - name: xray\n    priority: 300\n    when: {signal: scan, label: xray}\n    action: {type: route, models: [vlm]}\n",
)


def chat(text: str, model: str = "auto") -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": text}]}).encode()


def image_chat(text: str = "what is this?") -> bytes:
    return json.dumps(chat_with_images(data_uri(image_bytes("PNG", (24, 16))), text=text)).encode()


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture
def router(policy_file: Path) -> Iterator[Router]:
    settings = Settings.load(None, environ={}).model_copy(update={"policy_path": policy_file})
    built = Router.from_settings(settings)
    yield built
    built.close()
