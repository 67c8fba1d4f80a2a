"""Feishu event decryption and request-signature checks (webhook mode).

Encrypted bodies are `{"encrypt": base64(IV + AES-256-CBC(plaintext))}` with
key = SHA-256(encrypt_key) and PKCS7 padding on 16-byte blocks. Signatures are
hex SHA-256(timestamp + nonce + encrypt_key + raw body). Nothing here logs or
puts a key into an exception message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = [
    "NONCE_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "DecryptError",
    "decrypt",
    "sign",
    "verify_signature",
]

TIMESTAMP_HEADER = "x-lark-request-timestamp"
NONCE_HEADER = "x-lark-request-nonce"
SIGNATURE_HEADER = "x-lark-signature"


class DecryptError(ValueError):
    """The payload is not a valid encryption under the configured key."""


def decrypt(encrypt_key: str, data: str) -> str:
    """Decrypt one `encrypt` field to its UTF-8 plaintext."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise DecryptError("encrypted payload is not valid base64") from exc
    if len(raw) < 32 or len(raw) % 16:
        raise DecryptError("encrypted payload has an invalid length")
    key = hashlib.sha256(encrypt_key.encode("utf-8")).digest()
    decryptor = Cipher(algorithms.AES(key), modes.CBC(raw[:16])).decryptor()
    padded = decryptor.update(raw[16:]) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    try:
        plain = unpadder.update(padded) + unpadder.finalize()
        return plain.decode("utf-8")
    except ValueError as exc:  # bad padding or not UTF-8: wrong key
        raise DecryptError("payload does not decrypt under the configured key") from exc


def sign(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    digest = hashlib.sha256((timestamp + nonce + encrypt_key).encode("utf-8", "surrogateescape"))
    digest.update(body)
    return digest.hexdigest()


def verify_signature(headers: Mapping[str, str], encrypt_key: str, body: bytes) -> bool:
    """Check the X-Lark-* headers against `body`; header names in any case."""
    lowered = {k.lower(): v for k, v in headers.items()}
    timestamp = lowered.get(TIMESTAMP_HEADER)
    nonce = lowered.get(NONCE_HEADER)
    signature = lowered.get(SIGNATURE_HEADER)
    if not timestamp or not nonce or not signature:
        return False
    expected = sign(timestamp, nonce, encrypt_key, body)
    # bytes: compare_digest refuses a str with non-ASCII characters (a TypeError,
    # i.e. a 500 instead of the 401 a forged header deserves)
    given = signature.strip().lower().encode("utf-8", "surrogateescape")
    return hmac.compare_digest(expected.encode(), given)
