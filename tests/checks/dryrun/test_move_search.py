"""The stand-in player: the moves it reads from what the agent is shown, how it tries them on a
copy of the game (never on the game itself), and the policy playing what the game accepted."""

from __future__ import annotations

import contextvars
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest

from checks.dryrun.child.user_calls import CallCounter
from checks.dryrun.standins.move_candidates import boards, candidate_moves, free_cells
from checks.dryrun.standins.move_search import MoveSearch
from checks.dryrun.standins.policy_server import PolicyServer

# --- candidates ---------------------------------------------------------------------------


def test_cells_are_read_from_boards_in_any_layout() -> None:
    letters_on_top = "  A B C\n1 . . .\n2 . x .\n3 o . ."
    numbers_on_top = "   1 2 3\nA  _ _ x\nB  _ o _\nC  x x o"
    ruled = " 1 | 2 | 3\n---+---+---\n x | . | o\n---+---+---\n . | . | x"
    assert free_cells(letters_on_top) == ["A1", "B1", "C1", "A2", "C2", "B3", "C3"]
    assert free_cells(numbers_on_top) == ["A1", "A2", "B1", "B3"]
    # Columns labelled, rows not: the column, then the row counted from 1.
    assert free_cells(ruled) == ["21", "12", "22"]
    assert free_cells("Guess my number from 1 to 9.") == []
    [grid] = boards("Score: 4\n   2    .    .    4\n   .    .    .    .\n   .    2    .    .")
    assert grid.columns is None and grid.rows is None
    # An unlabelled grid's cells are row,column pairs, empty ones first.
    assert grid.cells()[0] == ("0,1", True)


def test_candidates_come_from_the_board_the_instructions_and_free_text() -> None:
    moves = candidate_moves(
        "  A B C\n1 . . .\n2 . x .\n3 o . .",
        "You play x. Answer with the cell, column then row, like B2.",
    )
    assert moves[:3] == ["A1", "1A", "a1"]  # the empty cells first, in the usual notation
    assert {"B2", "C3", "column", "row"} <= set(moves)

    free_text = candidate_moves(
        "   2    .\n   .    4\nScore: 0. Your move?",
        "Slide the tiles. Reply with one move: up, down, left or right.",
    )
    assert {"up", "down", "left", "right"} <= set(free_text)
    # Words of the instructions are tried before a bare grid's row,column pairs.
    assert free_text.index("right") < free_text.index("0,0")

    tagged = candidate_moves("Your move?", "Answer like <move>A1</move>; moves are 'A1', 'B3'.")
    assert tagged[:2] == ["<move>A1</move>", "<move>B3</move>"]
    assert "B3" in tagged

    numbered = candidate_moves("Guesses so far: []", "Guess my number from 1 to 20.")
    assert {str(n) for n in range(1, 21)} <= set(numbered)

    structured = candidate_moves("Board:\nx . .", 'Reply in JSON like {"row": 0, "col": 2}.')
    assert structured[0] == '{"row": 0, "col": 2}'
    assert '{"row": 1, "col": 1}' in structured


def test_cells_a_game_lists_in_free_text_come_before_its_words() -> None:
    # Rows drawn without spaces (`x-o`) are no board we read: the list of free squares is.
    observation = (
        "Board (x is you):\nx-o\n---\n---\nFree squares: A2 B1 B2 C3 (or by number: 2 4 5 9)\n"
        "Reply with one of them, like <move>A2</move>."
    )
    # The search's instructions are the whole conversation but the policy's replies.
    moves = candidate_moves(observation, f"Win the game.\n{observation}")
    assert moves[:4] == ["<move>A2</move>", "<move>B1</move>", "<move>B2</move>", "<move>C3</move>"]
    assert moves.index("<move>C3</move>") < moves.index("<move>Board</move>")


# --- the search ---------------------------------------------------------------------------

TIC_TAC_TOE_PROMPT = "You play x. Answer with the cell, column then row, like B2."


@dataclass
class Board:
    """A game as users write them: an object, holding a generator of its own."""

    cells: dict[str, str] = field(
        default_factory=lambda: {c + r: "." for r in "123" for c in "ABC"}
    )
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    lock: Any = None  # a threading.Lock makes it uncopyable


