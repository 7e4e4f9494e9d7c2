"""Two runs side by side: one plot with both reward curves and a table of the answers in which
they differ, by the questions' human labels.

`/train-rl compare <run> <run>` (ids as `/train-rl runs` shows them) and a finished run's
*Compare with the previous run of this project* button both end here. A user compares only
their own runs (in the same workspace); the comparison goes into the thread of the newer run.
A run's answers are its wizard's answers (the session of its thread)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient

from bot.delivery.effects import Upload
from bot.delivery.outbox import Outbox
from bot.runs.display.plots import compared_curves_png
from bot.runs.store import Run, RunRef, RunStore
from bot.slack.poster import ThreadPoster
from bot.slack.text import clip, escape
from flows import Flow, ValuesMenu, shown_answer
from storage.sessions import SessionStore

CELL_LIMIT = 40
"""A table cell's longest text: longer answers (a task, code) are cut with an ellipsis."""
COMPARE_USAGE = (
    "Compare two of your runs: `/train-rl compare <run> <run>`, the `#ids` of `/train-rl runs`."
)


@dataclass(frozen=True)
class Difference:
    """One answer that differs: its human label and how each run answered it."""

    label: str
    first: str
    second: str


def differing_answers(
    flow: Flow, first: Mapping[str, Any], second: Mapping[str, Any]
) -> list[Difference]:
    """The answers in which two runs differ, in the order the wizard asks them. A values menu
    (the hyperparameters) differs field by field; a question one run was not asked shows `-`."""
    first, second = flow.active_answers(first), flow.active_answers(second)
    differences: list[Difference] = []
    for step in flow.steps:
        if step.id not in first and step.id not in second:
            continue
        a, b = first.get(step.id), second.get(step.id)
        if a == b:
            continue
        if isinstance(step, ValuesMenu) and isinstance(a or {}, dict) and isinstance(b or {}, dict):
            labels = {f.id: f.label for f in step.fields}
            a_values, b_values = dict(a or {}), dict(b or {})
            for name in [*a_values, *(n for n in b_values if n not in a_values)]:
                if a_values.get(name) != b_values.get(name):
                    differences.append(
                        Difference(
                            f"{step.name}: {labels.get(name, name)}",
                            _shown_value(a_values.get(name)),
                            _shown_value(b_values.get(name)),
                        )
                    )
            continue
        differences.append(
            Difference(
                step.name,
                "-" if a is None else shown_answer(step, a),
                "-" if b is None else shown_answer(step, b),
            )
        )
    return differences


