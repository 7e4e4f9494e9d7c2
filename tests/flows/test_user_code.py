"""User code as people write it: imports, helpers and constants are kept to its own scope, its
entry points are called as their signatures say, and its third-party imports are asked about."""

from __future__ import annotations

import ast
import json
import tomllib
from typing import Any

import pytest
from packaging.requirements import Requirement

from checks.script_format import formatted_script
from flows import TRAIN_RL, AnswersError, Problem, RenderError, Reply, advance, replay
from flows.code.third_party import requirement, requirements, suggested_requirements, third_party
from flows.code.user_code import scoped_body
from flows.definition.questions import question
from flows.definition.session import Session
from flows.definition.steps import InvalidAnswer
from flows.script.literals import toml_string
from tests.flows.realistic import GUESSING_GAME, REALISTIC, TIC_TAC_TOE, YAML_REWARD


def rendered(name: str, **changes: Any) -> str:
    return formatted_script(replay(TRAIN_RL, {**REALISTIC[name], **changes}).answers)


def dependencies(script: str) -> list[str]:
    """The PEP 723 block's dependencies, read as uv reads them."""
    block = script.split("# /// script\n", 1)[1].split("# ///\n", 1)[0]
    toml = "\n".join(line.removeprefix("# ").removeprefix("#") for line in block.splitlines())
    return tomllib.loads(toml)["dependencies"]


def top_level(script: str) -> dict[str, ast.stmt]:
    module = ast.parse(script)
    return {
        node.name: node
        for node in module.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }


def call_of(script: str, function: str) -> str:
    """The one call of `function` in the script's rollout, as source."""
    rollout = top_level(script)["rollout"]
    calls = [
        ast.unparse(node)
        for node in ast.walk(rollout)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == function
    ]
    assert len(calls) == 1, calls
    return calls[0]


# ---- placement ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REALISTIC))
def test_realistic_code_is_accepted_and_lands_in_a_scope_of_its_own(name: str) -> None:
    script = rendered(name)
    functions = top_level(script)
    # The script's own top level is unchanged by the user's names (SYSTEM_PROMPT, validate,
    # Scenario, random, json, Any...): each of its functions is defined once, by the script.
    assert isinstance(functions["rollout"], ast.AsyncFunctionDef)
    assert {"validate", "main"} <= set(functions)
    placed = [n for n in functions if n.startswith("user_")]
    assert placed, "the user's code must sit in a user_* function"
    compile(script, name, "exec")


def test_the_tic_tac_toe_environment_keeps_its_meaning_in_its_scope() -> None:
    """Run the placed environment and the original side by side: same games, same rewards."""
    script = rendered("tic-tac-toe")
    placed = top_level(script)["user_environment"]
    assert isinstance(placed, ast.FunctionDef)
    namespace: dict[str, Any] = {}
    exec(compile(ast.Module([placed], []), "placed", "exec"), namespace)
    entry_points = namespace["user_environment"]()
    original: dict[str, Any] = {}
    exec(compile(TIC_TAC_TOE, "original", "exec"), original)
    names = ("create_game", "render_observation", "apply_action", "is_finished", "compute_reward")
    assert len(entry_points) == len(names)
    outcomes = []
    for functions in (dict(zip(names, entry_points, strict=True)), original):
        game = functions["create_game"]({"seed": 3, "opponent_starts": True})
        seen = []
        for move in ("A1", "5", "C3", "A3", "C1", "B1", "B3", "A2", "C2"):
            if functions["is_finished"](game):
                break
            seen.append(functions["render_observation"](game))
            try:
                functions["apply_action"](game, f"<move>{move}</move>")
            except ValueError as error:
                seen.append(str(error))
        outcomes.append((seen, functions["compute_reward"](game)))
    assert outcomes[0] == outcomes[1]
    # `global games_started` became `nonlocal`: the counter is the scope's own, and it counts.
    assert "nonlocal games_started" in ast.unparse(placed)
    assert "games_started" not in {n for n in top_level(script)}


