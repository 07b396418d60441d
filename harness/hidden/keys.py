"""The hidden-test key: 32 random bytes, given as 64 hex digits or base64.

Where it comes from, first match wins: ``KATA_HIDDEN_KEY`` (the key itself, e.g. a CI secret),
then ``KATA_HIDDEN_KEY_FILE`` (a file holding it). The sandbox scrubs both variables and masks
the file from learner code (``harness.sandbox``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

KEY_ENV = "KATA_HIDDEN_KEY"
KEY_FILE_ENV = "KATA_HIDDEN_KEY_FILE"
KEY_BYTES = 32  # AES-256


class KeyProblem(ValueError):
    """A key that is present but unusable; the message names where it came from."""


@dataclass(frozen=True)
class Key:
    secret: bytes
    origin: str  # "KATA_HIDDEN_KEY", "KATA_HIDDEN_KEY_FILE=/path", "--key-file /path"
    path: Path | None = None  # the key file, when it came from one (a secret path)

    @property
    def fingerprint(self) -> str:
        """A public name for the key (safe to print and to store in a bundle's header)."""
        return hashlib.sha256(b"gpu-katas hidden key\0" + self.secret).hexdigest()[:16]


def parse_key(text: str, origin: str) -> bytes:
    """The key bytes from `text`: 64 hex digits, or base64 (standard or URL-safe) of 32 bytes."""
    text = text.strip()
    if re.fullmatch(r"[0-9a-fA-F]{64}", text):
        return bytes.fromhex(text)
    try:
        raw = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == KEY_BYTES:
        return raw
    shown = f"{len(text)} characters" if text else "empty"
    raise KeyProblem(
        f"{origin}: not a hidden-test key ({shown}); expected 64 hex digits or base64 of "
        f"{KEY_BYTES} bytes, as written by `kata publish --new-key PATH`"
    )


def read_key_file(path: Path, origin: str) -> Key:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise KeyProblem(f"{origin}: cannot read the key file: {e.strerror or e}") from None
    return Key(parse_key(text, origin), origin, path.resolve())


def load_key(env: Mapping[str, str] | None = None) -> Key | None:
    """The key from the environment, or None when neither variable is set."""
    env = os.environ if env is None else env
    if env.get(KEY_ENV):
        return Key(parse_key(env[KEY_ENV], KEY_ENV), KEY_ENV)
    if env.get(KEY_FILE_ENV):
        path = Path(env[KEY_FILE_ENV])
        return read_key_file(path, f"{KEY_FILE_ENV}={path}")
    return None


def new_key() -> Key:
    return Key(os.urandom(KEY_BYTES), "a new key")


def write_key_file(path: Path, key: Key) -> None:
    """Write `key` as hex to a new file readable by its owner only; never overwrite one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key.secret.hex() + "\n")