def comparison_text(first: Run, second: Run, differences: Sequence[Difference]) -> str:
    """The table of differing answers as a monospace block (Slack has no tables)."""
    head = (
        f"*Run #{first.public_id}* (`{escape(first.script_name)}`) vs "
        f"*run #{second.public_id}* (`{escape(second.script_name)}`)"
    )
    if not differences:
        return f"{head}\nTheir answers are the same."
    rows = [("Answer", f"run #{first.public_id}", f"run #{second.public_id}")] + [
        (_cell(d.label), _cell(d.first), _cell(d.second)) for d in differences
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    table = escape("\n".join(lines))
    return f"{head}: {len(differences)} answers differ.\n```{table}```"


def parse_run_refs(team: str, text: str) -> tuple[RunRef, RunRef] | None:
    """`<id> <id>` or `#<id> #<id>` (public ids) from `team`: the two runs they name; None for
    anything else."""
    refs = [RunRef.parse(team, word) for word in text.split()]
    if len(refs) != 2 or refs[0] is None or refs[1] is None:
        return None
    return refs[0], refs[1]


class RunComparer:
    """Checks who may compare which runs, finds a run's previous one, and posts the comparison."""

    def __init__(
        self,
        runs: RunStore,
        sessions: SessionStore,
        flows: Mapping[str, Flow],
        poster: ThreadPoster,
        outbox: Outbox,
    ) -> None:
        self.runs = runs
        self.sessions = sessions
        self.flows = flows
        self.poster = poster
        self.outbox = outbox

    def compare_previous(self, client: WebClient, ref: RunRef, user: str) -> None:
        """*Compare with the previous run of this project*, for the run's owner: the comparison
        with their latest earlier run of the same project, in this run's thread."""
        run = self.runs.find(ref)
        if run is None:
            return
        if run.owner != user:
            self.poster.ephemeral(
                client, run.key, user, f"Only <@{run.owner}> can compare this run."
            )
            return
        previous = self.previous_of(run)
        if previous is None:
            self.poster.ephemeral(
                client, run.key, user, "You have no earlier run of this project to compare with."
            )
            return
        refusal = self.post(previous, run)
        if refusal:
            self.poster.ephemeral(client, run.key, user, refusal)

    def own_run(self, ref: RunRef, user: str) -> Run | None:
        """The run `ref` names, if it is `user`'s (anyone else's, or another team's, reads as
        not there)."""
        run = self.runs.find(ref)
        if run is None or run.owner != user:
            return None
        return run

    def answers_of(self, run: Run) -> tuple[Flow, dict[str, Any]] | None:
        """The run's flow and its wizard's answers; None when its session is gone."""
        stored = self.sessions.get(run.key)
        if stored is None or stored.session.flow not in self.flows:
            return None
        flow = self.flows[stored.session.flow]
        return flow, flow.active_answers(stored.session.answers)

    def previous_of(self, run: Run) -> Run | None:
        """The same owner's latest run before `run` whose project answer is the same."""
        mine = self.answers_of(run)
        if mine is None:
            return None
        project = mine[1].get("project")
        for earlier in self.runs.for_owner(run.owner, run.team):  # newest first
            if earlier.id >= run.id:
                continue
            theirs = self.answers_of(earlier)
            if theirs is not None and theirs[1].get("project") == project:
                return earlier
        return None

    def compare_text_command(self, client: WebClient, user: str, team: str, text: str) -> str:
        """`/train-rl compare <run> <run>`: post the comparison; what to tell the user privately."""
        refs = parse_run_refs(team, text)
        if refs is None:
            return COMPARE_USAGE
        if refs[0] == refs[1]:
            return "Pick two different runs to compare."
        found = [self.own_run(ref, user) for ref in refs]
        missing = [f"#{ref.public_id}" for ref, run in zip(refs, found, strict=True) if run is None]
        if missing:
            return (
                f"No run {' or '.join(missing)} among yours in this workspace: "
                "`/train-rl runs` lists them."
            )
        first, second = sorted((r for r in found if r is not None), key=lambda r: r.id)
        refusal = self.post(first, second)
        return refusal or f"Posted the comparison in the thread of run #{second.public_id}."

    def post(self, first: Run, second: Run) -> str | None:
        """Queue the plot, with the table as its comment, for `second`'s thread (the outbox
        carries it: a Slack outage delays it, never loses it); why not, or None when queued."""
        mine, theirs = self.answers_of(first), self.answers_of(second)
        if mine is None or theirs is None:
            return "The answers of one of these runs are gone (its wizard was deleted)."
        if mine[0] is not theirs[0]:
            return (
                f"Run #{first.public_id} and run #{second.public_id} are of different wizards (RL "
                "and fine-tuning): their answers and curves do not compare."
            )
        differences = differing_answers(mine[0], mine[1], theirs[1])
        png = compared_curves_png(
            [
                (f"run #{first.public_id}", first.points),
                (f"run #{second.public_id}", second.points),
            ],
            f"Run #{first.public_id} vs run #{second.public_id}",
        )
        upload = Upload(
            f"compare-run-{first.public_id}-run-{second.public_id}.png",
            f"Run #{first.public_id} vs run #{second.public_id}",
            png,
            clip(comparison_text(first, second, differences), 3_900),
        )
        self.outbox.enqueue(second.key, [upload])
        return None


def _cell(text: str) -> str:
    return clip(" ".join(text.split()), CELL_LIMIT)


def _shown_value(value: Any) -> str:
    return "-" if value is None else str(value)