def test_multi_line_strings_keep_their_text_exactly() -> None:
    source = (
        'PROMPT = """Line one\n  indented two\n\nfour"""\n'
        "ESCAPED = 'a\\\n  b'\n"
        "def read():\n    return PROMPT, ESCAPED, f'''{PROMPT}\nend'''\n"
    )
    body = scoped_body(source, "tool code")
    namespace: dict[str, Any] = {}
    exec("def user_code():\n" + body + "    return read\n", namespace)
    original: dict[str, Any] = {}
    exec(source, original)
    assert namespace["user_code"]()() == original["read"]()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from math import *\n\ndef f():\n    return pi\n", "import the names you use"),
        ("x = 1\nreturn x\n", "'return' outside function"),
        ("x = yield 1\n", "'yield' outside function"),
        ("def f():\n    global count\n    count = 1\n", "add `count = ...` at the top level"),
        ("global count\ncount = 1\n", "does nothing: remove it"),
        ("import os; from __future__ import annotations\n", "from __future__ imports must occur"),
    ],
)
def test_code_that_cannot_live_in_a_function_is_refused_with_what_to_do(
    source: str, expected: str
) -> None:
    answers = {**REALISTIC["math-reward"], "reward_logic": source}
    with pytest.raises(AnswersError) as raised:
        replay(TRAIN_RL, answers)
    assert expected in raised.value.message


def test_a_future_import_is_dropped_because_the_script_has_it() -> None:
    source = '"""Doc."""\n\nfrom __future__ import annotations\n\nX = 1\nprint(X)\n'
    assert scoped_body(source, "generator") == '    """Doc."""\n\n    X = 1\n    print(X)\n'


def test_a_main_block_is_dropped_because_it_would_run_when_the_script_starts() -> None:
    source = (
        "import random\n\n\ndef create_game(scenario):\n    return random.random()\n\n\n"
        'if __name__ == "__main__":\n    # play one game by hand\n    print(create_game({}))\n'
        "\n\nif '__main__' == __name__: print('demo')\n"
    )
    placed = scoped_body(source, "environment code")
    assert "print" not in placed and "__main__" not in placed
    assert "    import random\n" in placed and "    def create_game(scenario):\n" in placed
    kept = 'if __name__ == "__main__":\n    print(1)\nelse:\n    print(2)\n'  # not a main block
    assert scoped_body(kept, "environment code") == "".join(
        "    " + line + "\n" for line in kept.splitlines()
    )


# ---- signatures --------------------------------------------------------------------------


def test_calls_follow_the_signatures() -> None:
    assert call_of(rendered("tic-tac-toe"), "compute_reward") == "compute_reward(game)"
    assert call_of(rendered("tic-tac-toe"), "create_game") == "create_game(scenario)"
    assert call_of(rendered("guessing-game"), "create_game") == "create_game()"
    assert call_of(rendered("math-reward"), "compute_reward") == "compute_reward(answer, scenario)"
    keyword_only = (
        "def compute_reward(scenario, *, answer, trajectory=None, bonus=0.0):\n"
        "    return float(answer == scenario['answer'])\n"
    )
    assert (
        call_of(rendered("math-reward", reward_logic=keyword_only), "compute_reward")
        == "compute_reward(scenario, answer=answer, trajectory=trajectory)"
    )
    unnamed = "def compute_reward(s, a, t):\n    return float(a == s['answer'])\n"
    assert (
        call_of(rendered("math-reward", reward_logic=unnamed), "compute_reward")
        == "compute_reward(scenario, answer, trajectory)"
    )
    asynchronous = "async def compute_reward(scenario, answer):\n    return 1.0\n"
    script = rendered("math-reward", reward_logic=asynchronous)
    assert "float(await compute_reward(scenario, answer))" in script


