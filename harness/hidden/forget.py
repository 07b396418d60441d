"""What a sandbox child forgets of the hidden tests before learner code runs there.

The hidden plugin's answer to :func:`harness.hookspec.pytest_kata_forget_secrets`: a child is
forked from the harness, so it starts with the key and the decrypted tests of every kata. It
overwrites them in place (:mod:`harness.sandbox.secrets` does the overwriting) and keeps only
what the running kata's tests need. docs/integrity.md, "Sandbox", says what stays.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

from ..layout import mirror_of
from ..sandbox.secrets import scrub_memory, wipe_bytes, wipe_str
from .canonical import Source
from .memload import IMPORTER


def forget(source: Source, kata_dir: Path, root: Path) -> None:
    """Wipe the key and the hidden tests a child running `kata_dir` will not need."""
    key = source.key
    if key is not None:
        scrub_memory(written_forms(key.secret))  # copies left by parsing, decoding, the cipher
        wipe_bytes(key.secret)
        source.key = None
    this = source.rel(kata_dir)
    for rel, tests in list(source.katas.items()):
        if rel != this:
            for text in tests.hidden.values():
                wipe_str(text)
            tests.hidden.clear()
    blank_hidden_sources(Path(this), root)


def written_forms(secret: bytes) -> list[bytes]:
    """The ways the key is written: raw, hex (either case), base64 (standard, URL-safe)."""
    forms = [secret, secret.hex().encode(), secret.hex().upper().encode()]
    forms += [base64.b64encode(secret), base64.urlsafe_b64encode(secret)]
    return forms


def blank_hidden_sources(rel: Path, root: Path) -> None:
    """Hidden test modules already imported need no source any more, nor do other katas';
    a module of this kata (`rel`, relative to `root`) not imported yet (a sibling a test imports
    late) keeps its own."""
    kata = root / rel
    mirror = mirror_of(kata)
    mine = () if not rel.parts else (kata, mirror) if mirror is not None else (kata,)
    for name, src in list(IMPORTER.sources.items()):
        if src.show_source or not src.text:
            continue  # public tests: tracebacks quote them; nothing secret
        ours = any(d == src.path or d in src.path.parents for d in mine)
        if name in sys.modules or not ours:
            wipe_str(src.text)
            src.text = ""
