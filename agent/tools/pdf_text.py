"""The text of a PDF, well enough for `read` to hand a received document to the model.

No PDF library is a dependency, so this reads what simple PDFs carry: every
content stream (inflated when FlateDecode), the strings shown by the text
operators `Tj`, `TJ`, `'` and `"` inside `BT … ET`, a line break per `T*`,
`Td`/`TD` that moves down and `ET`. Literal strings with their escapes and hex
strings are decoded as Latin-1/UTF-16BE. Fonts with custom encodings (CID
fonts, subsets without a ToUnicode map) come out wrong or empty: `read` then
says it found no text rather than guessing.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator

__all__ = ["is_pdf", "pdf_text"]

_TOKEN = re.compile(
    rb"\((?P<lit>(?:\\.|[^\\()]|\((?:\\.|[^\\()])*\))*)\)"
    rb"|<(?P<hex>[0-9A-Fa-f\s]*)>"
    rb"|(?P<op>T\*|Tj|TJ|Td|TD|ET|'|\")"
    rb"|(?P<num>-?\d*\.?\d+)"
)
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}
# A hostile file must cost bounded time and memory: streams are found by a
# linear scan (a regex over them was quadratic on an unclosed `<<`), and the
# budgets below are for the whole file, not per stream (a zip bomb of many).
_MAX_INFLATED = 20_000_000  # bytes inflated, all streams together
_MAX_TEXT_CHARS = 2_000_000  # far more than `read` returns
_DICT_LOOKBACK = 4_096  # bytes before `stream` searched for its dictionary


def is_pdf(head: bytes) -> bool:
    return head.startswith(b"%PDF-")


def _literal(raw: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(raw):
        ch = raw[i : i + 1]
        if ch != b"\\":
            out += ch
            i += 1
            continue
        nxt = raw[i + 1 : i + 2]
        octal = re.match(rb"[0-7]{1,3}", raw[i + 1 : i + 4])
        if octal:
            out.append(int(octal.group(), 8) & 0xFF)
            i += 1 + len(octal.group())
        else:
            out += _ESCAPES.get(nxt, nxt)
            i += 2
    return bytes(out)


def _decode(data: bytes) -> str:
    if data.startswith(b"\xfe\xff"):
        return data[2:].decode("utf-16-be", "replace")
    return data.decode("latin-1")


def _inflate(body: bytes, budget: int) -> bytes | None:
    if budget <= 0:  # zlib reads a max_length of 0 as "no limit"
        return None
    try:
        return zlib.decompressobj().decompress(body, budget)
    except zlib.error:
        return None


def _streams(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(dictionary, raw body) of each `<< … >> stream … endstream`, in order."""
    pos = 0
    while (start := data.find(b"stream", pos)) != -1:
        pos = start + 6
        head = data[max(0, start - _DICT_LOOKBACK) : start]
        close = head.rfind(b">>")
        if close == -1 or head[close + 2 :].strip():
            continue  # not a stream keyword (the word in text, or "endstream")
        begin = data[pos : pos + 2]
        skip = 2 if begin == b"\r\n" else 1 if begin[:1] in (b"\n", b"\r") else 0
        if not skip:
            continue
        end = data.find(b"endstream", pos + skip)
        if end == -1:
            return
        body = data[pos + skip : end]
        body = body[:-2] if body.endswith(b"\r\n") else body[:-1] if body[-1:] in b"\r\n" else body
        obj = head.rfind(b"obj", 0, close)  # the whole dictionary, nested ones included
        yield head[obj + 3 if obj != -1 else 0 : close], body
        pos = end + len(b"endstream")


def _stream_text(content: bytes) -> str:
    out: list[str] = []
    pending: list[str] = []
    numbers: list[float] = []
    for match in _TOKEN.finditer(content):
        if match.group("lit") is not None:
            pending.append(_decode(_literal(match.group("lit"))))
        elif match.group("hex") is not None:
            digits = re.sub(rb"\s", b"", match.group("hex"))
            pending.append(_decode(bytes.fromhex((digits + b"0" * (len(digits) % 2)).decode())))
        elif match.group("num") is not None:
            numbers = [*numbers[-1:], float(match.group("num"))]
            continue
        else:
            op = match.group("op")
            if op in (b"Tj", b"TJ", b"'", b'"'):
                if op in (b"'", b'"'):
                    out.append("\n")
                out.append("".join(pending))
            elif op in (b"T*", b"ET") or (op in (b"Td", b"TD") and numbers and numbers[-1] < 0):
                out.append("\n")
            pending = []
        numbers = []
    return "".join(out)


def pdf_text(data: bytes) -> str:
    """The text the PDF shows, lines stripped and blank runs collapsed."""
    parts: list[str] = []
    inflate_left, chars = _MAX_INFLATED, 0
    for dictionary, raw in _streams(data):
        body = raw
        if b"/FlateDecode" in dictionary:
            inflated = _inflate(raw, inflate_left)
            if inflated is None:
                continue
            inflate_left -= len(inflated)
            body = inflated
        if b"BT" in body:
            # text comes out of the content's strings: more content than twice
            # the text still allowed is never needed, and would only cost time
            text = _stream_text(body[: 2 * (_MAX_TEXT_CHARS - chars)])
            parts.append(text)
            chars += len(text)
        if chars > _MAX_TEXT_CHARS or inflate_left <= 0:
            break
    lines = [line.strip() for line in "\n".join(parts).splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
