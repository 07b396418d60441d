"""GIVEN (read it, do not edit it): the hardware binding's fingerprint and its k-of-n matcher.

A machine is described by components (name -> value as read from the system: "machine-id",
"dmi-uuid", "cpu", "mac:eth0", "disk:nvme0n1", "gpu:0", ...). A license never carries the values:
it carries salted digests of them (`digest_parts`), so a license file does not leak a customer's
serial numbers, and a digest made for one product does not match another's. The license binds
{"k": k, "parts": {name: digest}}: the machine matches when at least k of those parts have the
same digest here, so one replaced disk or NIC does not lock a customer out (the phase 11
fingerprint kata builds the component readers and argues k; this is the matcher only).
"""

from __future__ import annotations

import hashlib
from typing import Any


def digest(name: str, value: str, salt: str) -> str:
    """Hex SHA-256 of salt, name and value, each length-prefixed (no two inputs collide by
    moving bytes between fields)."""
    h = hashlib.sha256()
    for part in (salt, name, value):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(4, "big") + data)
    return h.hexdigest()


def digest_parts(components: dict[str, str], salt: str) -> dict[str, str]:
    """{name: digest(name, value, salt)} for every component of this machine; the salt is the
    license's product."""
    return {name: digest(name, value, salt) for name, value in sorted(components.items())}


def valid_binding(binding: Any) -> bool:
    """A binding is {"k": int, "parts": {str: str}} with 1 <= k <= len(parts)."""
    if type(binding) is not dict or set(binding) != {"k", "parts"}:
        return False
    k, parts = binding["k"], binding["parts"]
    if type(k) is not int or type(parts) is not dict or not 1 <= k <= len(parts):
        return False
    return all(type(a) is str and type(b) is str for a, b in parts.items())


def matches(binding: dict[str, Any], here: dict[str, str]) -> bool:
    """True when at least binding["k"] of binding["parts"] have the same digest in `here`
    (this machine's digest_parts with the same salt)."""
    if not valid_binding(binding):
        return False
    same = sum(1 for name, d in binding["parts"].items() if here.get(name) == d)
    return same >= binding["k"]
