"""What a turn says in its thread: at most one post, the engine's notes and problems folded into
the question they lead to, the closing words under the last answer."""

from __future__ import annotations

from bot.delivery.effects import Ask, Generate, Post, Retire, turn_effects
from flows import Answered, Completed, Notice, Problem, Question, Session, Turn

SESSION = Session.start("train-rl")
REWARD = Question("reward", "How should rollouts be scored?", "choice")


def posts(effects: list[object]) -> list[object]:
    return [e for e in effects if isinstance(e, Post | Ask)]


def test_a_note_comes_in_the_question_it_introduces_and_stays_once_answered() -> None:
    turn = Turn(SESSION, (Notice("*About RULER:* a judge."), REWARD), (Answered("model", "x"),))

    effects = turn_effects(turn)

    assert effects[0] == Retire("model", "x")
    [ask] = posts(effects)
    assert isinstance(ask, Ask) and ask.step_id == "reward"
    assert ask.message.text.index("About RULER") < ask.message.text.index("How should rollouts")
    assert ask.text == "*About RULER:* a judge.\n\nHow should rollouts be scored?"


def test_a_problem_comes_with_the_question_asked_again_but_is_not_kept_with_it() -> None:
    turn = Turn(SESSION, (Problem("That is not one of the options."), REWARD))

    [ask] = posts(turn_effects(turn))

    assert isinstance(ask, Ask) and ask.message.text.startswith(":warning: That is not one")
    assert ask.text == "How should rollouts be scored?"


def test_the_closing_words_go_under_the_last_answer_and_the_script_follows() -> None:
    closing = "That's every question. Generating your training script now."
    turn = Turn(
        SESSION,
        (Notice(closing),),
        (Answered("iteration", "Epochs over the fixed dataset"), Completed({})),
    )

    assert turn_effects(turn) == [
        Retire("iteration", "Epochs over the fixed dataset", closing),
        Generate(),
    ]


def test_notes_without_a_question_are_one_post() -> None:
    turn = Turn(SESSION, (Notice("Your answers so far:"), Notice("• turns: single")))

    [post] = turn_effects(turn)

    assert isinstance(post, Post)
    assert "Your answers so far:" in post.message.text and "• turns: single" in post.message.text
