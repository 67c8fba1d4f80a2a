"""`read` on received documents: PDF text, and the media folder stays read-only."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from agent.tools.base import ToolError, ToolSettings
from agent.tools.files import read_text, write_text
from agent.tools.pdf_text import pdf_text
from tests.e2e.test_attachments import simple_pdf


def test_text_operators_of_a_flate_stream_come_out_in_lines() -> None:
    assert pdf_text(simple_pdf("Hello (world)", "second line")) == "Hello (world)\nsecond line"


def test_tj_arrays_hex_strings_and_escapes() -> None:
    content = b"BT [(Kern) -250 (ed)] TJ T* <48692021> Tj T* (tab\\there \\101) Tj ET"
    pdf = b"%PDF-1.4\n<< /Length 1 >>\nstream\n" + content + b"\nendstream\n"
    assert pdf_text(pdf) == "Kerned\nHi !\ntab\there A"


def test_a_broken_stream_is_skipped_not_fatal() -> None:
    bad = b"%PDF-1.4\n<< /Filter /FlateDecode >>\nstream\nnot zlib\nendstream\n"
    good = zlib.compress(b"BT (still here) Tj ET")
    pdf = bad + b"<< /Filter /FlateDecode >>\nstream\n" + good + b"\nendstream\n"
    assert pdf_text(pdf) == "still here"


def test_received_files_are_readable_but_never_writable(tmp_path: Path) -> None:
    workspace, media = tmp_path / "workspace", tmp_path / "media"
    workspace.mkdir()
    (media / "telegram").mkdir(parents=True)
    received = media / "telegram" / "invoice.pdf"
    received.write_bytes(simple_pdf("Total 42"))
    settings = ToolSettings(workspace=workspace, read_roots=(media,))
    assert "Total 42" in read_text(str(received), settings, 1, None)
    with pytest.raises(ToolError, match="outside the workspace"):
        write_text(str(received), "overwritten", settings)
    assert pdf_text(received.read_bytes()) == "Total 42"  # untouched


def test_a_pdf_without_text_says_so(tmp_path: Path) -> None:
    scanned = tmp_path / "scan.pdf"
    scanned.write_bytes(b"%PDF-1.4\n%%EOF\n")
    with pytest.raises(ToolError, match="without extractable text"):
        read_text("scan.pdf", ToolSettings(workspace=tmp_path), 1, None)
