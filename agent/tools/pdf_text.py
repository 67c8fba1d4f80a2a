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

__all__ = ["is_pdf", "pdf_text"]

_STREAM = re.compile(rb"<<(?P<dict>(?:(?!>>).)*?)>>\s*stream\r?\n(?P<body>.*?)\r?\nendstream", re.S)
_TOKEN = re.compile(
    rb"\((?P<lit>(?:\\.|[^\\()]|\((?:\\.|[^\\()])*\))*)\)"
    rb"|<(?P<hex>[0-9A-Fa-f\s]*)>"
    rb"|(?P<op>T\*|Tj|TJ|Td|TD|ET|'|\")"
    rb"|(?P<num>-?\d*\.?\d+)"
)
_ESCAPES = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}
_MAX_INFLATED = 20_000_000  # a zip bomb must not fill memory


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


def _inflate(body: bytes) -> bytes | None:
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(body, _MAX_INFLATED)
    except zlib.error:
        return None
    return data


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
    for match in _STREAM.finditer(data):
        body = match.group("body")
        if b"/FlateDecode" in match.group("dict"):
            inflated = _inflate(body)
            if inflated is None:
                continue
            body = inflated
        if b"BT" in body:
            parts.append(_stream_text(body))
    lines = [line.strip() for line in "\n".join(parts).splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