def render_observation(board: Board) -> str:
    rows = ["  A B C", *(f"{r} " + " ".join(board.cells[c + r] for c in "ABC") for r in "123")]
    return "\n".join(rows)


applied_moves: list[tuple[int, str]] = []  # (id of the board, move): every move a game took
tried_moves: list[str] = []  # every move apply_action was called with


def apply_action(board: Board, action: str) -> None:
    print("apply_action says hello")  # trials are silent
    tried_moves.append(action)
    board.rng.random()  # and leave the game's randomness (and the module's) as it was
    random.random()
    move = action.strip().upper()
    if board.cells.get(move) != ".":
        raise ValueError(f"not a free cell: {action!r}")
    applied_moves.append((id(board), move))
    board.cells[move] = "x"


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "render_observation": render_observation,
    "apply_action": apply_action,
}


@dataclass
class Searched:
    search: MoveSearch
    counter: CallCounter
    published: dict[str, list[str]]


@pytest.fixture
def searched() -> Searched:
    counter = CallCounter()
    published: dict[str, list[str]] = {}
    search = MoveSearch(counter, published.__setitem__, FUNCTIONS.get)
    counter.observer = search
    return Searched(search, counter, published)


def shown(counter: CallCounter, board: Board) -> list[dict[str, str]]:
    """What the instrumented render_observation does, then the conversation it is shown in."""
    counter.enter("render_observation", board)
    return [
        {"role": "system", "content": TIC_TAC_TOE_PROMPT},
        {"role": "user", "content": render_observation(board)},
    ]


def test_moves_are_tried_on_copies_and_the_accepted_ones_published(
    searched: Searched, capsys: pytest.CaptureFixture[str]
) -> None:
    board = Board()
    board.cells.update(B2="o", A1="x")
    before = (dict(board.cells), board.rng.getstate(), random.getstate())
    applied_moves.clear()

    def turn() -> None:
        messages = shown(searched.counter, board)
        searched.search.before_request(messages)

    contextvars.copy_context().run(turn)

    [(position, moves)] = searched.published.items()
    assert position == render_observation(board)
    # Free cells only, as the board names them (the game takes `b1` too): at most a dozen.
    assert {move.upper() for move in moves} == {"B1", "C1", "A2", "C2", "A3", "B3"}
    assert moves[:3] == ["B1", "b1", "C1"]
    # Tried on copies only: the real game, its generator and the module's are as they were.
    assert (dict(board.cells), board.rng.getstate(), random.getstate()) == before
    assert applied_moves and all(applied != id(board) for applied, _ in applied_moves)
    # The trials are the dry run's, not the script's: not counted, not printed.
    assert searched.counter.snapshot() == ({"render_observation": 1}, {})
    assert "hello" not in capsys.readouterr().out
    assert searched.search.snapshot().positions == 1

    # At the next position the moves the game took before are tried first, and few others.
    board.cells.update(B1="x", C1="o")
    tried_moves.clear()
    contextvars.copy_context().run(turn)
    assert tried_moves[:4] == ["A2", "a2", "C2", "c2"]  # taken before, and still free
    assert len(tried_moves) < len(candidate_moves(render_observation(board), TIC_TAC_TOE_PROMPT))


@dataclass
class Keypad:
    """Tic-tac-toe played by keypad number, its free squares named only among many words."""

    taken: set[int] = field(default_factory=lambda: {1, 5})


def render_keypad(keypad: Keypad) -> str:
    free = " ".join(str(n) for n in range(1, 10) if n not in keypad.taken)
    return (
        "Your mark is x, the opponent's is o: a win scores one, a draw half, a loss nothing, "
        "and the opponent plays at random after each of your moves. Squares still free on the "
        f"keypad: {free}. Reply with one of them, like <move>2</move>."
    )


def press_keypad(keypad: Keypad, action: str) -> None:
    square = int(action.removeprefix("<move>").removesuffix("</move>"))
    if not 1 <= square <= 9 or square in keypad.taken:
        raise ValueError(f"not a free square: {action!r}")
    keypad.taken.add(square)


