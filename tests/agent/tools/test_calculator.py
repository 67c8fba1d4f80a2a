"""The calculator evaluates arithmetic and refuses everything outside its allow-list."""

from __future__ import annotations

import math

import pytest

from agent.messages import ToolCall
from agent.tools.base import ToolContext, ToolError, ToolRegistry
from agent.tools.calculator import CalculatorArgs, CalculatorTool, evaluate


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("-(3 - 5)", 2),
        ("+4", 4),
        ("sqrt(16) + abs(-2)", 6.0),
        ("round(2.675, 2)", 2.67),
        ("round(2.5)", 2),
        ("log(e)", 1.0),
        ("exp(0)", 1.0),
        ("cos(0) + sin(0) + tan(0)", 1.0),
        ("2 * pi", 2 * math.pi),
        ("1.5e3 + 0.5", 1500.5),
    ],
)
def test_evaluates_arithmetic(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected)


async def test_run_formats_whole_floats_as_integers(ctx: ToolContext) -> None:
    tool = CalculatorTool()
    assert await tool.run(CalculatorArgs(expression="sqrt(16)"), ctx) == "4"
    assert await tool.run(CalculatorArgs(expression="1 / 4"), ctx) == "0.25"


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("__import__('os')", "function '__import__' is not allowed"),
        ("os", "name 'os' is not allowed"),
        ("(1).__class__", "Attribute is not allowed"),
        ("math.sqrt(4)", "function 'math.sqrt' is not allowed"),
        ("open('x')", "function 'open' is not allowed"),
        ("'a' * 3", "constant 'a' is not allowed"),
        ("True + 1", "constant True is not allowed"),
        ("[1, 2]", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("1 if 1 else 2", "IfExp is not allowed"),
        ("1 < 2", "Compare is not allowed"),
        ("2 ^ 3", "operator BitXor is not allowed (use ** for powers)"),
        ("1 << 3", "operator LShift is not allowed"),
        ("~1", "operator Invert is not allowed"),
        ("round(x=1)", "keyword arguments are not allowed"),
        ("x = 1", "cannot parse"),
        ("", "expression is empty"),
    ],
)
def test_rejects_what_is_not_allowed(expression: str, complaint: str) -> None:
    with pytest.raises(ToolError) as info:
        evaluate(expression)
    assert complaint in str(info.value)


@pytest.mark.parametrize(
    "expression",
    ["9 ** 99999", "2 ** 10001", "10 ** 5000", "(10 ** 1000) ** 5", "2.0 ** 5000", "exp(1000)"],
)
def test_refuses_huge_powers_and_results(expression: str) -> None:
    with pytest.raises(ToolError, match=r"too large|failed"):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "complaint"),
    [
        ("1 / 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("sqrt(-1)", "sqrt() failed"),
        ("(-8) ** 0.5", "not a real number"),
        ("sqrt(1, 2)", "wrong number of arguments"),
        ("round(5, -1000000000)", "round() digits must be between"),
        ("round(1.5, 0.5)", "round() digits must be a whole number"),
        ("1 +" * 400 + "1", "longer than"),
    ],
)
def test_reports_math_errors(expression: str, complaint: str) -> None:
    with pytest.raises(ToolError) as info:
        evaluate(expression)
    assert complaint in str(info.value)


async def test_through_the_registry(ctx: ToolContext) -> None:
    registry = ToolRegistry([CalculatorTool()])
    ok = await registry.execute(ToolCall("1", "calculator", '{"expression": "6 * 7"}'), ctx)
    bad = await registry.execute(ToolCall("2", "calculator", '{"expression": "exec(1)"}'), ctx)
    assert (ok.ok, ok.content) == (True, "42")
    assert (bad.ok, bad.content) == (False, "Error: function 'exec' is not allowed")
