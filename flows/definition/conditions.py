"""Declarative guards on the answers so far: a step is asked only `when` its condition holds.

Conditions are data, not lambdas, so a flow can be checked when it is built: every step id a
condition names must exist, come earlier, and every value it compares with must be one of that
step's options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class Condition(Protocol):
    """A predicate over the answers that can say which answers it reads."""

    def __call__(self, answers: Mapping[str, Any]) -> bool: ...

    def reads(self) -> Mapping[str, frozenset[str]]:
        """Step ids this condition reads, each with the values it compares against."""
        ...


@dataclass(frozen=True)
class Is:
    """True when the answer to `step` is one of `values`."""

    step: str
    values: frozenset[str]

    def __call__(self, answers: Mapping[str, Any]) -> bool:
        return answers.get(self.step) in self.values

    def reads(self) -> Mapping[str, frozenset[str]]:
        return {self.step: self.values}


@dataclass(frozen=True)
class All:
    """True when every condition holds."""

    conditions: tuple[Condition, ...]

    def __call__(self, answers: Mapping[str, Any]) -> bool:
        return all(condition(answers) for condition in self.conditions)

    def reads(self) -> Mapping[str, frozenset[str]]:
        return _merge_reads(self.conditions)


@dataclass(frozen=True)
class Any_:
    """True when at least one condition holds."""

    conditions: tuple[Condition, ...]

    def __call__(self, answers: Mapping[str, Any]) -> bool:
        return any(condition(answers) for condition in self.conditions)

    def reads(self) -> Mapping[str, frozenset[str]]:
        return _merge_reads(self.conditions)


@dataclass(frozen=True)
class Not:
    """True when the condition does not hold."""

    condition: Condition

    def __call__(self, answers: Mapping[str, Any]) -> bool:
        return not self.condition(answers)

    def reads(self) -> Mapping[str, frozenset[str]]:
        return self.condition.reads()


@dataclass(frozen=True)
class Holds:
    """True when `predicate` holds; for what free-text answers (code) say, which no option list
    describes. It reads only `steps`."""

    steps: tuple[str, ...]
    predicate: Callable[[Mapping[str, Any]], bool]

    def __call__(self, answers: Mapping[str, Any]) -> bool:
        return self.predicate(answers)

    def reads(self) -> Mapping[str, frozenset[str]]:
        return {step: frozenset() for step in self.steps}


def is_(step: str, *values: str) -> Is:
    """`is_("turns", "multi")`: the answer to `turns` is `multi`."""
    return Is(step, frozenset(values))


def all_of(*conditions: Condition) -> All:
    """True when every condition holds. A nested all_of is flattened into this one, so a named
    guard can be narrowed (`all_of(WITH_TOOLS, is_(...))`) and still be checked part by part."""
    parts: list[Condition] = []
    for condition in conditions:
        parts.extend(condition.conditions if isinstance(condition, All) else (condition,))
    return All(tuple(parts))


def any_of(*conditions: Condition) -> Any_:
    return Any_(tuple(conditions))


def not_(condition: Condition) -> Not:
    return Not(condition)


def _merge_reads(conditions: tuple[Condition, ...]) -> Mapping[str, frozenset[str]]:
    merged: dict[str, frozenset[str]] = {}
    for condition in conditions:
        for step, values in condition.reads().items():
            merged[step] = merged.get(step, frozenset()) | values
    return merged