def test_the_standin_finds_a_choice_however_late_the_game_lists_it() -> None:
    """One accepted move is no choice: every rollout of a group would play the same game. The
    search goes on past its usual few tries until it has at least two."""
    counter = CallCounter()
    published: dict[str, list[str]] = {}
    functions = {"render_observation": render_keypad, "apply_action": press_keypad}
    search = MoveSearch(counter, published.__setitem__, functions.get)
    counter.observer = search
    keypad = Keypad()

    def turn() -> None:
        counter.enter("render_observation", keypad)
        search.before_request(
            [
                {"role": "system", "content": "Win the game."},
                {"role": "user", "content": render_keypad(keypad)},
            ]
        )

    contextvars.copy_context().run(turn)

    [moves] = published.values()
    assert moves[0] == "<move>2</move>"  # the example, and then the numbers the words hid
    assert {"<move>3</move>", "<move>9</move>"} <= set(moves)
    assert not {"<move>1</move>", "<move>5</move>"} & set(moves)


def test_a_full_board_leaves_the_standin_stuck_at_that_position(searched: Searched) -> None:
    board = Board()
    board.cells = dict.fromkeys(board.cells, "o")

    contextvars.copy_context().run(
        lambda: searched.search.before_request(shown(searched.counter, board))
    )

    assert list(searched.published.values()) == [[]]  # nothing to play: the policy guesses
    record = searched.search.snapshot()
    assert (record.positions, record.stuck) == (1, 1)
    assert record.stuck_at == render_observation(board)
    assert record.stuck_examples[:2] == ["A1", "1A"]
    assert record.stuck_refusal == "ValueError: not a free cell: 'A1'"


def test_a_conversation_that_does_not_show_the_game_is_left_alone(searched: Searched) -> None:
    def judge_call() -> None:
        shown(searched.counter, Board())
        searched.search.before_request([{"role": "user", "content": "Score these answers."}])

    contextvars.copy_context().run(judge_call)
    # No game rendered in this task at all (another rollout's context): nothing either.
    searched.search.before_request(shown(CallCounter(), Board()))

    assert searched.published == {}


def test_an_uncopyable_game_learns_from_its_own_replies_and_is_never_tried(
    searched: Searched,
) -> None:
    board = Board(lock=threading.Lock())
    applied_moves.clear()

    def turn(played: str) -> list[str]:
        messages = shown(searched.counter, board)
        searched.search.before_request(messages)
        offered = searched.published[messages[-1]["content"]]
        # The script plays the policy's move on the real game, counted as the script's.
        searched.counter.enter("apply_action", board, played)
        try:
            apply_action(board, played)
        except ValueError:
            searched.counter.exception("apply_action")
        return offered

    context = contextvars.copy_context()
    first = context.run(turn, "1A")
    assert applied_moves == []  # the search never touched the real game
    assert "1A" in first and "A1" in first
    second = context.run(turn, "A1")
    assert "1A" not in second  # refused at this very position: not offered there again
    third = context.run(turn, "C3")
    assert third[0] == "A1"  # taken before, so offered first
    assert applied_moves == [(id(board), "A1"), (id(board), "C3")]
    record = searched.search.snapshot()
    assert (record.positions, record.learnt) == (0, 3)
    assert record.copy_error is not None and "lock" in record.copy_error


# --- the policy plays them ----------------------------------------------------------------


def test_the_policy_plays_a_move_the_game_accepts_at_the_position_shown() -> None:
    board = "  A B C\n1 x o x\n2 o . o\n3 x o x"
    with PolicyServer(seed=3) as server:
        server.serve_model("agent", 0)
        server.know_moves(board, ["B2", "b2"])
        client = openai.OpenAI(base_url=server.base_url, api_key="placeholder", max_retries=0)

        def reply(observation: str) -> str:
            response = client.chat.completions.create(
                model="agent@0",
                messages=[
                    {"role": "system", "content": TIC_TAC_TOE_PROMPT},
                    {"role": "user", "content": observation},
                ],
            )
            return response.choices[0].message.content or ""

        assert {reply(board) for _ in range(12)} == {"B2", "b2"}
        # A position it knows nothing of: it guesses, as before.
        assert reply("  A B C\n1 . . .\n2 . . .\n3 . . .") != ""
