"""Tool code given at the tools question is offered as tool schemas (read from the code, no
model), confirmed like any proposal."""

from __future__ import annotations

from assistant import Assistant
from flows import TRAIN_RL, Attachment, Notice, Reply, advance
from tests.assistant.conftest import USER, open_step, question_of, session_after
from tests.fakes.openai_server import FakeOpenAI

TO_TOOLS = [
    "yes",
    "multi",
    "Answer questions about the user's inbox.",
    "inline",
    '[{"question": "When is the offsite?"}]',
    "skip",
    "yes",
    "default",  # what the agent sees: the question
]
TOOL_CODE = '''
def search_inbox(keywords: list[str], from_addr: str | None = None) -> list[dict]:
    """Search the inbox for emails that contain all the keywords.

    Args:
        keywords: Words that must all appear.
        from_addr: Only emails sent from this address.
    """
    return []


def read_email(message_id: str) -> dict | None:
    """Read one email by its message id."""
    return None
'''


def test_a_tool_file_is_offered_as_schemas_and_stored_when_accepted(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_TOOLS)
    assert open_step(session) == "tools"
    reply = Reply(attachments=(Attachment("email_tools.py", TOOL_CODE.encode()),))

    assisted = assistant.respond(TRAIN_RL, session, reply, USER)

    assert fake.requests == []  # read from the code, no model
    assert assisted.turn.session == session
    proposal = assisted.proposal
    assert proposal is not None and proposal.step_id == "tools"
    assert proposal.shown == "search_inbox, read_email"
    assert (
        "• search_inbox(keywords: array of string, from_addr: string (optional)): Search the "
        "inbox for emails that contain all the keywords." in proposal.reason
    )
    stored = advance(TRAIN_RL, session, proposal.as_reply()).session
    assert [t["function"]["name"] for t in stored.answers["tools"]] == [
        "search_inbox",
        "read_email",
    ]
    assert open_step(stored) == "final_answer_tool"  # asked once the tools are known


def test_pasted_tool_code_is_offered_too(assistant: Assistant) -> None:
    session = session_after(TO_TOOLS)

    assisted = assistant.respond(TRAIN_RL, session, Reply(text=f"```python\n{TOOL_CODE}```"), USER)

    assert assisted.proposal is not None
    assert assisted.proposal.shown == "search_inbox, read_email"


def test_code_with_no_tool_in_it_is_left_to_the_engine(
    assistant: Assistant, fake: FakeOpenAI
) -> None:
    session = session_after(TO_TOOLS)

    assisted = assistant.respond(TRAIN_RL, session, Reply(text="```\nimport os\nx = 1\n```"), USER)

    assert assisted.proposal is None
    assert fake.requests == []  # code and data are not free text for the model to guess
    assert assisted.turn == advance(TRAIN_RL, session, Reply(text="```\nimport os\nx = 1\n```"))


def test_a_tool_file_with_a_key_in_it_is_not_read(assistant: Assistant, fake: FakeOpenAI) -> None:
    session = session_after(TO_TOOLS)
    code = TOOL_CODE + '\nTOKEN = "xoxb-' + "1234567890-abcdefghij" + '"\n'

    assisted = assistant.respond(
        TRAIN_RL, session, Reply(attachments=(Attachment("tools.py", code.encode()),)), USER
    )

    assert assisted.proposal is None
    assert fake.requests == []
    assert any("Slack token" in m.text for m in assisted.turn.messages if not isinstance(m, Notice))
    assert question_of(assisted.turn.messages).step_id == "tools"
