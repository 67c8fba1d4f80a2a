"""What a chat reads in an approval request, and what the model reads for a refusal."""

from __future__ import annotations

import json

from agent.messages import ToolCall
from gateway.approvals.texts import SUPERSEDED, TIMED_OUT_BY, denied_result, request_text
from gateway.i18n import Locale


def test_the_request_shows_the_command_as_code_and_how_to_answer() -> None:
    calls = [ToolCall("c1", "bash", json.dumps({"command": "rm -rf build/*_old"}))]
    text = request_text(7, calls, 3600, Locale.EN)
    assert text.splitlines() == [
        "Approval needed (#7): I want to run",
        "• bash: `rm -rf build/*_old`",
        "Reply /approve 7 to run it, or /deny 7 [reason] to refuse. "
        "No answer within 1 h refuses it.",
    ]


def test_secrets_in_arguments_are_masked() -> None:
    args = {"url": "https://x.test", "headers": {"Authorization": "Bearer sk-abcdefghijklmnop123"}}
    text = request_text(1, [ToolCall("c1", "http_request", json.dumps(args))], 90, Locale.EN)
    assert "sk-abcdefghijklmnop123" not in text
    assert "https://x.test" in text
    assert "1.5 min" in text


def test_refusals_as_the_model_reads_them() -> None:
    assert denied_result("because", "websocket:alice", 3600) == "[denied by user: because]"
    assert denied_result(None, "websocket:alice", 3600) == "[denied by user: no reason given]"
    assert denied_result(None, TIMED_OUT_BY, 3600) == "[denied: nobody approved it within 1 h]"
    assert denied_result(None, SUPERSEDED, 3600).startswith("[denied: the user sent a new")
