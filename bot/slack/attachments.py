"""Files a user drops into a wizard's thread, downloaded with the bot token as attachments."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from urllib.parse import urlsplit

from slack_sdk import WebClient

from assistant.repo_zip import MAX_ZIP_BYTES, is_zip
from bot.slack.text import clip, escape
from flows import Attachment

SLACK_FILE_DOMAINS = ("slack.com", "slack-gov.com")
"""Where Slack serves `url_private` (files.slack.com; GovSlack's own): the only hosts, with the
Web API's own, that ever get the bot token."""


def is_slack_file_url(url: str, api_url: str) -> bool:
    """Whether `url` is one of Slack's file hosts over https, or on the Web API's own origin (a
    proxy, a test server): a file object naming any other host never gets the bot token."""
    parts, api = urlsplit(url), urlsplit(api_url)
    if (parts.scheme, parts.hostname, parts.port) == (api.scheme, api.hostname, api.port):
        return True
    host = (parts.hostname or "").lower()
    return parts.scheme == "https" and any(
        host == domain or host.endswith("." + domain) for domain in SLACK_FILE_DOMAINS
    )


def attachment_from_file(
    client: WebClient, file: Mapping[str, object], max_bytes: int
) -> Attachment | str:
    """Download a file a user dropped in the thread (bot token as bearer); else why not, as text.
    A `.zip` (a repo for the assistant to read) has a limit of its own, MAX_ZIP_BYTES."""
    name = str(file.get("name") or "file")
    if file.get("filetype") == "zip" or is_zip(name):
        max_bytes = min(max_bytes, MAX_ZIP_BYTES)
    size = file.get("size")
    if isinstance(size, int) and size > max_bytes:
        return f"“{escape(clip(name, 80))}” is {size:,} bytes; the limit is {max_bytes:,}."
    url = file.get("url_private_download") or file.get("url_private")
    if not isinstance(url, str) or not is_slack_file_url(url, client.base_url):
        return f"I cannot download “{escape(clip(name, 80))}”."
    request = urllib.request.Request(url)
    # Not passed on if the download redirects: the token goes to Slack's file host alone.
    request.add_unredirected_header("Authorization", f"Bearer {client.token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            content_type = response.headers.get("Content-Type", "")
            content = response.read(max_bytes + 1)
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        return f"Downloading “{escape(clip(name, 80))}” failed: {escape(str(error))}."
    if len(content) > max_bytes:
        return f"“{escape(clip(name, 80))}” is over the limit of {max_bytes:,} bytes."
    # Without files:read Slack answers with its HTML login page, not an error.
    if "text/html" in content_type and not name.lower().endswith((".html", ".htm")):
        return (
            f"Slack did not hand over “{escape(clip(name, 80))}” "
            "(is the app missing the files:read scope?)."
        )
    return Attachment(name, content)
