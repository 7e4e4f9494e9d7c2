"""Block Kit for the wizard: engine messages in, Slack payloads out. Pure: no client calls.

Slack's limits (slack-notes): 50 blocks a message, 3,000 characters a section, 75 a button's
text, 2,000 its value, 255 an action id, 25 elements an actions block, and `text` under 4,000.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assistant import Proposal
from bot.slack.text import clip, escape, safe_cut
from flows import EDIT_MENU, EditMenu, Message, Notice, OptionView, Problem, Question, Session
from storage.sessions import StoredSession

Block = dict[str, Any]

SECTION_LIMIT = 3_000
TEXT_LIMIT = 3_900
BUTTON_TEXT_LIMIT = 75
MAX_BLOCKS = 50
ANSWER_ACTION = "wizard_answer"
RESULT_ACTIONS = (
    "result_approve",
    "result_preflight",
    "result_edit",
    "result_regenerate",
    "result_cancel",
)
RUN_CANCEL_ACTION = "run_cancel"
RUN_FIX_ACTION = "run_fix"
"""A fix button's action id is `run_fix:<FixAction>`."""
RUN_STALL_RESTART_ACTION = "run_stall_restart"
"""A stalled run's *Restart from the last checkpoint* (bot.runs.controls)."""
RUN_STALL_WAIT_ACTION = "run_stall_wait"
"""A stalled run's *Keep waiting* (bot.runs.controls)."""
RUN_PAUSE_ACTION = "run_pause"
"""A running LocalBackend run's *Pause*: its job stopped, its checkpoints kept
(bot.runs.controls)."""
RUN_RESUME_ACTION = "run_resume"
"""A paused run's *Resume*: a new job goes on from the last checkpoint (bot.runs.controls)."""
RUN_RERUN_ACTION = "run_rerun"
"""A finished or failed run's *Run again with changes* (bot.runs.rerun)."""
RUN_CONTINUE_RL_ACTION = "run_continue_rl"
"""A succeeded fine-tuning run's *Continue with RL from this model* (bot.runs.rerun)."""
RUN_COMPARE_ACTION = "run_compare_previous"
"""A finished run's *Compare with the previous run of this project* (bot.runs.compare)."""
RUN_TRY_ACTION = "run_try"
"""A succeeded run's *Try it*: a modal asking for a prompt (bot.runs.trained_model.tryit)."""
RUN_CHECKPOINTS_ACTION = "run_checkpoints"
"""A finished run's *Checkpoints and export*: its checkpoints listed
(bot.runs.trained_model.model_export)."""
RUN_CHOOSE_CHECKPOINT_ACTION = "run_choose_checkpoint"
"""That list's choice of the step that is the model; an option's value is `<run id>:<step>`."""
RUN_EXPORT_ACTION = "run_export"
"""That list's *Export to Hugging Face*: a modal asking for the repository."""
RUN_DOWNLOAD_ACTION = "run_download"
"""That list's *Download the adapter*: a signed, expiring link, shown to the owner alone."""
RUN_EXPORT_MODAL = "run_export_modal"
"""The callback_id of the export modal; private_metadata as TRY_MODAL's."""
ANSWER_FEEDBACK_ACTION = "answer_feedback"
"""The feedback buttons under a streamed answer of the assistant (bot.slack.answer_feedback)."""
TRY_MODAL = "run_try_modal"
"""The callback_id of that modal; its private_metadata is the run's id, a space, its channel."""
RESULT_STEP = "result"
"""How the result buttons are remembered among the thread's question messages (no flow step
has this id)."""
PROPOSAL_STEP = "proposal"
"""How the assistant's proposals are remembered among the thread's question messages."""
PROPOSAL_ACCEPT = "proposal_accept"
PROPOSAL_REANSWER = "proposal_reanswer"
BUTTON_VALUE_LIMIT = 2_000
PROPOSAL_HELD = "held"
"""Accept's value when the proposal is too long for it: the bot looks it up by the message."""


@dataclass(frozen=True)
class SlackMessage:
    """What chat.postMessage / chat.update need: fallback text and blocks."""

    text: str
    blocks: list[Block]
    step_id: str | None = None
    """Set when the message asks a question (so it can be updated once answered)."""


def sections(text: str) -> list[Block]:
    """Text as mrkdwn sections of at most 3,000 characters each (split on line ends)."""
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": chunk}}
        for chunk in line_chunks(text, SECTION_LIMIT)
    ]


