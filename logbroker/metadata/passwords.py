"""RabbitMQ-compatible password hashes (`rabbit_password_hashing_*`).

A stored hash is base64(salt ++ H(salt ++ utf8(password))) with a 4-byte salt
and H = SHA-256 (RabbitMQ's default), SHA-512, or MD5 (the legacy scheme, and
what RabbitMQ assumes when a user has no `hashing_algorithm`). This module is
pure: `hash_password` takes the salt as an argument and the shell supplies
`os.urandom(4)`. Verification accepts all three, so users exported from a
RabbitMQ definitions file log in unchanged, and compares in constant time.
An empty hash, as RabbitMQ's `--password-hash ""`, disables password login.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Final

SHA256: Final = "rabbit_password_hashing_sha256"
SHA512: Final = "rabbit_password_hashing_sha512"
MD5: Final = "rabbit_password_hashing_md5"
SALT_BYTES: Final = 4

_DIGESTS: Final = {SHA256: "sha256", SHA512: "sha512", MD5: "md5"}
HASHING_ALGORITHMS: Final = frozenset(_DIGESTS)


def normalize_algorithm(algorithm: str | None) -> str:
    """RabbitMQ treats a user without an algorithm as an MD5 (pre-3.6) user."""
    return algorithm or MD5


def _digest(algorithm: str, data: bytes) -> bytes:
    try:
        name = _DIGESTS[normalize_algorithm(algorithm)]
    except KeyError:
        raise ValueError(f"unknown password hashing algorithm {algorithm!r}") from None
    return hashlib.new(name, data).digest()


def hash_password(password: str, salt: bytes, algorithm: str = SHA256) -> str:
    """The stored form of `password` under `algorithm`, salted with 4 bytes."""
    if len(salt) != SALT_BYTES:
        raise ValueError(f"the salt must be {SALT_BYTES} bytes, got {len(salt)}")
    digest = _digest(algorithm, salt + password.encode("utf-8"))
    return base64.b64encode(salt + digest).decode("ascii")


def verify_password(password: str, password_hash: str, algorithm: str | None) -> bool:
    """True when `password` produces `password_hash`; False for any malformed hash."""
    if not password_hash:
        return False
    try:
        stored = base64.b64decode(password_hash, validate=True)
        salt = stored[:SALT_BYTES]
        expected = _digest(normalize_algorithm(algorithm), salt + password.encode("utf-8"))
    except (binascii.Error, ValueError):
        return False
    if len(stored) != SALT_BYTES + len(expected):
        return False
    return hmac.compare_digest(stored[SALT_BYTES:], expected)