def test_a_generator_without_rng_seeds_the_random_module() -> None:
    answers = {
        **REALISTIC["math-reward"],
        "scenario_source": "generator",
        "scenario_generator": (
            "import random\n\n\ndef generate_scenario():\n    a = random.randint(1, 9)\n"
            "    return {'prompt': f'{a} + 1?', 'answer': str(a + 1)}\n"
        ),
        "val_generated": "none",
        "iteration": "open_ended",
    }
    for key in ("scenario_rows", "train_split", "val_split", "val_fraction", "val_every"):
        answers.pop(key)
    answers.pop("val_max_groups")
    script = formatted_script(replay(TRAIN_RL, answers).answers)
    assert "random.seed(seed)" in script and "check_scenario(generate_scenario()," in script


def session_before(step_id: str, answers: dict[str, Any]) -> Session:
    """A session whose next question is `step_id`, answered as `answers` up to it."""
    order = [step.id for step in TRAIN_RL.steps]
    stored = replay(TRAIN_RL, answers).answers
    kept = {k: v for k, v in stored.items() if order.index(k) < order.index(step_id)}
    session = Session(flow="train-rl", answers=kept)
    assert TRAIN_RL.next_step(session.answers).id == step_id  # type: ignore[union-attr]
    return session


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        (
            TIC_TAC_TOE.replace(
                "def compute_reward(game: TicTacToeGame)", "def compute_reward(board, player)"
            ),
            "Your environment defines `compute_reward`, the name of the reward, so with a "
            "programmatic reward it is the reward; but `compute_reward(board, player)` cannot be "
            "called as the reward: the script has nothing to pass as `board`. The script passes "
            "`scenario`, `game`, `trajectory` by name",
        ),
        (
            GUESSING_GAME.replace("def create_game()", "def create_game(scenario, level)"),
            "`create_game(scenario, level)` does not match how the script calls it: "
            "`create_game(scenario)`, with 1 argument (or none)",
        ),
        (
            GUESSING_GAME.replace("def is_finished(", "async def is_finished("),
            "`is_finished` must be a plain function, not async",
        ),
        (
            GUESSING_GAME.replace(
                "def apply_action(game: dict[str, Any], action: str)", "def apply_action(game)"
            ),
            "`apply_action(game)` does not match how the script calls it: "
            "`apply_action(game, action)`",
        ),
        (GUESSING_GAME + "\nis_finished = None\n", "binds `is_finished` to something other"),
    ],
)
def test_an_environment_whose_signatures_do_not_fit_is_refused_at_its_question(
    environment: str, expected: str
) -> None:
    session = session_before("environment", REALISTIC["guessing-game"])
    turn = advance(TRAIN_RL, session, Reply(text=environment))
    problems = [m.text for m in turn.messages if isinstance(m, Problem)]
    assert problems and expected in problems[0], problems
    assert turn.session.answers == session.answers


def test_an_environment_reward_is_the_reward_and_is_recommended() -> None:
    session = session_before("reward", REALISTIC["tic-tac-toe"])
    step = TRAIN_RL.next_step(session.answers)
    assert step is not None
    shown = question(TRAIN_RL, session, step)
    assert shown.options[0].value == "programmatic" and shown.options[0].recommended
    assert "Your environment has its own `compute_reward`" in shown.text
    # With a programmatic reward the reward's code is not asked: the environment's is the reward.
    turn = advance(TRAIN_RL, session, Reply(text="programmatic"))
    assert TRAIN_RL.next_step(turn.session.answers).id == "train_split"  # type: ignore[union-attr]
    with pytest.raises(AnswersError, match="reward_logic: this question is not asked"):
        replay(TRAIN_RL, {**REALISTIC["tic-tac-toe"], "reward_logic": "1.0"})


def test_an_environment_reward_is_left_alone_with_ruler() -> None:
    script = rendered("tic-tac-toe", reward="ruler", judge_model="openai/gpt-5.4")
    assert (
        "create_game, render_observation, apply_action, is_finished = user_environment()" in script
    )
    assert "compute_reward(" not in ast.unparse(top_level(script)["rollout"])