def line_chunks(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, split on line ends (a longer line on its
    own, cut where no `&lt;`-style escape is split); at least one piece, never empty."""
    chunks: list[str] = []
    current = ""
    for line in text.split("\n"):
        while len(line) > limit:
            if current:
                chunks.append(current)
                current = ""
            cut = safe_cut(line, limit)  # `&lt;` must not be split across pieces
            chunks.append(line[:cut])
            line = line[cut:]
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) > limit:
            chunks.append(current)
            current = line
        else:
            current = candidate
    if current or not chunks:
        chunks.append(current or " ")
    return chunks


def question_message(question: Question) -> SlackMessage:
    """One question: its text, then buttons (choices) or a hint to reply in the thread."""
    progress = str(question.progress) if question.progress else ""
    # Engine text can quote the user: escaped, so "<!channel>" in an answer pings nobody.
    blocks = sections(escape(question.text))
    if question.options:
        blocks.extend(_buttons(question.step_id, question.options))
    hint = escape(question.hint) or ("" if question.options else "Reply in this thread.")
    if question.options and question.hint:
        hint += " Or type the option's number."
    context = " · ".join(part for part in (progress, hint) if part)
    if context:
        blocks.append(
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": clip(context, SECTION_LIMIT)}],
            }
        )
    fallback = question.text
    if question.options:
        fallback += "\n" + "\n".join(f"{o.number}. {o.label}" for o in question.options)
    # `text` is mrkdwn too (notifications show it): escaped like the blocks.
    return SlackMessage(clip(escape(fallback), TEXT_LIMIT), blocks[:MAX_BLOCKS], question.step_id)


def _buttons(step_id: str, options: tuple[OptionView, ...]) -> list[Block]:
    elements = []
    for option in options:
        button: Block = {
            "type": "button",
            "action_id": f"{ANSWER_ACTION}:{option.number}",
            "text": {
                "type": "plain_text",
                "text": clip(f"{option.number}. {option.label}", BUTTON_TEXT_LIMIT),
            },
            "value": f"{step_id}|{option.value}"[:2000],
        }
        if option.recommended:
            button["style"] = "primary"
        elements.append(button)
    # 25 elements per actions block at most.
    return [
        {"type": "actions", "block_id": f"answer:{step_id}:{i}", "elements": elements[i : i + 25]}
        for i in range(0, len(elements), 25)
    ]


EDIT_BUTTONS_MAX = 5
"""More answered questions than this are offered in a select menu instead of buttons."""
SELECT_OPTIONS_MAX = 100
SELECT_OPTION_VALUE_LIMIT = 150


def edit_menu_message(menu: EditMenu) -> SlackMessage:
    """The Edit menu: the answered questions by their labels, as buttons (a select menu when
    there are more than EDIT_BUTTONS_MAX). A pick answers like a button of ANSWER_ACTION whose
    value is `EDIT_MENU|<step id>`."""
    blocks = sections(escape(menu.text))
    options = menu.options[:SELECT_OPTIONS_MAX]
    if 0 < len(options) <= EDIT_BUTTONS_MAX:
        blocks.extend(_buttons(EDIT_MENU, options))
    elif options:
        blocks.append(
            {
                "type": "actions",
                "block_id": f"answer:{EDIT_MENU}:select",
                "elements": [
                    {
                        "type": "static_select",
                        "action_id": f"{ANSWER_ACTION}:0",
                        "placeholder": {"type": "plain_text", "text": "Pick an answer to change"},
                        "options": [_select_option(option) for option in options],
                    }
                ],
            }
        )
    if menu.hint:
        hint = escape(menu.hint)
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": hint}]})
    fallback = "\n".join([menu.text, *(f"{o.number}. {o.label}" for o in menu.options)])
    return SlackMessage(clip(escape(fallback), TEXT_LIMIT), blocks[:MAX_BLOCKS])


def _select_option(option: OptionView) -> Block:
    """A static_select option: text and description at most 75 characters, value 150."""
    choice: Block = {
        "text": {"type": "plain_text", "text": clip(option.label, BUTTON_TEXT_LIMIT)},
        "value": f"{EDIT_MENU}|{option.value}"[:SELECT_OPTION_VALUE_LIMIT],
    }
    if option.description:
        choice["description"] = {
            "type": "plain_text",
            "text": clip(option.description, BUTTON_TEXT_LIMIT),
        }
    return choice


def parse_answer_value(value: str) -> tuple[str, str] | None:
    """A button's value back into (step_id, option value); None when it is not ours."""
    step_id, sep, option = value.partition("|")
    return (step_id, option) if sep and step_id else None


def text_message(text: str) -> SlackMessage:
    """mrkdwn text as a message: the text clipped for `text`, its sections for the blocks."""
    return SlackMessage(clip(text, TEXT_LIMIT), sections(text)[:MAX_BLOCKS])


def notice_message(notice: Notice) -> SlackMessage:
    return text_message(escape(notice.text))


def problem_message(problem: Problem) -> SlackMessage:
    return text_message(f":warning: {escape(problem.text)}")


def engine_message(message: Message) -> SlackMessage:
    if isinstance(message, Question):
        return question_message(message)
    if isinstance(message, EditMenu):
        return edit_menu_message(message)
    if isinstance(message, Problem):
        return problem_message(message)
    return notice_message(message)


def prefaced(before: Sequence[SlackMessage], message: SlackMessage) -> SlackMessage:
    """`message` with what comes `before` it (notes, a problem with the last reply) on top: one
    post instead of several. The question's own blocks (its buttons) are kept whole."""
    if not before:
        return message
    room = MAX_BLOCKS - len(message.blocks)
    blocks = [block for earlier in before for block in earlier.blocks][: max(room, 0)]
    text = "\n\n".join([*(earlier.text for earlier in before), message.text])
    return SlackMessage(clip(text, TEXT_LIMIT), [*blocks, *message.blocks], message.step_id)


def proposal_message(proposal: Proposal) -> SlackMessage:
    """What the assistant read in a reply, with Accept / Re-answer. The model's text is
    untrusted: escaped like the user's. Accept carries the proposal (or, too long for a
    button's value, PROPOSAL_HELD); Re-answer the question's step."""
    text = escape(proposal.text)
    value = proposal.to_json()
    buttons: list[Block] = [
        {
            "type": "button",
            "action_id": PROPOSAL_ACCEPT,
            "text": {"type": "plain_text", "text": "Accept"},
            "style": "primary",
            "value": value if len(value) <= BUTTON_VALUE_LIMIT else PROPOSAL_HELD,
        },
        {
            "type": "button",
            "action_id": PROPOSAL_REANSWER,
            "text": {"type": "plain_text", "text": "Re-answer"},
            "value": proposal.step_id[:BUTTON_VALUE_LIMIT],
        },
    ]
    blocks = [
        *sections(text)[: MAX_BLOCKS - 1],
        {"type": "actions", "block_id": f"proposal:{proposal.step_id}", "elements": buttons},
    ]
    return SlackMessage(clip(text, TEXT_LIMIT), blocks)


def answered_message(question_text: str, shown: str, note: str = "") -> SlackMessage:
    """A question once answered: its text and the answer, without buttons; `note` (engine
    text, escaped here) under it."""
    answer = escape(clip(shown, 1_000)) or "(empty)"
    question = clip(escape(question_text), SECTION_LIMIT - len(answer) - 10)
    said = text_message(f"{question}\n:white_check_mark: *{answer}*")
    if not note:
        return said
    context: Block = {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": clip(escape(note), SECTION_LIMIT)}],
    }
    return SlackMessage(
        clip(f"{said.text}\n{escape(note)}", TEXT_LIMIT), [*said.blocks[: MAX_BLOCKS - 1], context]
    )


def superseded_message(question_text: str) -> SlackMessage:
    """A question that is no longer the open one (a newer question is further down the
    thread): its text, without buttons."""
    question = clip(escape(question_text), SECTION_LIMIT - 60)
    return text_message(f"{question}\n:arrow_down: _No longer open: the open question is below._")


def feedback_buttons() -> Block:
    """Helpful / not helpful under an assistant's answer (Block Kit's feedback buttons, in a
    context actions block); the click's message ts says which answer."""
    return {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": ANSWER_FEEDBACK_ACTION,
                "positive_button": {
                    "text": {"type": "plain_text", "text": "Helpful"},
                    "value": "helpful",
                    "accessibility_label": "This answer was helpful",
                },
                "negative_button": {
                    "text": {"type": "plain_text", "text": "Not helpful"},
                    "value": "unhelpful",
                    "accessibility_label": "This answer was not helpful",
                },
            }
        ],
    }


