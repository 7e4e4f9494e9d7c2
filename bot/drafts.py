"""The assistant's drafts in Slack: a draft is posted as code with *Use it / Edit / Draft again*
(through the outbox, as an Offer, like the assistant's other proposals). Use it is the proposal's
Accept; Edit posts the code to copy, change and send back; Draft again asks for another. Pure:
the messages and effects, no client calls (WizardService carries out the clicks)."""

from __future__ import annotations

from assistant import Proposal
from bot.blocks import (
    BUTTON_VALUE_LIMIT,
    MAX_BLOCKS,
    PROPOSAL_ACCEPT,
    PROPOSAL_HELD,
    PROPOSAL_STEP,
    SECTION_LIMIT,
    TEXT_LIMIT,
    Block,
    SlackMessage,
    line_chunks,
    proposal_message,
    sections,
)
from bot.slack_text import clip, escape
from bot.thread_effects import Post, Retire, ThreadEffect

DRAFT_EDIT = "draft_edit"
DRAFT_AGAIN = "draft_again"
DRAFT_ACTIONS = (DRAFT_EDIT, DRAFT_AGAIN)
FENCE = "```"
CODE_CHUNK = SECTION_LIMIT - 2 * len(FENCE) - 2
EDIT_NOTE = (
    "Here is the draft to edit: copy it, change it, and reply with your version between triple "
    "backticks (or as a `.py` file). Nothing was stored."
)


def offer_message(proposal: Proposal) -> SlackMessage:
    """The message that offers a proposal: a draft's, or a reading's (Accept / Re-answer)."""
    return draft_message(proposal) if proposal.is_draft else proposal_message(proposal)


def draft_message(proposal: Proposal) -> SlackMessage:
    """A draft: what it is and how it was checked, its code (escaped: the model's text is
    untrusted), then Use it / Edit / Draft again. Use it carries the proposal, or PROPOSAL_HELD
    when it is too long for a button (the bot keeps it with the message); Edit always looks it
    up by the message."""
    value = proposal.to_json()
    buttons: list[Block] = [
        {
            "type": "button",
            "action_id": PROPOSAL_ACCEPT,
            "text": {"type": "plain_text", "text": "Use it"},
            "style": "primary",
            "value": value if len(value) <= BUTTON_VALUE_LIMIT else PROPOSAL_HELD,
        },
        {
            "type": "button",
            "action_id": DRAFT_EDIT,
            "text": {"type": "plain_text", "text": "Edit"},
            "value": PROPOSAL_HELD,
        },
        {
            "type": "button",
            "action_id": DRAFT_AGAIN,
            "text": {"type": "plain_text", "text": "Draft again"},
            "value": proposal.step_id[:BUTTON_VALUE_LIMIT],
        },
    ]
    intro = escape(f"{proposal.headline}\n{proposal.reason}".strip())
    blocks = [*sections(intro), *code_sections(proposal.reply_text)][: MAX_BLOCKS - 2]
    blocks += [
        *sections("Use it?"),
        {"type": "actions", "block_id": f"proposal:{proposal.step_id}", "elements": buttons},
    ]
    return SlackMessage(clip(escape(proposal.text), TEXT_LIMIT), blocks)


def edit_effects(proposal: Proposal) -> list[ThreadEffect]:
    """Edit: the draft's buttons go, and its code is posted to copy, change and send back (the
    open question stays open: the edited code is an answer like any other)."""
    text = f"{EDIT_NOTE}\n{FENCE}\n{proposal.reply_text.rstrip()}\n{FENCE}"
    message = SlackMessage(
        clip(escape(text), TEXT_LIMIT),
        [*sections(EDIT_NOTE), *code_sections(proposal.reply_text)][:MAX_BLOCKS],
    )
    return [Retire(PROPOSAL_STEP, "Edit it: your version goes below"), Post(message)]


def code_sections(code: str) -> list[Block]:
    """Code as fenced mrkdwn sections, split on line ends so each section's fence is whole."""
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"{FENCE}\n{chunk}\n{FENCE}"}}
        for chunk in line_chunks(escape(code.rstrip()), CODE_CHUNK)
    ]
