"""What the WebSocket channel accepts from a client: frames and identities.

`parse_frame` turns one text frame into a JSON object or raises
`ProtocolError` (never anything else: too deep, a number too long, not an
object); the channel answers an `error` frame and keeps the connection.
`TokenBook` decides who a connection is from the token in its `hello`: a
named token (`channels.websocket.tokens`) makes the connection that sender,
whatever its frames claim; the gateway's `auth_token` is the operator's and
may name the sender itself. The access policy (gateway.access.policy) then judges
that sender like any other channel's; nothing here is an allow-list.
Each identity is also a principal, the owner of the chats it opens
(`Identity.principal`; channels.base.ChatOwners): `token:<name>` for a named
token, `operator` for the gateway token and for every connection of a
gateway without tokens.

Files come in by `POST <path>/upload` (`receive_upload`), with the same token
as the `hello` (`Authorization: Bearer`) and the same origin rule as `/ws`.
The token is checked before the body is read, the body is read under
`MAX_UPLOAD_BYTES` as it streams, and its first bytes must match the type it
claims. A file is kept under the media directory in a folder of its
principal, named by 128 random bits (`Uploads`); a `message` frame names it in
`attachments`, and only a connection of the same principal can name it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from channels.base import origin_allowed
from channels.capped import CHUNK, BodyTooLarge, read_capped, save_bytes
from gateway.bus import Decision, MediaKind, MediaRef, button_command

__all__ = [
    "MAX_ATTACHMENTS",
    "MAX_UPLOAD_BYTES",
    "OPERATOR",
    "UPLOAD_TYPES",
    "Identity",
    "LocalChatOwners",
    "ProtocolError",
    "TokenBook",
    "UploadError",
    "Uploads",
    "approve_text",
    "parse_frame",
    "receive_upload",
    "safe_id",
]

OPERATOR = "operator"  # the principal of the gateway token (or of a gateway without tokens)

_REASON_MAX = 500


class ProtocolError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_frame(data: str) -> dict[str, Any]:
    try:
        frame = json.loads(data)
    except json.JSONDecodeError as exc:
        raise ProtocolError("bad_json", f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ProtocolError("bad_json", "JSON nested too deeply") from None
    except ValueError:  # e.g. an integer beyond sys.get_int_max_str_digits()
        raise ProtocolError("bad_json", "JSON value out of range (a number too long?)") from None
    if not isinstance(frame, dict):
        raise ProtocolError("bad_frame", "a frame must be a JSON object")
    return frame


def safe_id(value: Any) -> str | int | None:
    """A frame's `id` as it may be echoed in an error frame: short scalars only."""
    if isinstance(value, str) and len(value) <= 128:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63:
        return value
    return None


def approve_text(frame: dict[str, Any]) -> str:
    """An `approve` frame as the command text it stands for: `/approve N`,
    `/deny N` or `/deny N reason` (the gateway decides whether it is taken)."""
    approval_id, decision, reason = (
        frame.get("approval_id"),
        frame.get("decision"),
        frame.get("reason"),
    )
    if (
        not isinstance(approval_id, int)
        or isinstance(approval_id, bool)
        or not 0 < approval_id < 2**63
    ):
        raise ProtocolError("bad_frame", "approve.approval_id must be a positive integer")
    if decision not in (Decision.APPROVE.value, Decision.DENY.value):
        raise ProtocolError("bad_frame", 'approve.decision must be "approve" or "deny"')
    if reason is not None and (not isinstance(reason, str) or len(reason) > _REASON_MAX):
        raise ProtocolError("bad_frame", f"approve.reason must be a string of <= {_REASON_MAX}")
    text = button_command(Decision(decision), approval_id)
    if decision == Decision.DENY.value and reason and reason.strip():
        text += " " + " ".join(reason.split())
    return text


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a connection is. `sender`: fixed by a named token (frames may not
    claim another); None: the frame's `sender_id`, else the chat id."""

    sender: str | None = None

    @property
    def principal(self) -> str:
        """Who owns the chats this connection opens."""
        return OPERATOR if self.sender is None else f"token:{self.sender}"

    def sender_for(self, claimed: Any, chat_id: str) -> str:
        if claimed is not None and not isinstance(claimed, str):
            raise ProtocolError("bad_frame", "message.sender_id must be a string")
        if self.sender is not None:
            if claimed not in (None, "", self.sender):
                raise ProtocolError(
                    "forbidden_sender",
                    "this connection's token is for another sender; sender_id not accepted",
                )
            return self.sender
        return claimed or chat_id


class TokenBook:
    def __init__(self, master: str | None, named: Mapping[str, str]) -> None:
        self._master = master.encode() if master else None
        self._named = [(name, token.encode()) for name, token in named.items()]

    @property
    def required(self) -> bool:
        return self._master is not None or bool(self._named)

    def identify(self, token: Any) -> Identity | None:
        """The identity `token` gives, or None when it is wrong (or missing but needed)."""
        if not self.required:
            return Identity()
        if not isinstance(token, str):
            return None
        given = token.encode("utf-8", "surrogatepass")
        found: Identity | None = None
        # every token is compared, so the time taken does not say which matched
        for name, expected in self._named:
            if hmac.compare_digest(given, expected) and found is None:
                found = Identity(name)
        if self._master is not None and hmac.compare_digest(given, self._master):
            found = found or Identity()
        return found

    def legacy_owner(self, senders: Sequence[str]) -> str:
        """The owner of a chat used before owners were recorded: the named
        token that sent every stored message of it, else the operator."""
        names = {name for name, _ in self._named}
        if len(senders) == 1 and senders[0] in names:
            return Identity(senders[0]).principal
        return OPERATOR


