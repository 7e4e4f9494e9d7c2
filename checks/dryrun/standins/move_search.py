"""The stand-in player's move search: which of its candidate moves the game accepts.

The stand-in policy answers over HTTP and cannot see the game; inside the script's process the
dry run can. The call counter passes on the game each `render_observation` call shows (kept per
asyncio task: the rollout it belongs to), and a hook on the OpenAI client, as each chat request
leaves, tries the conversation's candidate moves (`checks.dryrun.standins.move_candidates`) on
copies of that game (`copy.deepcopy`) with the user's own `apply_action`, uncounted and
silenced. The moves the game accepted go to the policy server for the position the request
shows, and the server plays one of them. The real game only ever receives the move the policy
answered.

A game that cannot be copied is never tried on: the search learns from its own replies instead
(a move the real `apply_action` accepted is offered first again; one it rejected at a position
is not offered there again). When no candidate is accepted, the stand-in is stuck: the report
says it could not play this game, with the position it was stuck at.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import io
import random
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from checks.dryrun.child.user_calls import CallCounter
from checks.dryrun.run_record import MoveSearchRecord
from checks.dryrun.standins.move_candidates import candidate_moves, message_text
from checks.dryrun.standins.policy_replies import judge_trajectory_ids

MAX_LEGAL = 12  # enough moves to vary the games; trying more only costs time
# A game's moves are mostly the same few (2048's four) and each try copies the game (a 2048 board
# with its random.Random: 0.2 ms, 80 candidates a position), so the moves the game took at
# earlier positions are tried first, and once MIN_CHOICES are taken only EXPLORE more are tried.
EXPLORE = 16
# One move is no choice: every rollout of a group would play the same game, all its rewards
# equal (a tic-tac-toe against an opponent seeded by the scenario), and GRPO learn nothing. So
# until two moves are taken every candidate is tried, however late the game's list ranks them.
MIN_CHOICES = 2
STUCK_EXAMPLES = 8

Publish = Callable[[str, list[str]], None]
"""Tell the policy server the moves to play at the position a conversation's last user message
shows (an empty list: none found, so it guesses)."""


@dataclass(frozen=True)
class _Shown:
    """The game the rollout's latest `render_observation` call showed (None is a game too)."""

    game: Any


@dataclass
class _Learning:
    """A position of a game that cannot be copied: its key, and the move played there."""

    key: str
    move: str | None = None


# Per asyncio task, as the rollouts are: the game shown, and (uncopyable games) the position.
_shown: ContextVar[_Shown | None] = ContextVar("artbot_dryrun_shown", default=None)
_learning: ContextVar[_Learning | None] = ContextVar("artbot_dryrun_learning", default=None)


@contextlib.contextmanager
def _quiet_and_unseeded() -> Iterator[None]:
    """Trials print nothing and leave the random generators as they found them, so the real
    game plays exactly as it would have without them."""
    numpy_random: Any = getattr(sys.modules.get("numpy"), "random", None)
    state = random.getstate()
    numpy_state = numpy_random.get_state() if numpy_random is not None else None
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        random.setstate(state)
        if numpy_random is not None:
            numpy_random.set_state(numpy_state)


ScriptFunction = Callable[[str], Callable[..., Any] | None]
"""The script's function of a name, if it has one."""


def main_function(name: str) -> Callable[..., Any] | None:
    """The script's own `name`: the script runs as `__main__`."""
    function = getattr(sys.modules.get("__main__"), name, None)
    return function if callable(function) else None


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".rstrip(": ")


