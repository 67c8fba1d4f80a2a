"""send_file's copy (gateway/delivery/files.py): it reads the very file the
tool checked, never what a symlink swapped in afterwards points to."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tools.base import ToolError
from gateway.delivery.files import copy_for_outbox


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.pdf").write_bytes(b"the operator's secret")
    return outside


def test_the_checked_file_is_copied(tmp_path: Path) -> None:
    source = tmp_path / "ws" / "report.pdf"
    source.parent.mkdir()
    source.write_bytes(b"%PDF-1.4 fine")
    copy = copy_for_outbox(source, tmp_path / "out", 1_000)
    assert copy.read_bytes() == b"%PDF-1.4 fine"


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_sent(
    tmp_path: Path, secret: Path
) -> None:
    source = tmp_path / "ws" / "report.pdf"
    source.parent.mkdir()
    source.symlink_to(secret / "report.pdf")  # what a racing bash could do
    with pytest.raises(ToolError, match="cannot be opened"):
        copy_for_outbox(source, tmp_path / "out", 1_000)
    assert not (tmp_path / "out").exists()


def test_a_folder_swapped_for_a_symlink_after_the_check_is_not_sent(
    tmp_path: Path, secret: Path
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "docs").symlink_to(secret)
    with pytest.raises(ToolError, match="changed while it was being sent"):
        copy_for_outbox(tmp_path / "ws" / "docs" / "report.pdf", tmp_path / "out", 1_000)
    assert not (tmp_path / "out").exists()


def test_a_file_over_the_limit_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    source.write_bytes(b"x" * 2_000)
    with pytest.raises(ToolError, match="files over 1000 bytes"):
        copy_for_outbox(source, tmp_path / "out", 1_000)