class LocalChatOwners:
    """`ChatOwners` in memory, for a channel the runtime gave no store (tests,
    embedding): owners last as long as the process."""

    def __init__(self) -> None:
        self._owners: dict[str, str] = {}

    async def claim(
        self, chat_id: str, principal: str, legacy_owner: Callable[[Sequence[str]], str]
    ) -> str:
        return self._owners.setdefault(chat_id, principal)


# -- uploads (docs/PROTOCOL.md "Uploads") ------------------------------------------

MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # one file; the vision APIs take up to 20 MB
MAX_ATTACHMENTS = 4  # files named by one message
# the types a file may have, with the suffix it is kept under
UPLOAD_TYPES: Mapping[str, str] = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/csv": ".csv",
    "application/json": ".json",
}
_BY_SUFFIX = {suffix: mime for mime, suffix in UPLOAD_TYPES.items()}
_REF = re.compile(r"^[0-9a-f]{32}(\.[a-z]{2,4})$")
_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "application/pdf": (b"%PDF-",),
}


class UploadError(Exception):
    """An upload refused: `status` is the HTTP answer, `code` its short name."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def _content_matches(mime: str, data: bytes) -> bool:
    """Whether the bytes are what the type says: magic numbers for the binary
    types, UTF-8 without NUL for the text ones."""
    if mime == "image/webp":
        return data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    if mime in _MAGIC:
        return data.startswith(_MAGIC[mime])
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Upload:
    ref: str  # what a message's `attachments` names
    mime_type: str
    size: int


class Uploads:
    """Files clients uploaded, one folder per principal under `directory`."""

    def __init__(self, directory: Path, max_bytes: int = MAX_UPLOAD_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes

    def _folder(self, principal: str) -> Path:
        return self.directory / hashlib.sha256(principal.encode()).hexdigest()[:16]

    async def save(
        self,
        principal: str,
        content_type: str,
        chunks: AsyncIterable[bytes],
        declared: int | None,
    ) -> Upload:
        mime = content_type.split(";", 1)[0].strip().lower()
        suffix = UPLOAD_TYPES.get(mime)
        if suffix is None:
            raise UploadError(415, "unsupported_type", f"files of type {mime[:60]!r} are not taken")
        try:
            data = await read_capped(chunks, self.max_bytes, declared=declared)
        except BodyTooLarge:
            raise UploadError(
                413, "too_large", f"the file is larger than {self.max_bytes} bytes"
            ) from None
        if not data:
            raise UploadError(400, "empty", "the file is empty")
        if not _content_matches(mime, data):
            raise UploadError(415, "type_mismatch", f"the file is not {mime}")
        ref = secrets.token_hex(16) + suffix
        await asyncio.to_thread(save_bytes, self._folder(principal) / ref, data)
        return Upload(ref, mime, len(data))

    async def resolve(self, principal: str, refs: Any) -> tuple[MediaRef, ...]:
        """The files a message's `attachments` names; `ProtocolError` for
        anything but up to MAX_ATTACHMENTS refs of this principal's uploads."""
        if refs is None:
            return ()
        if not isinstance(refs, list) or len(refs) > MAX_ATTACHMENTS:
            raise ProtocolError(
                "bad_frame", f"message.attachments must be a list of <= {MAX_ATTACHMENTS} refs"
            )
        media = []
        folder = self._folder(principal)
        for ref in refs:
            match = _REF.match(ref) if isinstance(ref, str) else None
            mime = _BY_SUFFIX.get(match.group(1)) if match else None
            if mime is None or not await asyncio.to_thread(_is_plain_file, folder / ref):
                shown = ref[:40] if isinstance(ref, str) else type(ref).__name__
                raise ProtocolError("bad_frame", f"unknown attachment {shown!r}: upload it first")
            kind = MediaKind.IMAGE if mime.startswith("image/") else MediaKind.FILE
            media.append(MediaRef(kind, str(folder / ref), mime, ref))
        return tuple(media)


def _is_plain_file(path: Path) -> bool:
    """A regular file, not a link to one elsewhere."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _refused(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": code, "message": message}, status=status)


async def receive_upload(
    request: web.Request, tokens: TokenBook, uploads: Uploads, allowed_origins: Sequence[str]
) -> web.Response:
    """`POST <path>/upload`: the origin and the token first, then the body."""
    if not origin_allowed(request, allowed_origins):
        return _refused(403, "forbidden_origin", "cross-origin upload refused")
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    identity = tokens.identify(token.strip() if scheme.lower() == "bearer" else None)
    if identity is None:
        return _refused(401, "unauthorized", "wrong or missing token")
    try:
        upload = await uploads.save(
            identity.principal,
            request.headers.get("Content-Type", ""),
            request.content.iter_chunked(CHUNK),
            request.content_length,
        )
    except UploadError as exc:
        return _refused(exc.status, exc.code, str(exc))
    body = {"ref": upload.ref, "mime_type": upload.mime_type, "size": upload.size}
    return web.json_response(body, status=201)
