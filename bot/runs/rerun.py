"""*Run again with changes*: a new wizard on a copy of a finished or failed run's answers.

The copy starts where a finished wizard is (every question answered, nothing generated yet)
and opens on the Edit menu: the user changes what they want, and the script is generated again
for approval as after any edit. The old thread keeps its answers and its runs."""

from __future__ import annotations

from flows import Flow, Notice, Reply, Session, Turn, advance, begin


def copied_session(flow: Flow, original: Session) -> Session:
    """A new session with `original`'s answers (those of its branch) and their order: complete,
    or active when the original has an answer taken back since (an edit begun after the run)."""
    answers = flow.active_answers(original.answers)
    history = tuple(step for step in original.history if step in answers)
    status = "complete" if flow.next_step(answers) is None else "active"
    return Session(flow=flow.id, answers=answers, history=history, status=status)


def rerun_turn(flow: Flow, original: Session, public_id: str) -> Turn:
    """The new wizard's opening: the copied answers, a word on what this is (the run named by
    its `public_id`), the Edit menu (or the open question, when the copy has one)."""
    session = copied_session(flow, original)
    if session.status == "active":
        opening = begin(flow, session)
        intro = Notice(f"These are the answers of run #{public_id}; one is still open:")
        return Turn(opening.session, (intro, *opening.messages))
    menu = advance(flow, session, Reply(text="edit"))  # the engine's own Edit menu
    intro = Notice(
        f"These are the answers of run #{public_id}. Pick one to change; when it is answered, the "
        "script is generated again for you to approve (its card's *Edit an answer* changes more)."
    )
    return Turn(session, (intro, *menu.messages))
