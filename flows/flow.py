"""A flow: an ordered list of steps plus the template its answers render into.

A flow is checked when it is built, so a bad definition fails at import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from flows.conditions import All, Is
from flows.steps import Answers, AnyStep, Choice, ValuesMenu
from flows.template_files import templates_dir


class FlowDefinitionError(Exception):
    """A flow that cannot work: raised at import time, never at conversation time."""


@dataclass(frozen=True)
class Flow:
    """The questions of one wizard, in order.

    The next question is the first active step not yet answered.
    """

    id: str
    template: str
    steps: tuple[AnyStep, ...]
    _by_id: dict[str, AnyStep] = field(init=False, repr=False, compare=False)

    def __init__(self, id: str, template: str, steps: Sequence[AnyStep]) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "template", template)
        object.__setattr__(self, "steps", tuple(steps))
        object.__setattr__(self, "_by_id", {step.id: step for step in steps})
        _validate(self)

    def step(self, step_id: str) -> AnyStep:
        return self._by_id[step_id]

    def has_step(self, step_id: str) -> bool:
        return step_id in self._by_id

    def active_steps(self, answers: Answers) -> tuple[AnyStep, ...]:
        return tuple(step for step in self.steps if step.is_active(answers))

    def next_step(self, answers: Answers) -> AnyStep | None:
        """The first active step without an answer, or None when the flow is complete."""
        for step in self.active_steps(answers):
            if step.id not in answers:
                return step
        return None

    def active_answers(self, answers: Answers) -> dict[str, Any]:
        """Only the answers of steps active now (a changed branch leaves stale ones behind)."""
        return {s.id: answers[s.id] for s in self.active_steps(answers) if s.id in answers}

    def find(self, name: str) -> AnyStep | None:
        """A step by id, title or a unique prefix of either (for `edit <question>`)."""
        wanted = name.strip().lower().replace(" ", "_")
        if not wanted:
            return None
        for step in self.steps:
            if wanted in (step.id, step.name.lower().replace(" ", "_")):
                return step
        prefixed = [
            s
            for s in self.steps
            if s.id.startswith(wanted) or s.name.lower().replace(" ", "_").startswith(wanted)
        ]
        return prefixed[0] if len(prefixed) == 1 else None


def _validate(flow: Flow) -> None:
    if not (templates_dir() / flow.template).is_file():
        raise FlowDefinitionError(f"flow {flow.id!r}: template {flow.template!r} does not exist")
    seen: dict[str, int] = {}
    for index, step in enumerate(flow.steps):
        if step.id in seen:
            raise FlowDefinitionError(f"flow {flow.id!r}: duplicate step id {step.id!r}")
        if not step.id.isidentifier():
            raise FlowDefinitionError(f"flow {flow.id!r}: step id {step.id!r} is not an identifier")
        seen[step.id] = index
        if isinstance(step, Choice):
            _validate_choice(flow, step)
        if isinstance(step, ValuesMenu) and not step.fields:
            raise FlowDefinitionError(f"flow {flow.id!r}: settings step {step.id!r} has no fields")
        conditions = [step.when] if step.when is not None else []
        if isinstance(step, ValuesMenu):
            conditions += [f.when for f in step.fields if f.when is not None]
        for condition in conditions:
            for read, values in condition.reads().items():
                _check_read(flow, step.id, read, seen, index)
                target = flow.step(read)
                if isinstance(target, Choice) and target.options_from is None:
                    known = {option.value for option in target.options}
                    unknown = values - known
                    if unknown:
                        raise FlowDefinitionError(
                            f"flow {flow.id!r}: step {step.id!r} compares {read!r} with "
                            f"{sorted(unknown)}, which are not among its options {sorted(known)}"
                        )
                    if any(o.explain for o in target.options if o.value in values):
                        raise FlowDefinitionError(
                            f"flow {flow.id!r}: step {step.id!r} depends on an option of {read!r} "
                            "that only explains and is never stored"
                        )
        if isinstance(step, Choice):
            for read in (*step.recommend_reads, *step.options_reads):
                _check_read(flow, step.id, read, seen, index)
    _check_reachable(flow)


def _validate_choice(flow: Flow, step: Choice) -> None:
    if step.options_from is not None:
        if step.options or not step.options_reads:
            raise FlowDefinitionError(
                f"flow {flow.id!r}: choice {step.id!r} has options_from: it needs options_reads "
                "and no fixed options"
            )
        return  # its options exist only with answers: offered and matched at the question
    values = [option.value for option in step.options]
    if len(values) < 2:
        raise FlowDefinitionError(
            f"flow {flow.id!r}: choice {step.id!r} needs at least two options"
        )
    if len(set(values)) != len(values):
        raise FlowDefinitionError(
            f"flow {flow.id!r}: choice {step.id!r} has duplicate option values"
        )
    for option in step.options:
        # Slack's limits: button text 75 chars, value 2,000; short ids keep action ids small.
        if len(option.label) > 75 or not option.value or len(option.value) > 64:
            raise FlowDefinitionError(
                f"flow {flow.id!r}: option {option.value!r} of {step.id!r} breaks button limits"
            )
    recommendable = {option.value for option in step.options if not option.explain}
    if step.recommend is not None and not step.recommend_reads:
        # A constant recommendation reads nothing: check it names a real option.
        constant = step.recommend({})
        if constant is not None and constant not in recommendable:
            raise FlowDefinitionError(
                f"flow {flow.id!r}: choice {step.id!r} recommends {constant!r}, not an option"
            )


def _check_read(flow: Flow, step_id: str, read: str, seen: dict[str, int], index: int) -> None:
    if read not in flow._by_id:
        raise FlowDefinitionError(f"flow {flow.id!r}: step {step_id!r} reads unknown step {read!r}")
    if read not in seen or seen[read] >= index:
        raise FlowDefinitionError(
            f"flow {flow.id!r}: step {step_id!r} reads {read!r}, which is asked later"
        )


def _check_reachable(flow: Flow) -> None:
    """A step is unreachable when its condition needs an answer from a step that is never asked,
    or asks one step for two disjoint sets of values at once."""
    reachable: set[str] = set()
    for step in flow.steps:
        ok = True
        if step.when is not None:
            for read in step.when.reads():
                if read not in reachable:
                    ok = False
            if isinstance(step.when, All):
                wanted: dict[str, frozenset[str]] = {}
                for part in step.when.conditions:
                    if isinstance(part, Is):
                        if part.step in wanted and not (wanted[part.step] & part.values):
                            ok = False
                        wanted[part.step] = wanted.get(part.step, part.values) & part.values
        if not ok:
            raise FlowDefinitionError(f"flow {flow.id!r}: step {step.id!r} can never be asked")
        reachable.add(step.id)
