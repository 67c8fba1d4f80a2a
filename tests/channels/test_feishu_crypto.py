"""Feishu event decryption and signature checks."""

from __future__ import annotations

import hashlib

import pytest

from channels.feishu.crypto import DecryptError, decrypt, sign, verify_signature
from tests.fakes.feishu_server import encrypt


def test_official_decryption_vector() -> None:
    assert decrypt("test key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=") == "hello world"


def test_round_trip_with_an_independent_encryptor() -> None:
    text = '{"challenge":"ü-挑战","type":"url_verification"}' * 5
    assert decrypt("k3y", encrypt("k3y", text)) == text


@pytest.mark.parametrize("payload", ["not base64!!", "aGVsbG8=", ""])
def test_garbage_is_rejected(payload: str) -> None:
    with pytest.raises(DecryptError):
        decrypt("test key", payload)


def test_wrong_key_is_rejected() -> None:
    with pytest.raises(DecryptError):
        decrypt("another key", encrypt("the key", "hello world, long enough to pad"))


def test_signature_matches_documented_formula_and_any_header_case() -> None:
    body = b'{"encrypt":"abc"}'
    expected = hashlib.sha256(b"1700000000" + b"nonce1" + b"key" + body).hexdigest()
    assert sign("1700000000", "nonce1", "key", body) == expected
    for names in (
        ("X-Lark-Request-Timestamp", "X-Lark-Request-Nonce", "X-Lark-Signature"),
        ("x-lark-request-timestamp", "x-lark-request-nonce", "x-lark-signature"),
    ):
        headers = dict(zip(names, ("1700000000", "nonce1", expected), strict=True))
        assert verify_signature(headers, "key", body)
        assert not verify_signature(headers, "key", body + b" ")
        assert not verify_signature(headers, "other", body)


def test_missing_signature_headers_fail() -> None:
    assert not verify_signature({}, "key", b"{}")
