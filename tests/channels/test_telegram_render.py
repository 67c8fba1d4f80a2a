"""Markdown → Telegram HTML, and the config model of the telegram channel."""

from __future__ import annotations

import itertools

import pytest
from pydantic import ValidationError

from channels.telegram import TelegramConfig
from channels.telegram.config import TelegramMode
from channels.telegram.render import markdown_to_html
from tests.fakes.telegram_server import check_html


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("**bold** and __bold__", "<b>bold</b> and <b>bold</b>"),
        ("*it* and _it_ but snake_case_name", "<i>it</i> and <i>it</i> but snake_case_name"),
        ("~~gone~~", "<s>gone</s>"),
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("use `x<y` here", "use <code>x&lt;y</code> here"),
        ("[docs](https://e.x/?a=1&b=2)", '<a href="https://e.x/?a=1&amp;b=2">docs</a>'),
        ("# Title\ntext", "<b>Title</b>\ntext"),
        ("2 * 3 * 4 = 24", "2 * 3 * 4 = 24"),
        ("* item\n* item", "* item\n* item"),
        ("**unclosed", "**unclosed"),
    ],
)
def test_markdown_renders_to_telegram_html(markdown: str, html: str) -> None:
    assert markdown_to_html(markdown) == html


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        ("**bold _both** italic_", "<b>bold <i>both</i></b><i> italic</i>"),
        ("**bold *both** italic*", "<b>bold <i>both</i></b><i> italic</i>"),
        ("_a **b_ c**", "<i>a <b>b</b></i><b> c</b>"),
        ("~~x **y~~ z**", "<s>x <b>y</b></s><b> z</b>"),
        ("[a **b](https://e.x) c**", '<a href="https://e.x">a <b>b</b></a><b> c</b>'),
        ("a * b ** c", "a * b ** c"),
    ],
)
def test_crossing_emphasis_is_nested_as_telegram_wants(markdown: str, html: str) -> None:
    rendered = markdown_to_html(markdown)
    assert rendered == html
    _, error = check_html(rendered)
    assert error is None


def test_every_mix_of_markers_renders_to_html_telegram_takes() -> None:
    """Every sequence of up to four of these pieces: none may be refused, so no
    part ever falls back to plain text for its emphasis."""
    pieces = ["**", "*", "_", "__", "~~", "`", "a", " ", "b c", "[l](https://e.x)", "\n"]
    for size in range(1, 5):
        for combo in itertools.product(pieces, repeat=size):
            markdown = "".join(combo)
            rendered = markdown_to_html(markdown)
            visible, error = check_html(rendered)
            assert error is None, (markdown, rendered, error)
            assert len(visible) <= len(markdown)


def test_a_crossing_span_keeps_the_formatting_of_the_rest() -> None:
    rendered = markdown_to_html("**ok** then **bold _both** italic_ and `code`")
    assert check_html(rendered) == ("ok then bold both italic and code", None)
    assert rendered.startswith("<b>ok</b> then ")
    assert rendered.endswith(" and <code>code</code>")


def test_code_blocks_are_escaped_and_not_formatted() -> None:
    text = "```python\nif a < b and **x**:\n    pass\n```\nafter"
    assert markdown_to_html(text) == (
        '<pre><code class="language-python">if a &lt; b and **x**:\n    pass</code></pre>\nafter'
    )
    # A fence cut off by message splitting still closes.
    assert markdown_to_html("```\nx < 1") == "<pre>x &lt; 1</pre>"


def test_defaults_and_secret_handling() -> None:
    config = TelegramConfig(enabled=True, token="123:abc-secret")
    assert config.mode is TelegramMode.POLLING
    assert config.groups.allow == "*"
    assert config.groups.require_mention is True
    assert config.api_base == "https://api.telegram.org"
    assert config.max_media_bytes == 20 * 1024 * 1024
    assert config.poll_timeout_secs == 30
    assert config.streaming is False
    assert "abc-secret" not in repr(config)
    assert "abc-secret" not in str(config.model_dump())


@pytest.mark.parametrize(
    ("section", "require_mention"),
    [
        ({"group_policy": "open"}, False),
        ({"group_policy": "mention"}, True),
        ({"group_policy": "open", "groups": {"require_mention": True}}, True),
        ({"group_policy": "open", "groups": {"allow": ["-100"]}}, False),
    ],
)
def test_the_old_group_policy_key_still_sets_the_mention_rule(
    section: dict[str, object], require_mention: bool
) -> None:
    config = TelegramConfig.model_validate({"enabled": True, "token": "t", **section})
    assert config.groups.require_mention is require_mention
    assert "group_policy" not in config.model_dump()


def test_an_unknown_group_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="group_policy"):
        TelegramConfig.model_validate({"enabled": True, "token": "t", "group_policy": "all"})


@pytest.mark.parametrize(
    ("section", "complaint"),
    [
        ({"enabled": True}, "token is required"),
        ({"enabled": True, "token": "t", "mode": "webhook", "secret_token": "s"}, "webhook_url"),
        (
            {"enabled": True, "token": "t", "mode": "webhook", "webhook_url": "https://x/y"},
            "secret_token is required",
        ),
        (
            {
                "enabled": True,
                "token": "t",
                "mode": "webhook",
                "webhook_url": "https://x/y",
                "secret_token": "no spaces allowed",
            },
            "secret_token may hold only",
        ),
        ({"enabled": True, "token": "t", "mode": "push"}, "mode"),
        ({"enabled": True, "token": "t", "unknown_key": 1}, "unknown_key"),
    ],
)
def test_invalid_sections_are_refused(section: dict[str, object], complaint: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TelegramConfig.model_validate(section)
    assert complaint in str(caught.value)


def test_a_disabled_section_needs_no_token() -> None:
    assert TelegramConfig().enabled is False
