"""RabbitMQ password hashes.

Known vectors:
- MD5, password "simon", salt CA D5 08 9B -> "ytUIm8s3AnKsXQjptplKFytfVxI=": the worked
  example by Simon MacMullen (RabbitMQ) on rabbitmq-discuss, 2011-05-10
  (lists.rabbitmq.com/pipermail/rabbitmq-discuss/2011-May/012765.html).
- SHA-256, password "1" -> "y4xPTRVfzXg68sz9ALqeQzARam3CwnGo53xS752cDV5+Utzh": a hash
  exported from a RabbitMQ node with the default hashing, quoted in the Stack Overflow
  question "How to generate password_hash for RabbitMQ Management HTTP API" (41306350).
- SHA-512: no published vector was found, so the test constructs one from the
  algorithm (the same salt ++ H(salt ++ password) scheme) and checks the layout.
"""

from __future__ import annotations

import base64
import hashlib

import pytest

from logbroker.metadata.passwords import MD5, SHA256, SHA512, hash_password, verify_password


def test_rabbitmq_md5_vector() -> None:
    assert hash_password("simon", bytes.fromhex("CAD5089B"), MD5) == "ytUIm8s3AnKsXQjptplKFytfVxI="
    assert verify_password("simon", "ytUIm8s3AnKsXQjptplKFytfVxI=", MD5)
    assert not verify_password("simone", "ytUIm8s3AnKsXQjptplKFytfVxI=", MD5)


def test_rabbitmq_sha256_vector() -> None:
    stored = "y4xPTRVfzXg68sz9ALqeQzARam3CwnGo53xS752cDV5+Utzh"
    assert verify_password("1", stored, SHA256)
    assert not verify_password("2", stored, SHA256)
    salt = base64.b64decode(stored)[:4]
    assert hash_password("1", salt) == stored  # SHA-256 is the default


def test_sha512_constructed_from_the_algorithm() -> None:
    salt = b"\x90\x8d\xc6\x0a"
    stored = hash_password("s3cr3t", salt, SHA512)
    raw = base64.b64decode(stored)
    assert raw == salt + hashlib.sha512(salt + b"s3cr3t").digest()
    assert verify_password("s3cr3t", stored, SHA512)
    assert not verify_password("s3cr3t", stored, SHA256)


def test_utf8_passwords() -> None:
    stored = hash_password("pässwörd✓", b"abcd")
    assert verify_password("pässwörd✓", stored, SHA256)


def test_users_without_an_algorithm_are_md5_users() -> None:
    assert verify_password("simon", "ytUIm8s3AnKsXQjptplKFytfVxI=", None)
    assert verify_password("simon", "ytUIm8s3AnKsXQjptplKFytfVxI=", "")


@pytest.mark.parametrize(
    ("stored", "algorithm"),
    [
        ("", SHA256),  # empty hash: password login disabled
        ("not base64!", SHA256),
        ("ytUIm8s3AnKsXQjptplKFytfVxI=", SHA256),  # an MD5 hash under SHA-256: wrong length
        ("ytUIm8s3AnKsXQjptplKFytfVxI=", "rabbit_password_hashing_rot13"),
    ],
)
def test_malformed_or_mismatched_hashes_never_verify(stored: str, algorithm: str) -> None:
    assert not verify_password("simon", stored, algorithm)


def test_salt_must_be_four_bytes() -> None:
    with pytest.raises(ValueError):
        hash_password("x", b"abc")
    with pytest.raises(ValueError):
        hash_password("x", b"abcd", "rabbit_password_hashing_rot13")
