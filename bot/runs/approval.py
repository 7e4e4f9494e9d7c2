"""Who may approve a script: approving runs its code on the GPU host.

One workspace (SLACK_BOT_TOKEN): as before, the wizard's owner, if on ARTBOT_APPROVERS when that
is set. Any workspace (OAuth): every member of every workspace that installs the app could run
code on the GPU host, so approving needs a policy its operator chose: ARTBOT_APPROVERS (these
users), or ARTBOT_APPROVAL=admins (an admin or owner of the workspace, as Slack's `users.info`
says, or one of ARTBOT_APPROVERS). With neither, Approve is refused with what to set, and
`artbot serve` says so at start-up. Either way only the wizard's owner approves its script, and
only in ARTBOT_RUNNER_CHANNELS when those are set.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.settings import BotSettings
from storage.sessions import SessionKey

log = logging.getLogger(__name__)

ApprovalMode = Literal["approvers", "admins", "anyone"]

NO_POLICY = (
    ":no_entry: Approving is off on this bot. It serves any workspace that installs it, and an "
    "approval runs code on the GPU host, so its operator must choose who may approve: set "
    "`ARTBOT_APPROVERS` (comma-separated user ids) or `ARTBOT_APPROVAL=admins` (each "
    "workspace's admins and owners) where `artbot serve` runs, and restart it."
)
NOT_LISTED = "You are not on this bot's list of approvers (ARTBOT_APPROVERS)."
NOT_ADMIN = (
    "Only an admin or owner of this workspace can approve runs here (ARTBOT_APPROVAL=admins)."
)
WRONG_CHANNEL = "Runs cannot be approved in this channel (ARTBOT_RUNNER_CHANNELS)."


@dataclass(frozen=True)
class ApprovalPolicy:
    """Who may approve: `mode` None is no policy (OAuth with nothing set): nobody."""

    mode: ApprovalMode | None
    approvers: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: BotSettings) -> ApprovalPolicy:
        return cls(settings.approval_mode, settings.approvers, settings.runner_channels)

    def refusal(self, client: WebClient, key: SessionKey, user: str, owner: str) -> str | None:
        """Why `user` may not approve the script of `owner`'s wizard in `key`'s thread, or None.
        `client` acts in `key`'s team (the admins policy asks Slack who `user` is there)."""
        if self.mode is None:
            return NO_POLICY
        if user != owner:
            return f"Only <@{owner}> can approve this script."
        if self.channels and key.channel not in self.channels:
            return WRONG_CHANNEL
        if self.mode == "anyone" or user in self.approvers:
            return None
        if self.mode == "approvers":
            return NOT_LISTED
        return workspace_admin_refusal(client, key.team, user)

    def start_up_line(self) -> tuple[int, str]:
        """What `artbot serve` says of this policy when it starts: a level and a line."""
        if self.mode is None:
            return logging.WARNING, (
                "approvals are refused: this bot serves any workspace (OAuth) and no approval "
                "policy is set; set ARTBOT_APPROVERS (user ids) or ARTBOT_APPROVAL=admins"
            )
        listed = f"{len(self.approvers)} listed user(s)"
        said = {
            "anyone": "any wizard's owner may approve its script (one workspace)",
            "approvers": f"only ARTBOT_APPROVERS may approve ({listed})",
            "admins": "workspace admins and owners may approve"
            + (f", and ARTBOT_APPROVERS ({listed})" if self.approvers else ""),
        }[self.mode]
        return logging.INFO, f"approvals: {said}"


def workspace_admin_refusal(client: WebClient, team: str, user: str) -> str | None:
    """None when Slack says `user` is an admin or owner of `team` (`users.info`); else why not.
    Fails closed: what cannot be checked is refused."""
    try:
        answer = client.users_info(user=user)
    except SlackApiError as error:
        code = str(error.response.get("error") or "an error")
        log.warning("users.info for an approval: %s", code)
        if code == "missing_scope":
            return (
                "Could not check that you are an admin of this workspace: the app lacks Slack's "
                "`users:read` scope here. A workspace admin must reinstall artbot."
            )
        return f"Could not check that you are an admin of this workspace (Slack said {code})."
    except OSError as error:  # Slack unreachable
        log.warning("users.info for an approval: %s", type(error).__name__)
        return "Could not reach Slack to check that you are an admin of this workspace."
    profile: dict[str, Any] = answer.get("user") or {}
    teams = (profile.get("enterprise_user") or {}).get("teams") or []
    if profile.get("team_id") != team and team not in teams:
        return NOT_ADMIN  # someone from another workspace (a shared channel): not an admin here
    if profile.get("deleted") or profile.get("is_bot"):
        return NOT_ADMIN
    if profile.get("is_admin") or profile.get("is_owner") or profile.get("is_primary_owner"):
        return None
    return NOT_ADMIN
