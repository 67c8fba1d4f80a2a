"""Lazy package exports: a channel's SDK is imported when its channel is built.

`picobot --help`, config validation and a gateway with only the WebSocket
channel import each channel package for its config model; the channel class
(and with it python-telegram-bot, lark-oapi …) loads on first access.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(package: str, names: Mapping[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` that imports `names[name]` (a submodule of
    `package`) on first access to `name` and returns that attribute."""

    def __getattr__(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
