"""Answer sets written the way users write them, after ART's own examples.

EMAIL_AGENT follows ART-E (OpenPipe's email-search agent): `search_inbox` and `read_email` over
a small inbox, and `return_final_answer(answer, reference_message_ids)` ends the episode.
TIC_TAC_TOE follows ART's tic-tac-toe example: the board as text, moves like `B2`, optionally
inside `<move>` tags. TIC_TAC_TOE_LETTERS_ON_TOP draws its board the other way round (`  A B C`
over `1 . . .`) in a game object of its own, its moves named in the prose only.
"""

from __future__ import annotations

from typing import Any

from tests.flows.matrix import answers_for

EMAIL_SCENARIOS = [
    {
        "id": "q1",
        "prompt": "When is the Q3 planning offsite?",
        "answer": "September 14",
        "message_id": "m1",
    },
    {
        "id": "q2",
        "prompt": "Which hotel did Dana book for the Berlin trip?",
        "answer": "Hotel Adlon",
        "message_id": "m2",
    },
    {
        "id": "q3",
        "prompt": "What is the new budget for the Atlas project?",
        "answer": "$120,000",
        "message_id": "m3",
    },
    {
        "id": "q4",
        "prompt": "Who is presenting at Friday's all-hands?",
        "answer": "Priya",
        "message_id": "m4",
    },
]


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


EMAIL_TOOLS = [
    _function(
        "search_inbox",
        "Search the inbox for emails matching all the keywords; returns ids and subjects.",
        {"keywords": {"type": "array", "items": {"type": "string"}}},
    ),
    _function(
        "read_email",
        "Read one email by its message id.",
        {"message_id": {"type": "string"}},
    ),
    _function(
        "return_final_answer",
        "Give the final answer and the ids of the emails it comes from.",
        {
            "answer": {"type": "string"},
            "reference_message_ids": {"type": "array", "items": {"type": "string"}},
        },
    ),
]

EMAIL_TOOL_CODE = """\
INBOX = {
    "m1": {"subject": "Q3 planning offsite", "body": "The Q3 planning offsite is on September 14."},
    "m2": {"subject": "Berlin trip", "body": "Dana booked the Hotel Adlon for the Berlin trip."},
    "m3": {"subject": "Atlas budget", "body": "The new budget for the Atlas project is $120,000."},
    "m4": {"subject": "All-hands", "body": "Priya is presenting at Friday's all-hands."},
}


def search_inbox(keywords: list[str]) -> list[dict[str, str]]:
    words = [str(k).lower() for k in keywords]
    return [
        {"message_id": message_id, "subject": email["subject"]}
        for message_id, email in INBOX.items()
        if all(w in (email["subject"] + " " + email["body"]).lower() for w in words)
    ]


def read_email(message_id: str) -> dict[str, str]:
    if message_id not in INBOX:
        return {"error": f"no email with id {message_id}"}
    return INBOX[message_id]
"""

EMAIL_REWARD = """\
def compute_reward(scenario, answer, trajectory):
    trajectory.metrics["gave_sources"] = '"reference_message_ids"' in answer
    if not trajectory.metrics["answered"]:
        return -1.0
    correct = scenario["answer"].lower() in answer.lower()
    cited = scenario["message_id"] in answer
    return float(correct) + 0.5 * float(cited) - 0.05 * trajectory.metrics["turns"]
"""


def email_agent(**overrides: Any) -> dict[str, Any]:
    """The ART-E style agent with local tools, a programmatic reward and a final-answer tool."""
    answers = answers_for("tools", "programmatic", "dataset", "local", False)
    answers.update(
        task="Answer questions about the user's inbox by searching and reading their emails.",
        scenario_rows=EMAIL_SCENARIOS,
        system_prompt=(
            "You are an email assistant. Search the inbox, read the relevant emails, then call "
            "return_final_answer with the answer and the ids of the emails it comes from."
        ),
        tools=EMAIL_TOOLS,
        final_answer_tool="return_final_answer",
        tool_code=EMAIL_TOOL_CODE,
        episode_end="When the agent calls return_final_answer, or after 6 turns.",
        max_turns=6,
        reward_logic={"kind": "function", "code": EMAIL_REWARD},
        run_name="email-agent-001",
    )
    answers.update(overrides)
    return answers


