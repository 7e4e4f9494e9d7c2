"""What a person reads: every question is a question, no internal id ever shows, progress never
jumps, the Edit menu names questions by their labels, and an empty reply takes a default."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest

from flows import (
    EDIT_MENU,
    Answered,
    EditMenu,
    Notice,
    Problem,
    Progress,
    Question,
    Reply,
    Session,
    Turn,
    advance,
    begin,
)
from flows.definition.steps import Choice, Text, ValuesMenu
from flows.wizards.rl.train_rl import TRAIN_RL
from tests.flows.conversation import Conversation
from tests.flows.matrix import answers_for, matrix, variant_id

INTERNAL_IDS = sorted(
    {step.id for step in TRAIN_RL.steps if "_" in step.id}
    | {f.id for step in TRAIN_RL.steps if isinstance(step, ValuesMenu) for f in step.fields}
)
"""Names only the code knows: step ids like `scenario_source`, hyperparameter keys like
`num_epochs` (ids that are plain words, like `task`, read as words)."""
CUSTOM = {"hyperparameters": "customize", "hyperparameter_values": {"num_epochs": 2}}


def visible(turn: Turn) -> list[str]:
    """Every piece of text a turn shows a person: messages, options, hints, progress, answers."""
    texts: list[str] = []
    for message in turn.messages:
        if isinstance(message, Question | EditMenu):
            texts += [message.text, message.hint]
            texts += [t for o in message.options for t in (o.label, o.description)]
        if isinstance(message, Question) and message.progress is not None:
            texts.append(str(message.progress))
        if isinstance(message, Notice | Problem):
            texts.append(message.text)
    texts += [e.shown for e in turn.effects if isinstance(e, Answered)]
    return texts


def leaked_ids(texts: list[str]) -> list[str]:
    return [
        f"{name} in {text!r}"
        for text in texts
        for name in INTERNAL_IDS
        if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)
    ]


def typed(value: Any) -> str:
    """An answer as a person types it: text as it is, numbers by str(), code as code, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, Mapping) and set(value) == {"kind", "code"}:
        return str(value["code"])
    return json.dumps(value)


def walk(answers: Mapping[str, Any]) -> list[Turn]:
    """The whole wizard answered with `answers`, plus `status`, `help` and `edit` along the way
    (the menu, then a jump back and the same answer again); every turn, in order."""
    turns = [begin(TRAIN_RL, Session.start(TRAIN_RL.id))]
    session = turns[0].session

    def say(reply: Reply) -> None:
        nonlocal session
        turns.append(advance(TRAIN_RL, session, reply))
        session = turns[-1].session

    edited = False
    while session.status == "active":
        step = TRAIN_RL.next_step(session.answers)
        assert step is not None
        value = answers.get(step.id)
        if step.id == "reward" and not edited:
            edited = True
            for command in ("status", "help", "edit", "edit 3", "back"):
                say(Reply(text=command))
            continue  # `edit 3` and `back` reopened questions: the loop answers them again
        if isinstance(step, ValuesMenu):
            for field, field_value in (value or {}).items():
                say(Reply.button(step.id, field))
                say(Reply(text=typed(field_value)))
            say(Reply.button(step.id, "done"))
        elif isinstance(step, Choice):
            say(Reply.button(step.id, value))
        elif value is None or value == "":
            say(Reply(text="", empty_means_default=True))
        else:
            say(Reply(text=typed(value)))
        problems = [m.text for m in turns[-1].messages if isinstance(m, Problem)]
        assert not problems, f"{step.id}: {problems}"
    assert session.status == "complete"
    say(Reply(text="edit"))
    return turns


@pytest.mark.parametrize("cell", matrix(), ids=variant_id)
def test_no_internal_id_reaches_a_person_on_any_branch(
    cell: tuple[str, str, str, str, bool],
) -> None:
    turns = walk(answers_for(*cell, **CUSTOM))
    leaks = [leak for turn in turns for leak in leaked_ids(visible(turn))]
    assert leaks == []