class MoveSearch:
    """Finds the moves the shown game accepts before each request; see the module docstring."""

    def __init__(
        self, counter: CallCounter, publish: Publish, function: ScriptFunction = main_function
    ) -> None:
        self._counter = counter
        self._publish = publish
        self._function = function
        self._lock = threading.Lock()
        self._record = MoveSearchRecord()
        # Uncopyable games: moves the real apply_action took (count > 0), and refused where.
        self._accepted: Counter[str] = Counter()
        self._refused: set[tuple[str, str]] = set()
        # Copyable games: every move a copy took, at any position (tried first next time).
        self._taken_before: set[str] = set()

    # --- told by the call counter ---------------------------------------------------------

    def entered(self, name: str, arguments: tuple[Any, ...]) -> None:
        if name == "render_observation" and arguments:
            _shown.set(_Shown(arguments[0]))
        elif name == "apply_action" and len(arguments) >= 2:
            learning = _learning.get()
            if learning is not None and isinstance(arguments[1], str):
                learning.move = arguments[1]
                with self._lock:
                    self._accepted[learning.move] += 1  # taken back if it raises

    def raised(self, name: str) -> None:
        learning = _learning.get()
        if name == "apply_action" and learning is not None and learning.move is not None:
            with self._lock:
                self._accepted[learning.move] -= 1
                self._refused.add((learning.key, learning.move))

    # --- before each chat request ---------------------------------------------------------

    def before_request(self, messages: list[Any]) -> None:
        """Find the moves for the position `messages` show, if they show a game's."""
        shown = _shown.get()
        apply_action = self._function("apply_action")
        render_observation = self._function("render_observation")
        if shown is None or apply_action is None or render_observation is None:
            return
        texts = [(str(m.get("role")), message_text(m)) for m in messages if isinstance(m, dict)]
        users = [text for role, text in texts if role == "user"]
        if not users or judge_trajectory_ids({"messages": messages}):
            return
        key = users[-1]
        instructions = "\n".join(text for role, text in texts if role != "assistant")
        try:
            probe = copy.deepcopy(shown.game)
        except Exception as error:
            self._learn(key, instructions, _error_text(error))
            return
        observation = self._render(render_observation, probe)
        if observation is None or not any(observation.strip() in text for text in users):
            return  # not this game's position (another conversation of the same task)
        candidates = candidate_moves(observation, instructions)
        legal, refusal = self._try(apply_action, shown.game, candidates)
        self._publish(key, legal)
        with self._lock:
            self._record.positions += 1
            if not legal:
                self._stuck(observation, candidates, refusal)

    def _render(self, render_observation: Callable[..., Any], game: Any) -> str | None:
        with self._counter.uncounted(), _quiet_and_unseeded():
            try:
                return str(render_observation(game))
            except Exception:
                return None

    def _try(
        self, apply_action: Callable[..., Any], game: Any, candidates: list[str]
    ) -> tuple[list[str], str | None]:
        """The candidates `apply_action` took on a fresh copy of `game` each (see EXPLORE), and
        the first refusal's error."""
        with self._lock:
            before = [move for move in candidates if move in self._taken_before]
        ordered = [*before, *(move for move in candidates if move not in self._taken_before)]
        legal: list[str] = []
        refusal: str | None = None
        explored_at = len(before) + EXPLORE  # extended to EXPLORE past the MIN_CHOICES-th move
        with self._counter.uncounted(), _quiet_and_unseeded():
            for tried, move in enumerate(ordered):
                if len(legal) >= MIN_CHOICES and tried >= explored_at:
                    break
                trial = copy.deepcopy(game)
                try:
                    result = apply_action(trial, move)
                except Exception as error:
                    refusal = refusal or _error_text(error)
                    continue
                if inspect.isawaitable(result):
                    # An async apply_action: a generated script never awaits one.
                    if inspect.iscoroutine(result):
                        result.close()
                    return [], refusal
                legal.append(move)
                if len(legal) == MIN_CHOICES:
                    explored_at = max(explored_at, tried + 1 + EXPLORE)
                if len(legal) >= MAX_LEGAL:
                    break
        with self._lock:
            self._taken_before.update(legal)
        # In the conversation's order, whatever was tried first: the policy's pick stays a
        # function of the position and the moves found.
        return sorted(legal, key=candidates.index), refusal

    def _learn(self, key: str, instructions: str, copy_error: str) -> None:
        """An uncopyable game: offer the moves not refused here, those taken before first."""
        candidates = candidate_moves(key, instructions)
        with self._lock:
            open_moves = [m for m in candidates if (key, m) not in self._refused]
            taken = [m for m in open_moves if self._accepted[m] > 0]
            self._record.learnt += 1
            self._record.copy_error = self._record.copy_error or copy_error
            if not open_moves:
                self._stuck(key, candidates, None)
        _learning.set(_Learning(key))
        self._publish(key, taken or open_moves)

    def _stuck(self, observation: str, candidates: list[str], refusal: str | None) -> None:
        record = self._record
        record.stuck += 1
        if record.stuck_at is None:
            record.stuck_at = observation
            record.stuck_tried = len(candidates)
            record.stuck_examples = candidates[:STUCK_EXAMPLES]
            record.stuck_refusal = refusal

    def snapshot(self) -> MoveSearchRecord:
        """A copy of what the search found so far (the recorder writes it)."""
        with self._lock:
            return self._record.model_copy(deep=True)


def install_request_hook(search: MoveSearch) -> None:
    """Run `search.before_request` as each OpenAI chat completion request leaves."""
    from openai.resources.chat.completions import AsyncCompletions, Completions

    original_async = AsyncCompletions.create
    original_sync = Completions.create

    def searched(kwargs: dict[str, Any]) -> dict[str, Any]:
        messages = kwargs.get("messages")
        if messages is not None and not isinstance(messages, list):
            kwargs["messages"] = messages = list(messages)  # an iterable is read only once
        if messages:
            search.before_request(messages)
        return kwargs

    @functools.wraps(original_async)
    async def create_async(self: AsyncCompletions, *args: Any, **kwargs: Any) -> Any:
        return await original_async(self, *args, **searched(kwargs))

    @functools.wraps(original_sync)
    def create_sync(self: Completions, *args: Any, **kwargs: Any) -> Any:
        return original_sync(self, *args, **searched(kwargs))

    AsyncCompletions.create = create_async  # type: ignore[method-assign]
    Completions.create = create_sync  # type: ignore[method-assign]
