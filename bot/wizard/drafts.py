"""The assistant's drafts in Slack: a draft is posted as code with *Use it / Edit / Draft again*
(through the outbox, as an Offer, like the assistant's other proposals); a long one (code over
MAX_LINES_SHOWN lines, or more than one section) is uploaded into the thread as a file
first, and the message with the buttons names the file. Use it is the proposal's Accept; Edit
posts the code to copy, change and send back; Draft again asks for another. Pure: the messages
and effects, no client calls (bot.wizard.proposals carries out the clicks)."""

from __future__ import annotations

from assistant import JSON_DRAFTS, Proposal
from bot.delivery.effects import Offer, Post, Retire, ThreadEffect, Upload
from bot.slack.blocks import (
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
from bot.slack.text import clip, escape

DRAFT_EDIT = "draft_edit"
DRAFT_AGAIN = "draft_again"
DRAFT_ACTIONS = (DRAFT_EDIT, DRAFT_AGAIN)
FENCE = "```"
CODE_CHUNK = SECTION_LIMIT - 2 * len(FENCE) - 2
MAX_LINES_SHOWN = 40
"""A longer draft is posted as a file: it reads better there than as a wall of code."""
EDIT_NOTE = (
    "Here is the draft to edit: copy it, change it, and reply with your version between triple "
    "backticks (or as a `.py` file). Nothing was stored."
)


def offer_effects(proposal: Proposal) -> list[ThreadEffect]:
    """What offers a proposal in the thread: its message, after its file for a long draft."""
    offer = Offer(proposal, offer_message(proposal))
    if not posted_as_file(proposal):
        return [offer]
    title = f"Draft: {proposal.shown}"
    return [Upload(draft_file_name(proposal), title, proposal.reply_text), offer]


def offer_message(proposal: Proposal) -> SlackMessage:
    """The message that offers a proposal: a draft's, or a reading's (Accept / Re-answer)."""
    return draft_message(proposal) if proposal.is_draft else proposal_message(proposal)


def posted_as_file(proposal: Proposal) -> bool:
    """Is this a draft too long to read in a message (its code goes into a file)? Code over
    MAX_LINES_SHOWN lines, or anything over one section (JSON's many short lines read well)."""
    if not proposal.is_draft:
        return False
    code = proposal.reply_text.rstrip()
    if len(escape(code)) > CODE_CHUNK:
        return True
    return proposal.step_id not in JSON_DRAFTS and len(code.splitlines()) > MAX_LINES_SHOWN


def draft_file_name(proposal: Proposal) -> str:
    """`reward_logic_draft.py`; JSON drafts (the tool schemas) are `.json`."""
    suffix = "json" if proposal.step_id in JSON_DRAFTS else "py"
    return f"{proposal.step_id}_draft.{suffix}"


def offered_text(proposal: Proposal) -> str:
    """What the offer says, as plain text (remembered once posted, shown once answered): a
    long draft names its file instead of its code."""
    if not posted_as_file(proposal):
        return proposal.text
    reason = f"\n{proposal.reason}" if proposal.reason else ""
    return f"{proposal.headline}{reason}\n{_in_the_file(draft_file_name(proposal))}\nUse it?"


def _in_the_file(name: str) -> str:
    return (
        f"The code is in the file {name} in this thread, just above. Edit posts it here to change."
    )


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
    if posted_as_file(proposal):
        code = sections(_in_the_file(f"*{escape(draft_file_name(proposal))}*"))
    else:
        code = code_sections(proposal.reply_text)
    blocks = [*sections(intro), *code][: MAX_BLOCKS - 2]
    blocks += [
        *sections("Use it?"),
        {"type": "actions", "block_id": f"proposal:{proposal.step_id}", "elements": buttons},
    ]
    return SlackMessage(clip(escape(offered_text(proposal)), TEXT_LIMIT), blocks)


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
