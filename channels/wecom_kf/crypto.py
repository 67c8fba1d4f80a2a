"""WeCom callback crypto (the WXBizMsgCrypt scheme): signatures and AES payloads.

    key        = base64decode(EncodingAESKey + "=")   43 chars → 32 bytes
    cipher     = AES-256-CBC, IV = key[:16], PKCS#7 padding to 32-byte blocks
    plaintext  = 16 random bytes + 4-byte big-endian length + message + receive id
    signature  = hex SHA-1 of the sorted concatenation of token, timestamp, nonce, encrypt

The receive id of a customer-service callback is the corp id; a payload for
another corp is refused. Nothing here logs or puts a key into an exception.

    CallbackCryptoError
    ├── SignatureError   msg_signature does not match
    └── DecryptError     not base64, wrong key, bad padding or length, wrong receive id
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

__all__ = [
    "BLOCK",
    "CallbackCrypto",
    "CallbackCryptoError",
    "DecryptError",
    "SignatureError",
    "aes_key",
    "signature",
]

BLOCK = 32  # WeCom pads to 32 bytes, not AES's 16


class CallbackCryptoError(ValueError):
    pass


class SignatureError(CallbackCryptoError):
    pass


class DecryptError(CallbackCryptoError):
    pass


def aes_key(encoding_aes_key: str) -> bytes:
    try:
        key = base64.b64decode(encoding_aes_key + "=", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError("encoding_aes_key is not base64") from exc
    if len(key) != 32:
        raise ValueError("encoding_aes_key does not decode to 32 bytes")
    return key


def signature(token: str, timestamp: str, nonce: str, encrypt: str) -> str:
    return hashlib.sha1("".join(sorted((token, timestamp, nonce, encrypt))).encode()).hexdigest()


class CallbackCrypto:
    """One corp's callback settings: check, decrypt and (for replies, tests) encrypt."""

    def __init__(self, token: str, encoding_aes_key: str, receive_id: str) -> None:
        self._token = token
        self._key = aes_key(encoding_aes_key)
        self._receive_id = receive_id

    def verify(self, msg_signature: str, timestamp: str, nonce: str, encrypt: str) -> None:
        expected = signature(self._token, timestamp, nonce, encrypt)
        if not hmac.compare_digest(expected, msg_signature.strip().lower()):
            raise SignatureError("msg_signature mismatch")

    def decrypt(self, encrypt: str) -> str:
        """The message inside `encrypt`, once its receive id proved it is for us."""
        try:
            raw = base64.b64decode(encrypt, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise DecryptError("payload is not valid base64") from exc
        if not raw or len(raw) % 16:
            raise DecryptError("payload has an invalid length")
        decryptor = Cipher(algorithms.AES(self._key), modes.CBC(self._key[:16])).decryptor()
        padded = decryptor.update(raw) + decryptor.finalize()
        pad = padded[-1]
        if not 1 <= pad <= BLOCK or padded[-pad:] != bytes([pad]) * pad:
            raise DecryptError("payload does not decrypt under the configured key")
        plain = padded[:-pad]
        if len(plain) < 20:
            raise DecryptError("payload is too short")
        (length,) = struct.unpack(">I", plain[16:20])
        if 20 + length > len(plain):
            raise DecryptError("payload length field is out of range")
        receive_id = plain[20 + length :]
        if not hmac.compare_digest(receive_id, self._receive_id.encode()):
            raise DecryptError("payload is for another receive id (corp id)")
        try:
            return plain[20 : 20 + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecryptError("payload is not UTF-8") from exc

    def encrypt(self, message: str, random16: bytes | None = None) -> str:
        body = message.encode("utf-8")
        plain = (random16 or os.urandom(16)) + struct.pack(">I", len(body))
        plain += body + self._receive_id.encode()
        pad = BLOCK - len(plain) % BLOCK
        plain += bytes([pad]) * pad
        encryptor = Cipher(algorithms.AES(self._key), modes.CBC(self._key[:16])).encryptor()
        return base64.b64encode(encryptor.update(plain) + encryptor.finalize()).decode()

    def sign(self, timestamp: str, nonce: str, encrypt: str) -> str:
        return signature(self._token, timestamp, nonce, encrypt)
