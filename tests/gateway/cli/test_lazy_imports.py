"""What a command does not need is never imported: `picobot --help` loads no
config model or SDK, and a WebSocket-only gateway no channel SDK.

Each check runs in a fresh interpreter (this one has imported everything)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap

from gateway.cli.program import FAMILIES, build_parser

HEAVY = ("pydantic", "aiohttp", "structlog", "openai", "anthropic", "telegram", "lark_oapi")


def _loaded_after(code: str) -> set[str]:
    """The HEAVY modules loaded once `code` has run in a new interpreter."""
    probe = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]), file=sys.__stderr__)
    """)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_help_loads_no_config_model_sdk_or_logging() -> None:
    loaded = _loaded_after("""
        from gateway.cli.program import main
        try:
            main(["--help"])
        except SystemExit:
            pass
    """)
    assert loaded == set()


def test_a_websocket_only_gateway_loads_no_channel_sdk() -> None:
    loaded = _loaded_after("""
        from pathlib import Path
        from gateway.app import Gateway
        from gateway.delivery.registry import build_channels
        from tests.support import make_config
        loaded = make_config(Path("/nonexistent"), "http://127.0.0.1:9/v1")
        assert [c.name for c in build_channels(loaded.config)] == ["websocket"]
    """)
    assert "telegram" not in loaded
    assert "lark_oapi" not in loaded


def test_a_channel_package_still_exports_its_channel() -> None:
    loaded = _loaded_after("""
        from channels.telegram import TelegramChannel, TelegramConfig
        from channels.feishu import FeishuChannel
        assert FeishuChannel.__name__ == "FeishuChannel"
        assert TelegramChannel.__name__ == "TelegramChannel"
    """)
    assert "telegram" in loaded


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {c.dest: c.help for c in sub._choices_actions}


def test_the_light_help_says_what_each_family_says_of_itself() -> None:
    assert _summaries(build_parser("")) == _summaries(build_parser())
    assert {name for name, _, _ in FAMILIES} <= set(_summaries(build_parser()))


def test_a_family_command_gets_its_full_parser() -> None:
    args = build_parser("outbox").parse_args(["outbox", "retry", "7"])
    assert args.id == 7


def test_a_command_loads_structlog_without_rich_and_rich_still_imports() -> None:
    """rich (and pygments) are the terminal client's; structlog would load them
    for every command and the daemon's whole life if they were importable then."""
    probe = textwrap.dedent("""
        import json, sys
        from gateway.cli.program import main
        try:
            main(["outbox", "--help"])
        except SystemExit:
            pass
        loaded = ["structlog" in sys.modules, "rich" in sys.modules, "pygments" in sys.modules]
        import rich.markdown  # the client's Markdown still works
        print(json.dumps(loaded), file=sys.__stderr__)
    """)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [True, False, False]
