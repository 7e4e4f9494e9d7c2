"""A flow that cannot work fails when it is built, not in the middle of a conversation."""

from __future__ import annotations

import pytest

from flows.definition.conditions import all_of, is_
from flows.definition.flow import Flow, FlowDefinitionError
from flows.definition.steps import Choice, Option, Text, ValuesMenu

YES_NO = (Option("yes", "Yes"), Option("no", "No"))


def build(*steps: Choice | Text | ValuesMenu) -> Flow:
    return Flow("test", template="train_rl/script.py.j2", steps=list(steps))


def test_a_good_flow_builds() -> None:
    flow = build(Choice("a", "A?", options=YES_NO), Text("b", "B?", when=is_("a", "yes")))
    assert flow.next_step({}) is not None and flow.next_step({}).id == "a"  # type: ignore[union-attr]
    assert flow.next_step({"a": "no"}) is None


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([Text("a", "A?"), Text("a", "A again?")], "duplicate step id 'a'"),
        ([Text("a b", "A?")], "not an identifier"),
        ([Text("a", "A?", when=is_("nope", "x"))], "reads unknown step 'nope'"),
        (
            [Text("a", "A?", when=is_("b", "yes")), Choice("b", "B?", options=YES_NO)],
            "which is asked later",
        ),
        (
            [Choice("a", "A?", options=YES_NO), Text("b", "B?", when=is_("a", "maybe"))],
            "not among its options",
        ),
        ([Choice("a", "A?", options=(Option("only", "Only"),))], "at least two options"),
        (
            [Choice("a", "A?", options=(Option("x", "X"), Option("x", "Y")))],
            "duplicate option values",
        ),
        ([Choice("a", "A?", options=(Option("x", "X" * 80), Option("y", "Y")))], "button limits"),
        ([Choice("a", "A?", options=YES_NO, recommend=lambda a: "maybe")], "not an option"),
        (
            [Choice("a", "A?", options=YES_NO, recommend=lambda a: "yes", recommend_reads=("z",))],
            "unknown step 'z'",
        ),
        (
            [
                Choice("a", "A?", options=YES_NO),
                Text("b", "B?", when=all_of(is_("a", "yes"), is_("a", "no"))),
            ],
            "can never be asked",
        ),
        (
            [
                Choice("a", "A?", options=YES_NO),
                Text("b", "B?", when=is_("a", "yes")),
                Choice("c", "C?", options=YES_NO, when=all_of(is_("a", "no"))),
                Text("d", "D?", when=all_of(is_("c", "yes"), is_("a", "yes"))),
            ],
            None,
        ),
        ([ValuesMenu("s", "S?")], "has no fields"),
    ],
)
def test_a_bad_flow_fails_when_built(
    steps: list[Choice | Text | ValuesMenu], message: str | None
) -> None:
    if message is None:
        build(*steps)  # not provably unreachable from its own guard: allowed
        return
    with pytest.raises(FlowDefinitionError, match=message):
        build(*steps)


def test_an_option_that_only_explains_cannot_be_branched_on() -> None:
    with pytest.raises(FlowDefinitionError, match="only explains"):
        build(
            Choice(
                "a",
                "A?",
                options=(Option("x", "X"), Option("y", "Y"), Option("why", "Why?", explain="...")),
            ),
            Text("b", "B?", when=is_("a", "why")),
        )


def test_a_flow_whose_template_does_not_exist_fails_when_built() -> None:
    with pytest.raises(FlowDefinitionError, match="does not exist"):
        Flow("test", template="train_rl/nope.py.j2", steps=[Text("a", "A?")])


def test_the_train_rl_flow_renders_through_an_existing_template() -> None:
    from flows.script.template_files import templates_dir
    from flows.wizards.rl.train_rl import TRAIN_RL

    assert (templates_dir() / TRAIN_RL.template).is_file()