TIC_TAC_TOE_SYSTEM_PROMPT = (
    "You are a tic-tac-toe player. You are playing against an opponent. Always choose the move "
    "most likely to lead to an eventual win. Return your move as an XML object with a single "
    "property 'move', like so: <move>A1</move>. Optional moves are 'A1', 'B3', 'C2', etc. You "
    "are the x symbol."
)
TIC_TAC_TOE = """\
LINES = [[(r, c) for c in range(3)] for r in range(3)]
LINES += [[(r, c) for r in range(3)] for c in range(3)]
LINES += [[(i, i) for i in range(3)], [(i, 2 - i) for i in range(3)]]


def create_game(scenario):
    board = [["_"] * 3 for _ in range(3)]
    for cell in scenario.get("opening", []):
        board["ABC".index(cell[0])][int(cell[1]) - 1] = "o"
    return {"board": board, "winner": None}


def render_observation(game):
    rows = ["   1 2 3"]
    rows += [f"{letter}  {' '.join(row)}" for letter, row in zip("ABC", game["board"], strict=True)]
    return "\\n".join(rows)


def winner(board):
    for line in LINES:
        marks = {board[r][c] for r, c in line}
        if len(marks) == 1 and "_" not in marks:
            return marks.pop()
    if all(cell != "_" for row in board for cell in row):
        return "draw"
    return None


def apply_action(game, action):
    move = action.strip().removeprefix("<move>").removesuffix("</move>").strip().upper()
    if len(move) != 2 or move[0] not in "ABC" or move[1] not in "123":
        raise ValueError(f"not a move: {action!r}")
    row, column = "ABC".index(move[0]), int(move[1]) - 1
    if game["board"][row][column] != "_":
        raise ValueError(f"{move} is taken")
    game["board"][row][column] = "x"
    game["winner"] = winner(game["board"])
    free = [(r, c) for r in range(3) for c in range(3) if game["board"][r][c] == "_"]
    if game["winner"] is None and free:
        r, c = free[0]
        game["board"][r][c] = "o"
        game["winner"] = winner(game["board"])


def is_finished(game):
    return game["winner"] is not None
"""
TIC_TAC_TOE_REWARD = """\
def compute_reward(scenario, game, trajectory):
    outcome = {"x": 1.0, "draw": 0.5, "o": 0.0}
    return outcome.get(game["winner"], 0.0)
"""


def tic_tac_toe(**overrides: Any) -> dict[str, Any]:
    """ART's tic-tac-toe example as a user would paste it, with a programmatic reward."""
    answers = answers_for("game", "programmatic", "dataset", "local", False)
    answers.update(
        task="Win games of tic-tac-toe against a simple opponent.",
        scenario_rows=[
            {"id": f"g{i}", "opening": opening}
            for i, opening in enumerate([[], ["B2"], ["A1"], ["C3"], [], ["A3"], ["C1"], []])
        ],
        system_prompt=TIC_TAC_TOE_SYSTEM_PROMPT,
        environment=TIC_TAC_TOE,
        episode_end="When someone wins, the board is full, or a move is invalid.",
        max_turns=9,
        reward_logic={"kind": "function", "code": TIC_TAC_TOE_REWARD},
        run_name="tic-tac-toe-001",
    )
    answers.update(overrides)
    return answers


