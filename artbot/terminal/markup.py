"""Slack's mrkdwn, which the wizard's messages are written in, as a terminal shows it: `*bold*` in
bold (or plain), `_italic_` plain, `<url|text>` as `text (url)`, Slack's `&amp;` escapes undone.
Code (between backticks, or in a ``` block) is left exactly as it is."""

from __future__ import annotations

import re
from collections.abc import Callable

CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
"""A ``` block (to its end, or the end of the text) or an inline code span."""

# Slack's emphasis needs a boundary on either side (no word character, no second marker) and
# text that does not start or end with a space: `2 * 3 * 4`, `**kwargs` and `scenario_id` stay.
BOLD = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]*?\S)\*(?![\w*])")
ITALIC = re.compile(r"(?<![\w_])_(?=[^\s_])([^_\n]*?[^\s_])_(?![\w_])")
LINK = re.compile(r"<((?:https?|mailto):[^|>\s]+)(?:\|([^>]+))?>")
ESCAPES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))  # &amp; last: `&amp;lt;` is `&lt;`


def terminal_text(text: str, bold: Callable[[str], str] = lambda words: words) -> str:
    """`text` without Slack's markup; `bold` styles what Slack shows in bold."""
    shown: list[str] = []
    end = 0
    for code in CODE.finditer(text):
        shown.append(_prose(text[end : code.start()], bold))
        shown.append(code.group())
        end = code.end()
    shown.append(_prose(text[end:], bold))
    return "".join(shown)


def _prose(text: str, bold: Callable[[str], str]) -> str:
    text = LINK.sub(lambda m: f"{m.group(2)} ({m.group(1)})" if m.group(2) else m.group(1), text)
    text = BOLD.sub(lambda m: bold(m.group(1)), text)
    text = ITALIC.sub(lambda m: m.group(1), text)
    for escaped, character in ESCAPES:
        text = text.replace(escaped, character)
    return text
