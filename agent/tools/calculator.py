"""The `calculator` tool: safe arithmetic over a parsed expression tree.

The expression is parsed with `ast` and walked node by node; only numbers,
arithmetic operators, parentheses and an allow-list of math functions and
constants are evaluated. It must never call `eval`/`exec` or touch attributes,
and it refuses computations whose size could stall the process.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import ClassVar

from agent.tools.base import Tool, ToolArgs, ToolContext, ToolError

__all__ = ["CalculatorTool", "evaluate"]

Number = int | float

MAX_EXPRESSION_CHARS = 1_000
MAX_EXPONENT = 10_000
MAX_INT_BITS = 4_096  # results beyond ~1e1233 are refused
MAX_FLOAT = 1e300
MAX_ROUND_DIGITS = 100  # round(int, -n) computes 10**n

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}

_UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _round(x: Number, ndigits: Number = 0) -> Number:
    if isinstance(ndigits, float) and not ndigits.is_integer():
        raise ToolError("round() digits must be a whole number")
    digits = int(ndigits)
    if abs(digits) > MAX_ROUND_DIGITS:
        raise ToolError(
            f"round() digits must be between -{MAX_ROUND_DIGITS} and {MAX_ROUND_DIGITS}"
        )
    return round(x) if digits == 0 else round(x, digits)


_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "log": math.log,
    "exp": math.exp,
    "abs": abs,
    "round": _round,
}

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def _check_size(value: Number) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolError("result is too large")
    if isinstance(value, float) and (math.isinf(value) or abs(value) > MAX_FLOAT):
        raise ToolError("result is too large")
    return value


def _pow(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"exponent {exponent} is too large (limit {MAX_EXPONENT})")
    # Estimate an integer power's size before computing it: bits(b**n) ≈ n * bits(b).
    if (
        isinstance(base, int)
        and isinstance(exponent, int)
        and exponent > 0
        and abs(base) > 1
        and exponent * (abs(base).bit_length() - 1) > MAX_INT_BITS
    ):
        raise ToolError("result is too large")
    result = base**exponent
    if isinstance(result, complex):
        raise ToolError("result is not a real number")
    return result


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ToolError(f"constant {node.value!r} is not allowed; only numbers are")
        return node.value
    if isinstance(node, ast.BinOp):
        op = _BINARY.get(type(node.op))
        if op is None:
            hint = " (use ** for powers)" if isinstance(node.op, ast.BitXor) else ""
            raise ToolError(f"operator {type(node.op).__name__} is not allowed{hint}")
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_pow(left, right))
        return _check_size(op(left, right))
    if isinstance(node, ast.UnaryOp):
        uop = _UNARY.get(type(node.op))
        if uop is None:
            raise ToolError(f"operator {type(node.op).__name__} is not allowed")
        return uop(_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ToolError(f"name {node.id!r} is not allowed")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            what = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise ToolError(f"function {what!r} is not allowed")
        if node.keywords:
            raise ToolError("keyword arguments are not allowed")
        args = [_eval(a) for a in node.args]
        try:
            return _check_size(_FUNCTIONS[node.func.id](*args))
        except TypeError:
            raise ToolError(f"wrong number of arguments to {node.func.id}()") from None
        except (ValueError, OverflowError) as exc:
            raise ToolError(f"{node.func.id}() failed: {exc}") from None
    raise ToolError(f"{type(node).__name__} is not allowed in an expression")


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression; raise ToolError for anything else."""
    text = expression.strip()
    if not text:
        raise ToolError("expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolError(f"cannot parse expression {expression!r}") from None
    except (RecursionError, MemoryError):
        raise ToolError("expression is nested too deeply") from None
    try:
        return _eval(tree)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("result is too large") from None
    except RecursionError:
        raise ToolError("expression is nested too deeply") from None


def _format(value: Number) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


class CalculatorArgs(ToolArgs):
    expression: str


class CalculatorTool(Tool[CalculatorArgs]):
    name: ClassVar[str] = "calculator"
    description: ClassVar[str] = (
        "Evaluate arithmetic, e.g. '(2+3)*sqrt(16)': + - * / // % **, parentheses, "
        "sqrt, sin, cos, tan, log, exp, abs, round, pi, e."
    )
    Args: ClassVar[type[ToolArgs]] = CalculatorArgs

    async def run(self, args: CalculatorArgs, ctx: ToolContext) -> str:
        return _format(evaluate(args.expression))