def test_the_hyperparameter_menu_shows_labels_and_its_answer_reads_as_words() -> None:
    turns = walk(answers_for("single", "ruler", "dataset", "local", True, **CUSTOM))
    shown = [e.shown for t in turns for e in t.effects if isinstance(e, Answered)]
    assert "Epochs (dataset loop): 2" in shown
    menu = next(
        m
        for t in turns
        for m in t.messages
        if isinstance(m, Question) and m.step_id == "hyperparameter_values"
    )
    assert [o.label for o in menu.options][:2] == ["Learning rate: 1e-05", "Rollouts per group: 4"]


def test_every_prompt_is_a_question_with_a_human_title() -> None:
    for step in TRAIN_RL.steps:
        assert step.prompt.rstrip().endswith("?"), step.id
        assert step.title and "_" not in step.title, step.id


def test_the_reward_question_says_what_each_name_holds_with_an_example() -> None:
    chat = Conversation()
    chat.play(
        [
            ("static", "turns"),
            ("single", "task"),
            ("Answer arithmetic questions with the number.", "scenario_source"),
            ("inline", "scenario_rows"),
            ('{"prompt": "2+2?", "answer": "4"}', "system_prompt"),
            ("skip", "agent_prompt"),
            ("default", "reward"),
            ("programmatic", "reward_logic"),
        ]
    )
    asked = chat.asked()
    assert asked is not None
    text = asked.text
    assert text.startswith("How should an episode be scored?")
    for name in ("`scenario`", "`answer`", "`trajectory`", "trajectory.metrics"):
        assert name in text
    assert 'For example: `1.0 if answer.strip() == scenario["answer"] else 0.0`' in text


def test_a_games_reward_question_names_the_game_not_an_answer() -> None:
    chat = Conversation()
    answers = answers_for("game", "programmatic", "dataset", "local", False)
    while chat.asking() != "reward":
        step = TRAIN_RL.step(chat.asking() or "")
        if isinstance(step, Choice):
            chat.click(answers[step.id])
        else:
            chat.say(typed(answers[step.id]))
    chat.click("programmatic")
    asked = chat.asked()
    assert asked is not None and asked.step_id == "reward_logic"
    assert "`game`: what your `create_game` returned" in asked.text
    assert "`answer`" not in asked.text and "scores -1" in asked.text


def progress_of(turns: list[Turn]) -> list[tuple[str, Progress]]:
    return [
        (m.step_id, m.progress)
        for t in turns
        for m in t.messages
        if isinstance(m, Question) and m.progress is not None
    ]


@pytest.mark.parametrize("cell", matrix()[::5], ids=variant_id)
def test_progress_counts_up_one_by_one_in_each_part_and_the_parts_never_change(
    cell: tuple[str, str, str, str, bool],
) -> None:
    answers = answers_for(*cell, **CUSTOM)
    # Straight through, without commands: each question once (a menu's values stay on its step).
    turns = [begin(TRAIN_RL, Session.start(TRAIN_RL.id))]
    session = turns[0].session
    while session.status == "active":
        step = TRAIN_RL.next_step(session.answers)
        assert step is not None
        value = answers.get(step.id)
        if isinstance(step, ValuesMenu):
            replies = [Reply.button(step.id, "num_epochs"), Reply(text="2")]
            replies.append(Reply.button(step.id, "done"))
        elif isinstance(step, Choice):
            replies = [Reply.button(step.id, value)]
        else:
            replies = [Reply(text=typed(value) if value not in (None, "") else "default")]
        for reply in replies:
            turns.append(advance(TRAIN_RL, session, reply))
            session = turns[-1].session
            refused = [m.text for m in turns[-1].messages if isinstance(m, Problem)]
            assert not refused, f"{step.id}: {refused}"  # else the loop would ask forever
    steps = progress_of(turns)
    assert {p.parts for _, p in steps} == {7}
    previous: tuple[str, Progress] | None = None
    for step_id, now in steps:
        if previous is not None:
            before_id, before = previous
            if step_id == before_id:
                assert now == before  # the same question (a menu's value) keeps its place
            elif now.part_number == before.part_number:
                assert now.question == before.question + 1, (before_id, step_id)
            else:
                assert now.part_number == before.part_number + 1 and now.question == 1
        previous = (step_id, now)
    assert steps[-1][1].part_number == 7


def test_the_progress_reads_as_words() -> None:
    turn = begin(TRAIN_RL, Session.start(TRAIN_RL.id))
    question = turn.messages[-1]
    assert isinstance(question, Question) and question.progress is not None
    assert str(question.progress) == "Part 1 of 7: Your task · question 1 of this part"


