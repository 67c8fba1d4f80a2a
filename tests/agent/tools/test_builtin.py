"""builtin_tools lists every built-in tool; build_registry honours tools.disabled."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import Field, ValidationError

from agent.messages import ToolCall
from agent.tools.base import ToolArgs, ToolContext, ToolSettings, compact_schema
from agent.tools.builtin import build_registry, builtin_tools

EXPECTED = {
    "calculator",
    "get_time",
    "read",
    "write",
    "edit",
    "bash",
    "http_request",
    "web_fetch",
    "send_file",
}


@pytest.fixture
def settings(workspace: Path) -> ToolSettings:
    return ToolSettings(workspace=workspace)


def test_builtin_tools_are_all_there_with_schemas(settings: ToolSettings) -> None:
    tools = builtin_tools(settings, "UTC")
    assert {t.name for t in tools} == EXPECTED
    for tool in tools:
        spec = tool.spec()
        assert spec.name == tool.name
        assert spec.description
        assert spec.parameters["type"] == "object"
        assert "title" not in spec.parameters


def test_build_registry_leaves_out_disabled(settings: ToolSettings) -> None:
    registry = build_registry(settings, "UTC", disabled=["read"], timeout_secs=5.0)
    assert registry.names() == sorted(EXPECTED - {"read"})
    assert registry.timeout_secs == 5.0


def test_build_registry_rejects_unknown_disabled_names(settings: ToolSettings) -> None:
    with pytest.raises(ValueError, match=r"unknown tool name.*: nope, zzz"):
        build_registry(settings, "UTC", disabled=["zzz", "calculator", "nope"])


def test_build_registry_passes_the_default_zone(settings: ToolSettings) -> None:
    with pytest.raises(ValueError, match="unknown timezone"):
        build_registry(settings, "Not/AZone")


@pytest.mark.parametrize("alias", ["bash", "shell"])
def test_disabling_bash_or_shell_removes_the_shell_tool(settings: ToolSettings, alias: str) -> None:
    registry = build_registry(settings, "UTC", disabled=[alias])
    assert registry.names() == sorted(EXPECTED - {"bash"})


def test_names_of_tools_registered_elsewhere_can_be_declared_known(
    settings: ToolSettings,
) -> None:
    registry = build_registry(
        settings, "UTC", disabled=["memory_search", "read"], other_known=["memory_search"]
    )
    assert registry.names() == sorted(EXPECTED - {"read"})
    with pytest.raises(ValueError, match=r"unknown tool name.*: task"):
        build_registry(settings, "UTC", disabled=["task"], other_known=["memory_search"])


def test_mcp_names_in_disabled_are_taken_as_given(settings: ToolSettings) -> None:
    """MCP servers say which tools they have only once connected."""
    registry = build_registry(settings, "UTC", disabled=["mcp_fs_write_file", "read"])
    assert registry.names() == sorted(EXPECTED - {"read"})


def test_schemas_sent_to_the_model_drop_what_it_does_not_need() -> None:
    class Args(ToolArgs):
        title: str = Field(description="a parameter that happens to be called title")
        note: str | None = Field(None, max_length=10, description="optional")
        count: int = Field(3, ge=1, le=9)

    schema = compact_schema(Args.model_json_schema())
    assert schema["properties"] == {
        "title": {"description": "a parameter that happens to be called title", "type": "string"},
        "note": {"type": "string", "description": "optional"},  # bounds: validation's
        "count": {"type": "integer"},  # its default applies when it is left out
    }
    with pytest.raises(ValidationError, match="at most 10 characters"):
        Args.model_validate({"title": "x", "note": "0123456789x"})
    assert Args.model_validate({"title": "x"}).count == 3
    assert "title" not in schema  # the model's own title, gone; the parameter stays
    assert schema["required"] == ["title"]
    assert Args.model_validate({"title": "x", "note": None}).note is None  # null still accepted
    for tool in builtin_tools(ToolSettings(workspace=Path(".")), "UTC"):
        assert "additionalProperties" not in tool.spec().parameters


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ('{"expression": "1+', "Error: arguments are not valid JSON: "),
        ("[1]", "Error: arguments must be a JSON object"),
        (
            '{"expression": ' + "[" * 20_000 + "]" * 20_000 + "}",
            "Error: arguments are nested too deeply",
        ),
        (
            '{"expression": 1' + "0" * 5_000 + "}",
            "Error: arguments cannot be read: Exceeds the limit",
        ),
    ],
)
async def test_arguments_that_cannot_be_read_are_a_tool_error_that_says_why(
    settings: ToolSettings, ctx: ToolContext, arguments: str, says: str
) -> None:
    registry = build_registry(settings, "UTC")
    result = await registry.execute(ToolCall("c1", "calculator", arguments), ctx)
    assert not result.ok
    assert result.content.startswith(says), result.content
