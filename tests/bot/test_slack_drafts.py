"""Drafts in Slack threads: `draft` at a code question posts the model's code (checked like typed
code and run in the sandbox first) with Use it / Edit / Draft again; it is stored only on the
owner's Use it. A real `openai` client against the scripted fake model on loopback, the fake
Slack, a real database."""

from __future__ import annotations

import json

import pytest

from bot.wizard.drafts import DRAFT_AGAIN
from tests.bot.conftest import BotFactory, SlackUser, with_the_assistant
from tests.bot.test_slack_assistant import (
    NO_ADVICE,
    ROWS,
    buttons_of,
    now_shown,
    proposals,
    stored_answers,
)
from tests.fakes.openai_server import FakeOpenAI, Scripted
from tests.fakes.slack_requests import block_actions
from tests.fakes.workspace import USER_ID

EXACT_REWARD = (
    "def compute_reward(scenario, answer):\n"
    "    return 1.0 if answer.strip() == scenario['answer'] else 0.0\n"
)
NETWORKED = (
    "import socket\n\n"
    "def compute_reward(scenario, answer):\n"
    "    socket.socket().connect(('127.0.0.1', 9))\n"
    "    return 1.0\n"
)
DRAFT_BUTTONS = ["Use it", "Edit", "Draft again"]
TOOL_TASK = "Answer questions about the user's inbox by searching and reading their email."
INBOX_ROWS = [
    {"prompt": "Which hotel is booked for the Berlin offsite?", "answer": "Hotel Adlon"},
    {"prompt": "What is the new VPN server address?", "answer": "vpn2.acme.example"},
]
INBOX_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {parameter: {"type": "string", "description": parameter}},
                "required": [parameter],
            },
        },
    }
    for name, description, parameter in [
        ("search_inbox", "Search the inbox for a keyword.", "keyword"),
        ("read_email", "Read one message by its id.", "message_id"),
        ("return_final_answer", "Give the final answer and end.", "answer"),
    ]
]


@pytest.fixture
def user(make_bot: BotFactory, model: FakeOpenAI) -> SlackUser:
    owner = with_the_assistant(make_bot, model)
    model.script(NO_ADVICE)
    to_the_reward_code(owner)
    model.requests.clear()
    return owner


def to_the_reward_code(user: SlackUser) -> None:
    user.click("Only logged or static scenarios")
    user.click("Single-turn")
    user.reply("Answer arithmetic questions with only the final number.")
    user.click("Paste them here")
    user.reply(f"```\n{ROWS}\n```")
    user.reply("skip")
    user.reply("default")  # what the agent sees
    user.click("Programmatic")
    assert user.asked() == "reward_logic"


def drafted(code: str) -> Scripted:
    return Scripted.json({"code": code, "summary": "Exact match with the expected answer."})


def test_a_draft_is_posted_as_code_and_stored_only_on_use_it(
    user: SlackUser, model: FakeOpenAI
) -> None:
    before = stored_answers(user)
    model.script(drafted(EXACT_REWARD))

    user.reply("draft")

    assert stored_answers(user) == before
    (offer,) = proposals(user)
    assert buttons_of(offer) == DRAFT_BUTTONS
    shown = "\n".join(b["text"]["text"] for b in offer.blocks or [] if b["type"] == "section")
    assert "A draft of the *Reward code* (2 lines):" in shown
    assert "run on 3 scenarios in a sandbox" in shown
    assert "```\ndef compute_reward(scenario, answer):" in shown
    assert "scenario['answer']" in shown

    user.click("Use it")

    assert stored_answers(user)["reward_logic"] == {"kind": "function", "code": EXACT_REWARD}
    assert user.asked() != "reward_logic"
    retired = now_shown(user, offer)
    assert buttons_of(retired) == []
    assert "Accepted" in retired.text
    assert len(model.requests) == 1