def test_edit_shows_the_answered_questions_by_label_and_a_pick_jumps_back_to_one() -> None:
    chat = Conversation()
    chat.play(
        [
            ("static", "turns"),
            ("single", "task"),
            ("Answer arithmetic questions.", "scenario_source"),
        ]
    )
    chat.say("edit")
    menu = chat.edit_menu()
    assert menu is not None and menu.text == "Which answer do you want to change?"
    assert [(o.label, o.description) for o in menu.options] == [
        ("Replayability", "Only logged or static scenarios"),
        ("Single or multi-turn", "Single-turn"),
        ("Task", "Answer arithmetic questions."),
    ]
    assert chat.asking() is None  # nothing changed yet: the open question is still open
    turn = advance(TRAIN_RL, chat.session, Reply.button(EDIT_MENU, menu.options[1].value))
    chat.turns.append(turn)
    chat.session = turn.session
    assert chat.asking() == "turns" and "Current answer: Single-turn" in chat.asked().text  # type: ignore[union-attr]
    again = advance(TRAIN_RL, chat.session, Reply.button(EDIT_MENU, "turns"))
    assert again.messages == () and again.session == chat.session  # a double click: no noise
    chat.say("keep")
    assert chat.asking() == "scenario_source"


@pytest.mark.parametrize(
    "typed_name", ["edit Single or multi-turn", "edit single", "edit 2", "edit turns"]
)
def test_edit_by_typed_label_number_or_id(typed_name: str) -> None:
    chat = Conversation()
    chat.play(
        [
            ("static", "turns"),
            ("single", "task"),
            ("Answer arithmetic questions.", "scenario_source"),
        ]
    )
    chat.say(typed_name)
    assert chat.asking() == "turns"


def test_a_pick_of_an_answer_that_is_gone_says_so_and_shows_the_menu_again() -> None:
    chat = Conversation()
    chat.play([("static", "turns")])
    turn = advance(TRAIN_RL, chat.session, Reply.button(EDIT_MENU, "scenario_rows"))
    assert isinstance(turn.messages[0], Problem) and isinstance(turn.messages[1], EditMenu)
    assert turn.session == chat.session


def test_an_empty_reply_takes_the_default_and_says_which() -> None:
    chat = Conversation()
    chat.play(
        [
            ("static", "turns"),
            ("single", "task"),
            ("Answer arithmetic questions.", "scenario_source"),
            ("inline", "scenario_rows"),
            ('{"prompt": "2+2?", "answer": "4"}', "system_prompt"),
        ]
    )
    turn = advance(TRAIN_RL, chat.session, Reply(text="", empty_means_default=True))
    notices = [m.text for m in turn.messages if isinstance(m, Notice)]
    assert notices[0] == "Nothing typed, so System prompt takes its default: (none)."
    assert turn.session.answers["system_prompt"] == ""


def test_an_empty_reply_without_a_default_is_refused_as_before() -> None:
    chat = Conversation()
    chat.play([("static", "turns"), ("single", "task")])
    turn = advance(TRAIN_RL, chat.session, Reply(text="", empty_means_default=True))
    assert [m.text for m in turn.messages if isinstance(m, Problem)] == ["The answer is empty."]
    choice = advance(TRAIN_RL, Conversation().session, Reply(text="", empty_means_default=True))
    assert "pick one of the options" in choice.messages[0].text  # type: ignore[union-attr]


def test_an_empty_reply_without_the_edges_say_so_is_never_a_default() -> None:
    text_steps = [s for s in TRAIN_RL.steps if isinstance(s, Text) and s.default is not None]
    assert text_steps  # the flow has defaults to take
    chat = Conversation()
    chat.play(
        [
            ("static", "turns"),
            ("single", "task"),
            ("Answer arithmetic questions.", "scenario_source"),
            ("inline", "scenario_rows"),
            ('{"prompt": "2+2?", "answer": "4"}', "system_prompt"),
        ]
    )
    turn = advance(TRAIN_RL, chat.session, Reply(text=""))  # e.g. a Slack message of a mention
    assert [m.text for m in turn.messages if isinstance(m, Problem)] == ["The answer is empty."]