def result_buttons(session_ref: str, *, preflight: bool = False) -> Block:
    """Approve and run / Preflight (where an endpoint is configured) / Edit an answer /
    Regenerate / Cancel, under the generated script."""
    labels = ("Approve and run", "Preflight", "Edit an answer", "Regenerate", "Cancel")
    elements: list[Block] = []
    for action_id, label in zip(RESULT_ACTIONS, labels, strict=True):
        if action_id == "result_preflight" and not preflight:
            continue
        button: Block = {
            "type": "button",
            "action_id": action_id,
            "text": {"type": "plain_text", "text": label},
            "value": session_ref[:2000],
        }
        if action_id == "result_approve":
            button["style"] = "primary"
        if action_id == "result_cancel":
            button["style"] = "danger"
        elements.append(button)
    return {"type": "actions", "block_id": "result", "elements": elements}


START_ONE = "Start one with `/train-rl` (RL) or `/train-sft` (fine-tuning)."


def session_title(session: Session) -> str:
    """What a wizard is about, in a list: the RL wizard's task (or the one its command gave), a
    fine-tuning wizard's run name once given. Plain text: escape it where it goes."""
    if session.flow == "train-sft":
        name = session.answers.get("run_name")
        return f"Fine-tuning (SFT){f' {name}' if name else ''}"
    task = session.answers.get("task") or session.prefill.get("task")
    return str(task or "(task not given yet)")


def sessions_text(sessions: Sequence[StoredSession]) -> str:
    """A user's wizards, one line each (the first 20): where, the task, the state, when."""
    if not sessions:
        return f"You have no wizards yet. {START_ONE}"
    lines = [f"Your wizards ({len(sessions)}):"]
    for stored in sessions[:20]:
        state = "expired" if stored.expired else stored.session.status
        task = session_title(stored.session)
        lines.append(
            f"• <#{stored.key.channel}> {escape(clip(str(task), 80))}: {state}, "
            f"updated {stored.updated_at:%Y-%m-%d %H:%M} UTC"
        )
    return "\n".join(lines)
