"""WeCom callback crypto: the documented vector, and a cross-check against the fake's
independent implementation of the documented algorithm (cryptography primitives,
tests/fakes/wecom_kf_server.py), in both directions."""

from __future__ import annotations

import base64
import struct

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from channels.wecom_kf.crypto import CallbackCrypto, DecryptError, SignatureError, signature
from tests.fakes.wecom_kf_server import (
    CALLBACK_TOKEN,
    CORP_ID,
    ENCODING_AES_KEY,
    wx_decrypt,
    wx_encrypt,
    wx_sign,
)

# The vector of PROTOCOLS.md (WeCom section).
VECTOR_TS = "1409659589"
VECTOR_NONCE = "263014780"
VECTOR_ECHOSTR = (
    "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="
)
VECTOR_SIGNATURE = "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3"
VECTOR_PLAIN = "1616140317555161061"


def crypto(receive_id: str = CORP_ID) -> CallbackCrypto:
    return CallbackCrypto(CALLBACK_TOKEN, ENCODING_AES_KEY, receive_id)


def test_documented_vector_signature_and_plaintext() -> None:
    assert signature(CALLBACK_TOKEN, VECTOR_TS, VECTOR_NONCE, VECTOR_ECHOSTR) == VECTOR_SIGNATURE
    assert wx_sign(CALLBACK_TOKEN, VECTOR_TS, VECTOR_NONCE, VECTOR_ECHOSTR) == VECTOR_SIGNATURE
    c = crypto()
    c.verify(VECTOR_SIGNATURE, VECTOR_TS, VECTOR_NONCE, VECTOR_ECHOSTR)
    assert c.decrypt(VECTOR_ECHOSTR) == VECTOR_PLAIN
    assert wx_decrypt(VECTOR_ECHOSTR) == (VECTOR_PLAIN, CORP_ID)


@pytest.mark.parametrize("message", ["", "x", "a" * 11, "a" * 12, "消息" * 40, "<xml>…</xml>" * 9])
def test_ours_and_the_independent_implementation_agree(message: str) -> None:
    c = crypto()
    assert wx_decrypt(c.encrypt(message)) == (message, CORP_ID)
    assert c.decrypt(wx_encrypt(message)) == message


def test_padding_is_to_32_byte_blocks() -> None:
    # 20 + 1 + 18 = 39 bytes of plaintext: padded with 25 bytes to 64. A 16-byte
    # PKCS#7 unpadder refuses a pad byte of 25; ours must not.
    raw = base64.b64decode(crypto().encrypt("x"))
    assert len(raw) == 64
    key = base64.b64decode(ENCODING_AES_KEY + "=")
    dec = Cipher(algorithms.AES(key), modes.CBC(key[:16])).decryptor()
    plain = dec.update(raw) + dec.finalize()
    assert plain[-1] == 25
    assert struct.unpack(">I", plain[16:20]) == (1,)
    assert crypto().decrypt(base64.b64encode(raw).decode()) == "x"


def test_wrong_receive_id_is_refused() -> None:
    with pytest.raises(DecryptError, match="receive id"):
        crypto().decrypt(wx_encrypt("hello", receive_id="wwOTHERCORP"))


@pytest.mark.parametrize(
    "payload",
    ["not base64!!", base64.b64encode(b"short").decode(), base64.b64encode(bytes(64)).decode()],
)
def test_garbage_is_a_decrypt_error(payload: str) -> None:
    with pytest.raises(DecryptError):
        crypto().decrypt(payload)


def test_bad_signature_is_refused() -> None:
    with pytest.raises(SignatureError):
        crypto().verify("0" * 40, VECTOR_TS, VECTOR_NONCE, VECTOR_ECHOSTR)
    with pytest.raises(SignatureError):  # the signature covers the encrypted text
        crypto().verify(VECTOR_SIGNATURE, VECTOR_TS, VECTOR_NONCE, VECTOR_ECHOSTR[:-4] + "AAA=")
