"""Slack's text format at the edge: what arrives becomes what the user typed, what goes out is
escaped for mrkdwn. Every text the bot reads from Slack or writes into mrkdwn passes through here.

Incoming (`as_typed`): message events (thread replies, broadcasts, the comment on a file share) and
slash-command text. Slack escapes three characters and only those: `&` as `&amp;`, `<` as `&lt;`,
`>` as `&gt;`. So every real `<` in what arrives opens one of Slack's own forms, `<...>`, which
`as_typed` turns into readable text first; then the three entities are decoded, once (`&amp;` last,
so a typed `&lt;` that arrived as `&amp;lt;` stays `&lt;`):

    <https://x.org/a?b=1&amp;c=2>  ->  https://x.org/a?b=1&c=2  (a URL Slack linked)
    <http://x.org|x.org>           ->  x.org                     (linked as typed, scheme added)
    <mailto:a@x.org|a@x.org>       ->  a@x.org
    <https://x.org|the docs>       ->  the docs (https://x.org)  (a link given a label of its own)
    <@U123> / <@U123|ann>          ->  @U123 / @ann
    <#C123|general> / <#C123>      ->  #general / #C123
    <!here> <!channel> <!everyone> ->  @here @channel @everyone
    <!subteam^S1|@ml> / <!date^…|Feb 18>  ->  @ml / Feb 18            (their fallback label)

Links matter most for code: Slack links the URLs in a pasted reward function
(`requests.get("https://x")` arrives as `requests.get("<https://x>")`), and the code must come
back as typed. Mentions stay readable (`@U123`) rather than becoming raw markup.

Uploaded files are raw bytes: they never pass through here.

Outgoing (`escape`): user text placed into a mrkdwn `text` (a Block Kit `mrkdwn` text object,
the `text` of chat.postMessage / chat.update / chat.postEphemeral / a response_url reply, a file's
`initial_comment`) has `&`, `<`, `>` escaped, inside code spans and blocks too, so Slack shows
what the user typed and never reads it as a mention or link. `plain_text` objects (button
labels, headers) are not parsed for these and are not escaped. `clip` never cuts an entity in
half.
"""

from __future__ import annotations

import re

ENTITIES = ("&amp;", "&lt;", "&gt;")
_SLACK_FORM = re.compile(r"<([^<>]+)>")
_BROADCASTS = frozenset({"here", "channel", "everyone", "group"})
_LINK_SCHEMES = ("http://", "https://", "mailto:", "tel:")


def escape(text: str) -> str:
    """User text for a mrkdwn field: `&`, `<`, `>` as entities, so Slack shows it as typed."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Decode Slack's three entities, once (`&amp;` last: `&amp;lt;` becomes `&lt;`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def as_typed(text: str) -> str:
    """Text as Slack delivered it (a message, a slash command) back into what the user typed."""
    parts: list[str] = []
    end = 0
    for match in _SLACK_FORM.finditer(text):
        parts.append(unescape(text[end : match.start()]))
        parts.append(_readable(match.group(1)))
        end = match.end()
    parts.append(unescape(text[end:]))
    return "".join(parts)


def without_mention_of(user_id: str | None, text: str) -> str:
    """`text` without a leading mention of `user_id` (`<@U0BOT> static` -> `static`): people
    address the bot in its own thread; the mention is not part of their answer."""
    if not user_id:
        return text
    match = re.match(rf"\s*<@{re.escape(user_id)}(?:\|[^<>]*)?>\s*", text)
    return text[match.end() :] if match else text


def _readable(form: str) -> str:
    target, _, label = form.partition("|")
    target, label = unescape(target), unescape(label)
    if target.startswith("@"):
        return "@" + (label or target[1:])
    if target.startswith("#"):
        return "#" + (label or target[1:])
    if target.startswith("!"):
        name, _, argument = target[1:].partition("^")
        if name in _BROADCASTS:
            return "@" + name
        return label or "@" + (argument.partition("^")[0] or name)
    if not label or any(target == scheme + label for scheme in ("", *_LINK_SCHEMES)):
        return label or target
    return f"{label} ({target})"


def safe_cut(text: str, at: int) -> int:
    """The largest index <= `at` where `text` can be cut without splitting an entity."""
    start = text.rfind("&", max(0, at - 4), at)
    if start != -1:
        partial = text[start:at]
        if partial not in ENTITIES and any(e.startswith(partial) for e in ENTITIES):
            return start
    return at


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with an ellipsis when longer; never inside an entity."""
    if len(text) <= limit:
        return text
    return text[: safe_cut(text, limit - 1)] + "…"
