"""`/train-rl` and `/train-sft`: what they ask for (a list, the runs, a comparison, help, or a new
wizard of their flow), and what to answer the user privately.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.blocks import sessions_text
from bot.wizard.opening import ThreadOpener
from flows import Flow
from storage.sessions import SessionStore

if TYPE_CHECKING:
    from bot.runs.compare import RunComparer
    from bot.runs.service import RunService

COMMAND_HELP = (
    "`/train-rl [what the agent should get better at]` starts the RL wizard in a thread, "
    "`/train-sft [what the model should learn]` the fine-tuning (SFT) wizard. "
    "`{command} list` lists your wizards, `{command} runs` your training runs, "
    "`{command} compare <run> <run>` plots two of them side by side."
)
NOT_IN_CHANNEL = (
    "I can't post in this channel yet: invite me with `/invite @artbot`, "
    "then run `{command}` again."
)
NO_RUNNER = "No GPU runner is configured for this bot."


class WizardCommand:
    """Answers `/train-rl` or `/train-sft` `[list|runs|compare|help|task]`: the words are the
    same for both; a new wizard is of the command's own flow."""

    def __init__(
        self,
        name: str,
        flow: Flow,
        opener: ThreadOpener,
        store: SessionStore,
        *,
        runs: RunService | None = None,
        comparer: RunComparer | None = None,
    ) -> None:
        self.name = name
        """The command as typed, `/train-rl`."""
        self.flow = flow
        self.opener = opener
        self.store = store
        self.runs = runs
        self.comparer = comparer
        """Two runs side by side (`/train-rl compare`); None: no runner."""

    def answer(
        self, client: WebClient, team: str, channel: str, user: str, text: str
    ) -> str | None:
        """What to answer the user privately, None when a wizard started in the channel.

        The answer goes through the command's response_url: it works even where the bot is not
        a member of the channel.
        """
        word = text.lower()
        if word == "list":
            return sessions_text(self.store.list_for_owner(user, team=team))
        if word == "runs":
            if self.runs is None:
                return NO_RUNNER
            return self.runs.runs_text(user, team)
        if word in ("help", "-h", "--help"):
            return COMMAND_HELP.format(command=self.name)
        if word == "compare" or word.startswith("compare "):
            if self.comparer is None:
                return NO_RUNNER
            return self.comparer.compare_text_command(client, user, team, text[len("compare") :])
        try:
            self.opener.start(client, team, channel, user, text, self.flow)
        except SlackApiError as error:
            if error.response.get("error") not in ("not_in_channel", "channel_not_found"):
                raise
            return NOT_IN_CHANNEL.format(command=self.name)
        return None
