from __future__ import annotations

import re

from agent.mcp.naming import MAX_TOOL_NAME, tool_name

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_key_and_tool_joined_as_the_spec_writes_them() -> None:
    assert tool_name("fs", "echo") == "mcp_fs_echo"
    assert tool_name("WebSearch", "search") == "mcp_WebSearch_search"


def test_characters_outside_the_provider_alphabet_become_underscores() -> None:
    name = tool_name("my srv", "read-file.v2")
    assert name == "mcp_my_srv_read-file_v2"
    assert VALID.match(name)


def test_a_long_name_is_cut_with_a_hash_that_keeps_two_names_apart() -> None:
    a = tool_name("server", "x" * 80 + "a")
    b = tool_name("server", "x" * 80 + "b")
    assert len(a) == len(b) == MAX_TOOL_NAME
    assert VALID.match(a)
    assert VALID.match(b)
    assert a != b
    assert a == tool_name("server", "x" * 80 + "a")  # stable across runs and restarts
    assert a.startswith("mcp_server_xxx")