# The board the other way round, columns lettered across the top, rows numbered: the layout
# the dry run's first stand-in could not read (95 moves, 55 refused, "dry run FAILED").
TIC_TAC_TOE_LETTERS_ON_TOP = """\
class Game:
    def __init__(self, opening):
        self.cells = {column + row: "." for row in "123" for column in "ABC"}
        for cell in opening:
            self.cells[cell] = "o"
        self.winner = None


LINES = [[c + r for c in "ABC"] for r in "123"] + [[c + r for r in "123"] for c in "ABC"]
LINES += [["A1", "B2", "C3"], ["C1", "B2", "A3"]]


def create_game(scenario):
    return Game(scenario.get("opening", []))


def render_observation(game):
    rows = ["  A B C"]
    rows += [row + " " + " ".join(game.cells[c + row] for c in "ABC") for row in "123"]
    return "\\n".join(rows)


def winner(cells):
    for line in LINES:
        marks = {cells[cell] for cell in line}
        if len(marks) == 1 and "." not in marks:
            return marks.pop()
    return "draw" if "." not in cells.values() else None


def apply_action(game, action):
    cell = action.strip().upper()
    if cell not in game.cells:
        raise ValueError(f"{action!r} is not a cell: answer with its column and row, like B2")
    if game.cells[cell] != ".":
        raise ValueError(f"{cell} is taken")
    game.cells[cell] = "x"
    game.winner = winner(game.cells)
    free = [c for c, mark in game.cells.items() if mark == "."]
    if game.winner is None and free:
        game.cells[free[-1]] = "o"
        game.winner = winner(game.cells)


def is_finished(game):
    return game.winner is not None


def compute_reward(scenario, game, trajectory):
    return {"x": 1.0, "draw": 0.5}.get(game.winner, 0.0)
"""


def tic_tac_toe_letters_on_top(**overrides: Any) -> dict[str, Any]:
    """Tic-tac-toe with the columns lettered across the top, the game an object, its reward in
    the environment code."""
    answers = answers_for("game", "programmatic", "dataset", "local", False)
    del answers["reward_logic"]  # the environment's own compute_reward is the reward
    answers.update(
        task="Win games of tic-tac-toe against a simple opponent.",
        scenario_rows=[
            {"id": f"g{i}", "opening": opening}
            for i, opening in enumerate([[], ["B2"], ["A1"], ["C3"], [], ["A3"], ["C1"], []])
        ],
        system_prompt=(
            "You play x at tic-tac-toe. The columns are lettered across the top and the rows "
            "numbered down the side: answer with the free cell you take, column then row, for "
            "example B2, and nothing else."
        ),
        environment=TIC_TAC_TOE_LETTERS_ON_TOP,
        episode_end="When someone wins, the board is full, or a move is invalid.",
        max_turns=9,
        run_name="tic-tac-toe-letters-001",
    )
    answers.update(overrides)
    return answers


COMPASS_GAME = """\
def create_game(scenario):
    return {"position": 0, "goal": int(scenario["goal"])}


def render_observation(game):
    return f"You are at {game['position']}. Which way?"


def apply_action(game, action):
    direction = action.strip().lower()
    if direction not in ("north", "south"):
        raise ValueError(f"not a direction: {action!r}")
    game["position"] += 1 if direction == "north" else -1


def is_finished(game):
    return game["position"] == game["goal"]
"""


def invalid_moves_game(reward: str = "programmatic") -> dict[str, Any]:
    """A game whose moves (north or south) no prompt names: every move the stand-in plays is
    invalid."""
    answers = answers_for("game", reward, "dataset", "local", False)
    answers.update(
        scenario_rows=[{"goal": g} for g in (1, 2, -1, -2, 3, -3, 1, 2)],
        system_prompt="Reach the goal.",
        environment=COMPASS_GAME,
        run_name="compass-001",
    )
    if reward == "programmatic":
        answers["reward_logic"] = {
            "kind": "expression",
            "code": "1.0 if is_finished(game) else 0.0",
        }
    return answers


