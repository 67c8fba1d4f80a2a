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


def test_a_zip_bomb_of_many_streams_is_bounded_for_the_whole_file() -> None:
    """Each stream inflates to ~19 MB of text; the budgets are the file's, not
    each stream's (the old per-stream cap let five of them make 95 M chars)."""
    bomb = zlib.compress(b"BT (" + b"A" * 19_000_000 + b") Tj ET", 9)
    stream = b"<< /Filter /FlateDecode >>\nstream\n" + bomb + b"\nendstream\n"
    assert len(pdf_text(b"%PDF-1.4\n" + stream * 5)) <= 2_000_000


def test_nested_dictionaries_and_hostile_structure_are_read_in_one_pass() -> None:
    """A nested /DecodeParms dictionary is still seen as Flate; thousands of
    unclosed `<<` (quadratic for a regex: minutes at this size) cost one scan."""
    body = zlib.compress(b"BT (nested ok) Tj ET")
    nested = b"<< /Filter /FlateDecode /DecodeParms << /Predictor 1 >> >>\nstream\n"
    hostile = b"<<" * 100_000 + b"<<>>stream\n" * 10_000
    pdf = b"%PDF-1.4\n1 0 obj\n" + nested + body + b"\nendstream\nendobj\n" + hostile
    assert pdf_text(pdf) == "nested ok"
