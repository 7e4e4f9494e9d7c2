"""Slack's text format: what arrives becomes what the user typed; what goes out shows as typed."""

from __future__ import annotations

import pytest

from bot.slack.blocks import SECTION_LIMIT, question_message, sections
from bot.slack.text import as_typed, clip, escape, unescape, without_mention_of
from flows import OptionView, Question


@pytest.mark.parametrize(
    ("delivered", "typed"),
    [
        ("Q&amp;A … 3 &lt; 5 &amp;&amp; x &gt; 2", "Q&A … 3 < 5 && x > 2"),
        ("0 &lt; len(answer) &lt;= 10", "0 < len(answer) <= 10"),
        ("&amp;lt; is how Slack writes &lt;", "&lt; is how Slack writes <"),  # decoded once
        ("&amp;amp;", "&amp;"),
        ("&quot;kept&quot; &#39;too&#39;", "&quot;kept&quot; &#39;too&#39;"),  # not Slack's
        (
            'requests.get("<https://x.org/a?b=1&amp;c=2>")',
            'requests.get("https://x.org/a?b=1&c=2")',
        ),
        ("see <http://x.org|x.org>", "see x.org"),  # linked as typed, scheme added by Slack
        ("<https://x.org|https://x.org>", "https://x.org"),
        ("<mailto:a@x.org|a@x.org>", "a@x.org"),
        ("<https://x.org/docs|the docs>", "the docs (https://x.org/docs)"),
        ("<https://x.org?q=&lt;a&gt;|a &amp; b>", "a & b (https://x.org?q=<a>)"),
        ("hi <@U123> and <@U456|ann>", "hi @U123 and @ann"),
        ("in <#C123|general> or <#C456> or <#C789|>", "in #general or #C456 or #C789"),
        ("<!here> <!channel> <!everyone>", "@here @channel @everyone"),
        ("<!subteam^S1|@ml-team> <!subteam^S2>", "@ml-team @S2"),
        ("<!date^1392734382^{date}|Feb 18, 2014>", "Feb 18, 2014"),
        ("", ""),
    ],
)
def test_text_as_slack_delivers_it_becomes_what_was_typed(delivered: str, typed: str) -> None:
    assert as_typed(delivered) == typed


@pytest.mark.parametrize(
    ("delivered", "left"),
    [
        ("<@U0BOT> static", "static"),
        ("  <@U0BOT|artbot>   2", "2"),
        ("static <@U0BOT>", "static <@U0BOT>"),  # only a leading mention addresses the bot
        ("<@U123> static", "<@U123> static"),  # someone else's mention is part of the answer
        ("<@U0BOTX> static", "<@U0BOTX> static"),
    ],
)
def test_a_leading_mention_of_the_bot_is_not_part_of_the_answer(delivered: str, left: str) -> None:
    assert without_mention_of("U0BOT", delivered) == left
    assert without_mention_of(None, delivered) == delivered


def test_escaping_is_undone_exactly_once() -> None:
    typed = "if a < b && c > d: x = '&lt;'"
    assert escape(typed) == "if a &lt; b &amp;&amp; c &gt; d: x = '&amp;lt;'"
    assert unescape(escape(typed)) == typed
    assert as_typed(escape(typed)) == typed
    assert unescape("&amp;gt;") == "&gt;"


def test_clip_never_cuts_an_entity_in_half() -> None:
    text = escape("aaaa<b>&c")  # aaaa&lt;b&gt;&amp;c
    partials = ("&", "&l", "&lt", "&g", "&gt", "&a", "&am", "&amp")
    for limit in range(2, len(text)):
        clipped = clip(text, limit)
        assert clipped.endswith("…") and len(clipped) <= limit
        assert not clipped.removesuffix("…").endswith(partials)
    assert clip(text, 9) == "aaaa&lt;…"  # a whole entity stays
    assert clip(text, len(text)) == text


def test_sections_never_split_an_entity() -> None:
    line = "x" * (SECTION_LIMIT - 2) + escape("<<<")
    chunks = [block["text"]["text"] for block in sections(line)]
    assert all(len(chunk) <= SECTION_LIMIT for chunk in chunks)
    assert chunks[0].endswith("x") and chunks[1].startswith("&lt;")
    assert "".join(chunks) == line


def test_a_questions_fallback_text_is_escaped_like_its_blocks() -> None:
    question = Question(
        "pick",
        "Use “Q&A <fast>” as the task?",
        "choice",
        options=(OptionView("yes", "Yes & go", "", 1, False),),
    )
    message = question_message(question)
    assert "Q&amp;A &lt;fast&gt;" in message.text and "1. Yes &amp; go" in message.text
    assert "Q&amp;A &lt;fast&gt;" in message.blocks[0]["text"]["text"]
    button = next(b for b in message.blocks if b["type"] == "actions")["elements"][0]
    assert button["text"] == {"type": "plain_text", "text": "1. Yes & go"}  # not parsed by Slack