GAME_2048_SYSTEM_PROMPT = (
    "You are playing 2048. Slide the tiles to merge equal numbers and reach 2048. Reply with "
    "one move: 'up', 'down', 'left' or 'right'."
)
# Written to its author's taste, not to ruff's: `zip(*cells)` without `strict=` (B905) and the
# moves as `"""...""".split()` (SIM905). It runs as it is.
GAME_2048 = '''\
import random
import re
from dataclasses import dataclass, field

MOVES = """
up
down
left
right
""".split()


@dataclass
class Board:
    cells: list[list[int]]
    rng: random.Random = field(repr=False)
    score: int = 0


def add_tile(board):
    empty = [(r, c) for r, row in enumerate(board.cells) for c, v in enumerate(row) if v == 0]
    if empty:
        r, c = board.rng.choice(empty)
        board.cells[r][c] = 2 if board.rng.random() < 0.9 else 4


def slide_left(row):
    tiles = [v for v in row if v]
    merged, gained = [], 0
    while tiles:
        if len(tiles) > 1 and tiles[0] == tiles[1]:
            merged.append(tiles[0] * 2)
            gained += tiles[0] * 2
            tiles = tiles[2:]
        else:
            merged.append(tiles.pop(0))
    return merged + [0] * (len(row) - len(merged)), gained


def transpose(cells):
    return [list(column) for column in zip(*cells)]


def create_game(scenario):
    board = Board([[0] * 4 for _ in range(4)], random.Random(scenario["seed"]))
    add_tile(board)
    add_tile(board)
    return board


def render_observation(board):
    rows = [" ".join(f"{v:>4}" if v else "   ." for v in row) for row in board.cells]
    return "\\n".join(rows) + f"\\nScore: {board.score}. Your move?"


def apply_action(board, action):
    words = [w for w in re.findall(r"[a-z]+", action.lower()) if w in MOVES]
    if not words:
        raise ValueError(f"not a move: {action!r}")
    cells = board.cells
    if words[0] in ("up", "down"):
        cells = transpose(cells)
    if words[0] in ("right", "down"):
        cells = [row[::-1] for row in cells]
    slid = [slide_left(row) for row in cells]
    cells = [row for row, _ in slid]
    if words[0] in ("right", "down"):
        cells = [row[::-1] for row in cells]
    if words[0] in ("up", "down"):
        cells = transpose(cells)
    if cells != board.cells:
        board.cells = cells
        board.score += sum(gained for _, gained in slid)
        add_tile(board)


def is_finished(board):
    full = all(v for row in board.cells for v in row)
    return full or any(2048 in row for row in board.cells)


def compute_reward(scenario, game, trajectory):
    return max(max(row) for row in game.cells) / 2048 + game.score / 10000
'''

# The same game calling a function it never defines: an error, not a matter of style.
GAME_2048_CALLS_UNDEFINED = GAME_2048.replace(
    "    add_tile(board)\n    return board",
    "    add_tile(board)\n    spawn_bonus_tile(board)\n    return board",
)
assert GAME_2048_CALLS_UNDEFINED != GAME_2048


def game_2048(**overrides: Any) -> dict[str, Any]:
    """2048 pasted as its author wrote it (GAME_2048), with its own reward."""
    answers = answers_for("game", "programmatic", "dataset", "local", False)
    del answers["reward_logic"]  # the environment's own compute_reward is the reward
    answers.update(
        task="Play 2048: merge tiles to reach the highest tile you can.",
        scenario_rows=[{"seed": seed} for seed in range(8)],
        system_prompt=GAME_2048_SYSTEM_PROMPT,
        environment=GAME_2048,
        episode_end="When the board is full or a tile reaches 2048, or after 3 moves.",
        # Short, so that the tests that dry-run it stay quick.
        max_turns=3,
        run_name="game-2048-001",
    )
    answers.update(overrides)
    return answers


GAME_2048_FREE_TEXT_PROMPT = (
    "You are playing 2048. Slide the tiles to merge equal numbers and reach 2048. Reply with "
    "your move: up, down, left or right."
)


def game_2048_free_text(**overrides: Any) -> dict[str, Any]:
    """2048 as GAME_2048, its moves named in free text (unquoted), 150 moves long (2048 needs
    about that many to reach 256), its reward mixed with RULER's, judged by Claude."""
    answers = game_2048(
        system_prompt=GAME_2048_FREE_TEXT_PROMPT,
        episode_end="When the board is full or a tile reaches 2048, or after 150 moves.",
        max_turns=150,
        reward="custom",
        reward_mix=0.5,
        judge_model="anthropic/claude-sonnet-4-5",
        ruler_rubric="",  # ART's default
        run_name="game-2048-free-text-001",
    )
    answers.update(overrides)
    return answers
