"""What a channel says of a file its platform will not take at all: the
refusal `send_file` raises to the model, and the note the chat gets instead
of the file. Each channel's limits table (channels/<name>/limits.py) gives the
platform's name, its largest file and how it counts a megabyte."""

from __future__ import annotations

from dataclasses import dataclass

from channels.base import PermanentSendError

__all__ = ["Megabytes", "TooLarge"]


@dataclass(frozen=True, slots=True)
class Megabytes:
    unit: int  # bytes in the platform's "MB": 1,000,000 or 1,048,576

    def __call__(self, size: int) -> str:
        return f"{size / self.unit:.1f} MB"


@dataclass(frozen=True, slots=True)
class TooLarge:
    platform: str
    limit: int  # bytes: the largest file the platform takes
    mb: Megabytes

    def refusal(self, size: int) -> PermanentSendError:
        return PermanentSendError(
            f"too large for {self.platform} ({self.mb(size)}; files of at most "
            f"{self.mb(self.limit)} are taken): not sent"
        )

    def note(self, name: str, size: int) -> str:
        return (
            f"[{name} ({self.mb(size)}) was not sent: {self.platform} takes files of at most "
            f"{self.mb(self.limit)}]"
        )
