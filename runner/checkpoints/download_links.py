"""Download links: a checkpoint's adapter fetched without the runner's token, by whoever holds the
link, until it expires (`POST /jobs/{id}/checkpoints/{step}/download-link`, then
`GET /downloads/<signed>`).

The link is `<job id>.<step>.<expiry>.<signature>`: the signature is HMAC-SHA256 over the job
id, the step and the expiry (Unix seconds), keyed with HMAC(the runner's API token,
"artbot-download"), so that it names exactly one checkpoint of one job for a while, and a new
token voids every link made with the old one. Nothing is stored.

What a link that does not open says: not a link of this runner's shape (401); a signature that
does not match what the link names, e.g. another job's signature or a changed step or expiry
(403; checked before the expiry, so that a forger learns nothing from it); a genuine link past
its expiry (410).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from runner.errors import DownloadLinkExpired, DownloadLinkForged, DownloadLinkInvalid

KEY_PURPOSE = b"artbot-download"
SIGNED = re.compile(
    r"^(?P<job>[A-Za-z0-9_-]{1,64})\.(?P<step>\d{1,10})\.(?P<expires>\d{1,12})"
    r"\.(?P<signature>[A-Za-z0-9_-]{43})$"
)


@dataclass(frozen=True)
class SignedCheckpoint:
    """What a genuine, unexpired link opens."""

    job_id: str
    step: int
    expires_at: datetime


class DownloadSigner:
    """Makes and checks download links with a key derived from the runner's API token."""

    def __init__(self, api_token: str, clock: Callable[[], float] = time.time) -> None:
        self._key = hmac.new(api_token.encode(), KEY_PURPOSE, hashlib.sha256).digest()
        self._clock = clock

    def sign(self, job_id: str, step: int, valid_s: float) -> tuple[str, datetime]:
        """A link to checkpoint `step` of the job, valid for `valid_s`: (signed, expires_at)."""
        expires = int(self._clock() + valid_s)
        signed = f"{job_id}.{step}.{expires}.{self._signature(job_id, step, expires)}"
        return signed, datetime.fromtimestamp(expires, UTC)

    def open(self, signed: str) -> SignedCheckpoint:
        """The checkpoint the link names; DownloadLinkInvalid, ...Forged or ...Expired."""
        found = SIGNED.fullmatch(signed)
        if found is None:
            raise DownloadLinkInvalid("this is not a download link of this runner")
        job_id, step, expires = found["job"], int(found["step"]), int(found["expires"])
        expected = self._signature(job_id, step, expires)
        if not hmac.compare_digest(expected.encode(), found["signature"].encode()):
            raise DownloadLinkForged(
                "the download link's signature does not match it: ask for a new link"
            )
        expires_at = datetime.fromtimestamp(expires, UTC)
        if expires <= self._clock():
            raise DownloadLinkExpired(
                f"the download link expired at {expires_at:%Y-%m-%d %H:%M:%S} UTC: ask for a "
                "new one"
            )
        return SignedCheckpoint(job_id, step, expires_at)

    def _signature(self, job_id: str, step: int, expires: int) -> str:
        message = f"{job_id}\n{step}\n{expires}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