def test_draft_again_asks_for_another_and_retires_the_first(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(drafted(EXACT_REWARD), drafted(EXACT_REWARD.replace("1.0 if", "2.0 if")))
    user.reply("draft")
    (first,) = proposals(user)

    user.click("Draft again")

    (second,) = proposals(user)  # the first lost its buttons
    assert second.ts != first.ts
    assert buttons_of(now_shown(user, first)) == []
    assert buttons_of(second) == DRAFT_BUTTONS
    assert "2.0 if" in second.text
    assert "reward_logic" not in stored_answers(user)
    assert len(model.requests) == 2


def test_edit_posts_the_code_to_change_and_the_edited_reply_counts(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(drafted(EXACT_REWARD))
    user.reply("draft")
    (offer,) = proposals(user)

    user.click("Edit")

    assert buttons_of(now_shown(user, offer)) == []
    edit = user.bot_messages()[-1]
    assert "Here is the draft to edit" in edit.text
    assert "def compute_reward(scenario, answer):" in edit.text
    assert "reward_logic" not in stored_answers(user)
    edited = EXACT_REWARD.replace("1.0 if", "2.0 if")

    user.reply(f"```\n{edited}```")

    assert stored_answers(user)["reward_logic"] == {"kind": "function", "code": edited}
    assert len(model.requests) == 1


def test_a_draft_the_sandbox_stops_twice_is_reported_and_nothing_is_offered(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(drafted(NETWORKED), drafted(NETWORKED))

    user.reply("draft")

    assert proposals(user) == []
    said = "\n".join(m.text for m in user.bot_messages())
    assert "the sandbox stopped it: the code opened a network socket" in said
    assert "reply `draft` to try once more" in said
    assert "stopped it" in json.dumps(model.requests[1]["messages"])  # the retry was told why
    assert user.asked() == "reward_logic"


def test_without_a_model_draft_says_the_assistant_is_not_configured(
    make_bot: BotFactory,
) -> None:
    owner = SlackUser(make_bot())
    owner.command()
    to_the_reward_code(owner)

    owner.reply("draft")

    assert "The assistant is not configured, so I cannot draft code" in "\n".join(
        m.text for m in owner.bot_messages()
    )
    assert "reward_logic" not in stored_answers(owner)
    assert owner.asked() == "reward_logic"


def test_a_late_draft_again_after_the_question_was_answered_does_nothing(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(drafted(EXACT_REWARD))
    user.reply("draft")
    (offer,) = proposals(user)
    user.reply(f"```\n{EXACT_REWARD}```")  # answered by typing instead
    answers = stored_answers(user)
    assert answers["reward_logic"] == {"kind": "function", "code": EXACT_REWARD}

    late = block_actions(
        DRAFT_AGAIN, "reward_logic", message_ts=offer.ts, user_id=USER_ID, message=offer.to_slack()
    )
    assert user.bot.dispatch(late) == 200
    user.fake.wait_for(lambda f: any("not drafted again" in m.text for m in f.ephemerals()))

    assert stored_answers(user) == answers
    assert len(model.requests) == 1  # no second draft for a question that is gone


def test_the_tools_drafted_in_a_thread_are_stored_on_use_it(
    make_bot: BotFactory, model: FakeOpenAI
) -> None:
    owner = SlackUser(
        make_bot(
            ARTBOT_LLM_MODEL="gpt-test",
            ARTBOT_LLM_BASE_URL=model.base_url,
            ARTBOT_LLM_API_KEY=model.key,
        )
    )
    owner.command()
    model.script(NO_ADVICE)
    owner.click("Episodes can be recreated")
    owner.click("Multi-turn")
    owner.reply(TOOL_TASK)
    owner.click("Paste them here")
    owner.reply(f"```\n{json.dumps(INBOX_ROWS)}\n```")
    owner.reply("skip")
    owner.click("Yes, it calls tools")
    owner.reply("default")  # what the agent sees
    assert owner.asked() == "tools"
    model.script(Scripted.json({"tools_json": json.dumps(INBOX_TOOLS), "summary": "Search."}))

    owner.reply("draft")

    assert "tools" not in stored_answers(owner)
    (offer,) = proposals(owner)
    assert buttons_of(offer) == DRAFT_BUTTONS
    shown = "\n".join(b["text"]["text"] for b in offer.blocks or [] if b["type"] == "section")
    assert "A draft of the *Tools*" in shown and "search_inbox" in shown

    owner.click("Use it")

    assert stored_answers(owner)["tools"] == INBOX_TOOLS
    assert owner.asked() == "final_answer_tool"
    request = model.requests[-1]
    assert request["response_format"]["json_schema"]["schema"]["required"] == [
        "tools_json",
        "summary",
    ]


LONG_REWARD = (
    "import re\n\n\n"
    "def compute_reward(scenario, answer):\n"
    '    """1.0 for the expected number, partial credit for a close one, 0.0 otherwise."""\n'
    + "".join(
        f"    # step {i}: answers may carry units, commas or words around the number\n"
        for i in range(40)
    )
    + "    found = re.findall(r'-?\\d+(?:\\.\\d+)?', answer.replace(',', ''))\n"
    "    if not found:\n"
    "        return 0.0\n"
    "    return 1.0 if found[-1] == scenario['answer'] else 0.0\n"
)


def test_a_long_draft_is_posted_as_a_file_and_use_it_stores_exactly_its_code(
    user: SlackUser, model: FakeOpenAI
) -> None:
    assert len(LONG_REWARD.splitlines()) > 40
    model.script(drafted(LONG_REWARD))

    user.reply("draft")

    (uploaded,) = user.fake.uploaded_files()
    assert uploaded.name == "reward_logic_draft.py"
    assert uploaded.content.decode() == LONG_REWARD  # exactly the code, not escaped
    assert (uploaded.channel, uploaded.thread_ts) == (user.channel, user.thread)
    (offer,) = proposals(user)
    shared = next(m for m in user.fake.thread(user.channel, user.thread) if m.files)
    assert float(shared.ts) < float(offer.ts)  # the file first, then the buttons
    assert buttons_of(offer) == DRAFT_BUTTONS
    shown = "\n".join(b["text"]["text"] for b in offer.blocks or [] if b["type"] == "section")
    assert "A draft of the *Reward code* (49 lines):" in shown
    assert "The code is in the file *reward_logic_draft.py* in this thread" in shown
    assert "```" not in shown and "re.findall" not in offer.text  # no code in the message
    assert "reward_logic" not in stored_answers(user)

    user.click("Use it")

    assert stored_answers(user)["reward_logic"] == {"kind": "function", "code": LONG_REWARD}
    retired = now_shown(user, offer)
    assert buttons_of(retired) == [] and "Accepted" in retired.text
    assert "reward_logic_draft.py" in retired.text
    assert len(model.requests) == 1


def test_edit_of_a_long_draft_posts_its_code_in_the_thread(
    user: SlackUser, model: FakeOpenAI
) -> None:
    model.script(drafted(LONG_REWARD))
    user.reply("draft")

    user.click("Edit")

    edit = user.bot_messages()[-1]
    assert "Here is the draft to edit" in edit.text
    assert "re.findall" in edit.text
    assert len(user.fake.uploaded_files()) == 1  # the draft's file, not another
    assert "reward_logic" not in stored_answers(user)


def test_a_long_draft_whose_file_slack_refuses_still_offers_its_buttons(
    user: SlackUser, model: FakeOpenAI
) -> None:
    user.fake.fail("files.getUploadURLExternal", "missing_scope")
    model.script(drafted(LONG_REWARD))

    user.reply("draft")

    assert user.fake.uploaded_files() == []
    (offer,) = proposals(user)
    assert buttons_of(offer) == DRAFT_BUTTONS

    user.click("Edit")  # the code, in the thread after all

    assert "re.findall" in user.bot_messages()[-1].text
