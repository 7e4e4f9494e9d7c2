"""A flow: an ordered list of steps plus the template its answers render into.

A flow is checked when it is built, so a bad definition fails at import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from flows.definition.conditions import All, Condition, Is, Not
from flows.definition.steps import Answers, AnyStep, Choice, Text, ValuesMenu
from flows.script.template_files import templates_dir

RESERVED_STEP_IDS = frozenset({"edit"})
"""Not a step: `edit` is the Edit menu's id on its buttons (flows.editing)."""


@dataclass(frozen=True)
class Part:
    """A named stretch of a flow, from step `first` to the next part's first step. Every part is
    asked on every branch (checked when the flow is built), so the number of parts never
    changes; only the questions inside a part depend on the answers."""

    title: str
    first: str


@dataclass(frozen=True)
class Given:
    """An answer no question asks: whoever makes the session sets it (the SFT run an RL run
    continues). It is rendered like any answer, kept by `restart` and never edited; `fills` gives
    the answers of the questions it settles, which are then never asked."""

    id: str
    title: str
    parse: Callable[[Any], Any]
    """The value checked again wherever it comes from (a stored session, a file of answers);
    raises InvalidAnswer."""
    fills: Callable[[Any], Mapping[str, Any]]
    display: Callable[[Any], str]


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
    parts: tuple[Part, ...]
    given: tuple[Given, ...]
    _by_id: dict[str, AnyStep] = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        id: str,
        template: str,
        steps: Sequence[AnyStep],
        parts: Sequence[Part] = (),
        given: Sequence[Given] = (),
    ) -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "template", template)
        object.__setattr__(self, "steps", tuple(steps))
        object.__setattr__(self, "parts", tuple(parts) or (Part(id, steps[0].id),))
        object.__setattr__(self, "given", tuple(given))
        object.__setattr__(self, "_by_id", {step.id: step for step in steps})
        _validate(self)
        _validate_parts(self)

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

    def runner_paths(self, answers: Answers) -> list[str]:
        """The files on the runner host these answers name (the active questions of kind
        `path`): the script reads them there, never where it is generated."""
        return [
            str(answers[step.id])
            for step in self.active_steps(answers)
            if isinstance(step, Text) and step.kind == "path" and answers.get(step.id)
        ]

    def active_answers(self, answers: Answers) -> dict[str, Any]:
        """Only the answers of steps active now (a changed branch leaves stale ones behind),
        after the given answers (`Given`) there are."""
        given = {g.id: answers[g.id] for g in self.given if g.id in answers}
        return given | {s.id: answers[s.id] for s in self.active_steps(answers) if s.id in answers}

    def given_answers(self, given: Answers) -> dict[str, Any]:
        """The given answers among `given`, checked again, with the answers they fill; raises
        InvalidAnswer for a value its `Given` does not accept."""
        answers: dict[str, Any] = {}
        for entry in self.given:
            if entry.id in given:
                value = entry.parse(given[entry.id])
                answers |= {entry.id: value, **entry.fills(value)}
        return answers

    def part_of(self, step_id: str) -> tuple[int, Part]:
        """The part `step_id` belongs to, with its index (0 for the first part)."""
        index = self.steps.index(self._by_id[step_id])
        starts = [self.steps.index(self._by_id[part.first]) for part in self.parts]
        number = max(i for i, start in enumerate(starts) if start <= index)
        return number, self.parts[number]

    def steps_of(self, part: Part) -> tuple[AnyStep, ...]:
        """The steps of `part`, in order."""
        starts = [self.steps.index(self._by_id[p.first]) for p in self.parts]
        number = self.parts.index(part)
        end = starts[number + 1] if number + 1 < len(starts) else len(self.steps)
        return self.steps[starts[number] : end]

    def find(self, name: str, among: Sequence[AnyStep] | None = None) -> AnyStep | None:
        """A step (of `among`, else of the flow) by id, human label or a unique prefix of
        either (for `edit <question>`)."""
        wanted = name.strip().lower().replace(" ", "_")
        steps = self.steps if among is None else tuple(among)
        if not wanted:
            return None
        for step in steps:
            if wanted in (step.id, step.name.lower().replace(" ", "_")):
                return step
        prefixed = [
            s
            for s in steps
            if s.id.startswith(wanted) or s.name.lower().replace(" ", "_").startswith(wanted)
        ]
        return prefixed[0] if len(prefixed) == 1 else None


def _validate(flow: Flow) -> None:
    if not (templates_dir() / flow.template).is_file():
        raise FlowDefinitionError(f"flow {flow.id!r}: template {flow.template!r} does not exist")
    given = [entry.id for entry in flow.given]
    for entry in given:
        if not entry.isidentifier() or entry in flow._by_id or given.count(entry) > 1:
            raise FlowDefinitionError(
                f"flow {flow.id!r}: given answer {entry!r} is not an identifier, or is a step's "
                "id, or is given twice"
            )
    seen: dict[str, int] = {}
    for index, step in enumerate(flow.steps):
        if step.id in seen:
            raise FlowDefinitionError(f"flow {flow.id!r}: duplicate step id {step.id!r}")
        if not step.id.isidentifier() or step.id in RESERVED_STEP_IDS:
            raise FlowDefinitionError(
                f"flow {flow.id!r}: step id {step.id!r} is not an identifier, or is reserved"
            )
        _check_wording(flow, step)
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
                if read not in given:  # a given answer is there before the first question
                    _check_read(flow, step.id, read, seen, index)
    _check_reachable(flow)


def _check_wording(flow: Flow, step: AnyStep) -> None:
    """Every question is a question; a title (the human label) is words; a menu's values have
    labels."""
    if not step.prompt.rstrip().endswith("?"):
        raise FlowDefinitionError(f"flow {flow.id!r}: the prompt of {step.id!r} is not a question")
    if "_" in step.title:
        raise FlowDefinitionError(
            f"flow {flow.id!r}: the title of {step.id!r} must be words, not an id"
        )
    if isinstance(step, ValuesMenu) and any(not f.label for f in step.fields):
        raise FlowDefinitionError(f"flow {flow.id!r}: every value of {step.id!r} needs a label")


def _validate_parts(flow: Flow) -> None:
    """Parts start at the first step, in order, each at a known step; none can be empty."""
    if flow.parts[0].first != flow.steps[0].id:
        raise FlowDefinitionError(f"flow {flow.id!r}: the first part must start at the first step")
    starts = []
    for part in flow.parts:
        if part.first not in flow._by_id:
            raise FlowDefinitionError(
                f"flow {flow.id!r}: part {part.title!r} starts at unknown step {part.first!r}"
            )
        starts.append(flow.steps.index(flow._by_id[part.first]))
    if starts != sorted(set(starts)):
        raise FlowDefinitionError(f"flow {flow.id!r}: parts must start at steps in order")
    for part in flow.parts:
        guards = [step.when for step in flow.steps_of(part)]
        if not _always_one_of(guards):
            raise FlowDefinitionError(
                f"flow {flow.id!r}: part {part.title!r} may have no question on some branch"
            )


def _always_one_of(guards: Sequence[Condition | None]) -> bool:
    """Whether one of these guards always holds: one is None, or one is the negation of
    another."""
    return any(
        guard is None or (isinstance(guard, Not) and guard.condition in guards) for guard in guards
    )


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