# ---- third-party imports -----------------------------------------------------------------


def test_third_party_imports_are_told_apart_from_the_standard_library_and_art_s_own() -> None:
    modules = {"json", "re", "typing", "yaml", "sklearn", "numpy", "openai", "polars", "bs4", "art"}
    assert third_party(modules) == ["bs4", "sklearn", "yaml"]
    assert suggested_requirements(["bs4", "sklearn", "yaml", "tiktoken"]) == [
        "beautifulsoup4",
        "pyyaml",
        "scikit-learn",
        "tiktoken",
    ]


def test_the_packages_question_is_asked_only_for_third_party_imports() -> None:
    session = session_before("extra_packages", REALISTIC["yaml-reward"])
    step = TRAIN_RL.next_step(session.answers)
    assert step is not None and step.id == "extra_packages"
    text = question(TRAIN_RL, session, step).text
    assert "Your code imports `yaml`" in text and "My guess: `pyyaml`" in text
    default = advance(TRAIN_RL, session, Reply(text="default")).session.answers["extra_packages"]
    assert default == {"imports": ["yaml"], "requirements": ["pyyaml"]}
    # json, re, random and typing need nothing: no such question for the other inputs.
    for name in ("tic-tac-toe", "guessing-game", "math-reward", "tools"):
        assert "extra_packages" not in replay(TRAIN_RL, REALISTIC[name]).answers


def test_the_named_packages_land_in_the_pep_723_block() -> None:
    script = rendered("yaml-reward", extra_packages="PyYAML >= 6, < 7\nrequests[socks]")
    assert dependencies(script)[-2:] == ["PyYAML>=6,<7", "requests[socks]"]
    assert '#     "PyYAML>=6,<7",\n#     "requests[socks]",\n# ]' in script


def test_code_edited_after_the_packages_were_named_is_caught_at_render() -> None:
    answers = dict(replay(TRAIN_RL, REALISTIC["yaml-reward"]).answers)
    answers["reward_logic"] = {
        "kind": "function",
        "code": "import toml\nimport yaml\n\n\n" + YAML_REWARD.split("import yaml\n", 1)[1],
    }
    with pytest.raises(RenderError, match=r"now imports toml, yaml.*edit extra packages"):
        formatted_script(answers)


ACCEPTED = [
    "pyyaml",
    "PyYAML>=6",
    "requests[socks,security]>=2.31,<3",
    "numpy==1.26.*",
    "a.b-c_d~=1.0rc1",
]
REFUSED = [
    "pyyaml @ https://example.com/pyyaml.whl",
    "git+https://github.com/yaml/pyyaml",
    "./pyyaml",
    "/tmp/pyyaml.whl",
    "-e .",
    "--extra-index-url=https://evil.example",
    'pyyaml; os_name == "nt"',
    'pyyaml"',
    "pyyaml\\",
    "pyyaml\n]",
    "py yaml",
    "pyyaml>=6 # comment",
    "",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_accepted_requirements_are_pep_508_and_print_as_toml_strings(text: str) -> None:
    value = requirement(text)
    assert (
        str(Requirement(value)).replace(" ", "").lower()
        == str(Requirement(text)).replace(" ", "").lower()
    )
    assert tomllib.loads(f"x = {toml_string(value)}")["x"] == value


@pytest.mark.parametrize("text", REFUSED)
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(InvalidAnswer, match=r"not a package requirement|Name at least one"):
        requirement(text) if text.strip() else requirements(text)


def test_a_json_list_of_requirements_is_read_too() -> None:
    assert requirements(json.dumps(["pyyaml>=6", "requests"])) == ["pyyaml>=6", "requests"]
    assert requirements("- pyyaml\n- requests\n") == ["pyyaml", "requests"]
