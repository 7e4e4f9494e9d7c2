"""Whole conversations with the train-rl wizard, one table per branch."""

from __future__ import annotations

import json

from flows import Answered, Choice, Question, Session
from flows.definition.questions import question
from flows.wizards.rl.train_rl import TRAIN_RL
from flows.wizards.rl.wording import RULER_NOTE
from tests.flows.conversation import Conversation
from tests.flows.matrix import ENVIRONMENT, MATH_ROWS, TOOL_CODE, TOOLS, answers_for

ROWS_JSONL = "\n".join(json.dumps(row) for row in MATH_ROWS)
GUESS_RUBRIC = "- A win always beats a loss.\n- Among wins, fewer guesses score higher."


def single_turn_ruler_up_to_reward() -> Conversation:
    chat = Conversation()
    chat.play(
        [
            ("Only logged or static scenarios", "turns"),
            ("single", "task"),
            ("Answer arithmetic questions with only the number.", "scenario_source"),
            ("1", "scenario_rows"),
            (ROWS_JSONL, "system_prompt"),
            ("skip", "agent_prompt"),
            ("default", "reward"),
        ]
    )
    return chat


def test_single_turn_with_ruler_asks_every_question_in_order_and_completes() -> None:
    chat = single_turn_ruler_up_to_reward()
    chat.play(
        [
            ("ruler", "judge_model"),
            ("openai/gpt-5.4-mini", "ruler_rubric"),
            ("default", "train_split"),
            ("all", "val_split"),
            ("held_out", "val_fraction"),
            ("0.25", "val_every"),
            ("default", "val_max_groups"),
            ("4", "base_model"),
            ("meta-llama/Llama-3.1-8B-Instruct", "project"),
            ("default", "run_name"),
            ("math-solver-001", "backend"),
            ("LocalBackend", "hyperparameters"),
            ("Use defaults", "iteration"),
            ("dataset", None),
        ]
    )
    done = chat.completed()
    assert done is not None and chat.session.status == "complete"
    assert done.answers["judge_model"] == "openai/gpt-5.4-mini"
    assert done.answers["ruler_rubric"] == ""  # ART's default rubric
    assert done.answers["scenario_rows"] == MATH_ROWS
    assert done.answers["project"] == "rl-project"
    assert done.answers["val_every"] == 10 and done.answers["val_max_groups"] == 4
    assert "uses_tools" not in done.answers  # single-turn never asks about tools


def test_a_run_name_a_module_has_is_refused_with_why_and_a_project_name_is_not() -> None:
    """The script is saved as `<run name>.py`, and Python imports a file beside the script
    before the module of that name: a run called `random` cannot start. The project only names
    ART's folder (`<art path>/<project>/models/...`), never a file beside the script, and a
    folder without `__init__.py` stands in for no installed module: any safe name will do."""
    chat = single_turn_ruler_up_to_reward()
    chat.play(
        [
            ("ruler", "judge_model"),
            ("openai/gpt-5.4-mini", "ruler_rubric"),
            ("default", "train_split"),
            ("all", "val_split"),
            ("held_out", "val_fraction"),
            ("0.25", "val_every"),
            ("default", "val_max_groups"),
            ("4", "base_model"),
            ("meta-llama/Llama-3.1-8B-Instruct", "project"),
            ("random", "run_name"),
        ]
    )
    for reply, says in [
        ("random", "`random` is a module of Python's standard library"),
        ("math", "`math` is a module of Python's standard library"),
        ("art", "`art` is ART itself"),
        ("dotenv", "`dotenv` is a module the script's dependencies provide"),
    ]:
        chat.say(reply)
        problem = chat.problem() or ""
        assert says in problem, (reply, problem)
        assert f"saved as `{reply}.py`" in problem and f"`{reply}-run-001`" in problem
        assert chat.asking() == "run_name"
    chat.play([("random-baseline", "backend"), ("LocalBackend", "hyperparameters")])
    assert chat.session.answers["project"] == "random"
    assert chat.session.answers["run_name"] == "random-baseline"


def test_ruler_is_explained_once_when_the_reward_question_is_first_asked() -> None:
    chat = Conversation()
    chat.play(
        [
            ("static", "turns"),
            ("single", "task"),
            ("Classify support tickets by urgency.", "scenario_source"),
        ]
    )
    chat.play(
        [
            ("runner_file", "scenarios_path"),
            ("/data/tickets.jsonl", "system_prompt"),
            ("skip", "agent_prompt"),
        ]
    )
    chat.say("ticket")
    assert RULER_NOTE in chat.notices()
    chat.say("back")
    chat.say("keep")
    assert chat.asking() == "reward"
    assert RULER_NOTE not in chat.notices()


def test_multi_turn_with_tools_and_programmatic_reward() -> None:
    chat = Conversation()
    chat.play(
        [
            ("Episodes can be recreated", "turns"),
            ("Multi-turn", "task"),
            ("Use the calculator tool to add two numbers, then state the sum.", "scenario_source"),
            ("inline", "scenario_rows"),
            (json.dumps(MATH_ROWS), "system_prompt"),
            ("You are a careful calculator agent.", "uses_tools"),
            ("yes", "agent_prompt"),
            ("default", "tools"),
            (json.dumps(TOOLS), "final_answer_tool"),
            ("none", "tool_execution"),
            ("local", "tool_code"),
            (f"```python\n{TOOL_CODE}```", "simulated_user"),
            ("skip", "episode_end"),
            ("When the agent answers without calling a tool.", "max_turns"),
            ("6", "reward"),
            ("programmatic", "reward_logic"),
            ("1.0 if scenario['answer'] in answer else 0.0", "train_split"),
            ("all", "val_split"),
            ("none", "base_model"),
            ("1", "project"),
            ("calc", "run_name"),
            ("calc-agent-001", "backend"),
            ("local", "hyperparameters"),
            ("defaults", "iteration"),
            ("open_ended", None),
        ]
    )
    done = chat.completed()
    assert done is not None
    assert done.answers["tools"][0]["function"]["name"] == "add"
    assert done.answers["tool_code"].startswith("def add(")  # the code fence is stripped
    assert done.answers["reward_logic"] == {
        "kind": "expression",
        "code": "1.0 if scenario['answer'] in answer else 0.0",
    }
    assert done.answers["max_turns"] == 6
    assert "judge_model" not in done.answers


def test_multi_turn_game_loop_with_custom_reward_on_serverless() -> None:
    chat = Conversation()
    chat.play(
        [
            ("yes", "turns"),
            ("2", "task"),  # "2" is the second option as shown: recommended multi-turn comes first
        ]
    )
    assert chat.session.answers["turns"] == "single"  # the numbering follows the display order
    chat.say("back")
    assert chat.asking() == "turns"
    chat.play(
        [
            ("1", "task"),
            ("Guess the hidden number in as few turns as possible.", "scenario_source"),
            ("inline", "scenario_rows"),
            ('[{"target": 3}, {"target": 7}]', "system_prompt"),
            ("skip", "uses_tools"),
            ("no", "environment"),
            (ENVIRONMENT, "invalid_action"),
            ("Tell the agent and go on", "episode_end"),
            ("When the number is guessed or after five guesses.", "max_turns"),
            ("default", "reward"),
            ("custom", "reward_logic"),
            (
                "def compute_reward(scenario, game, trajectory):\n"
                "    return 1.0 if game['won'] else 0.0",
                "reward_mix",
            ),
            ("0.3", "judge_model"),
            ("anthropic/claude-sonnet-4-5", "ruler_rubric"),
            (GUESS_RUBRIC, "train_split"),
            ("all", "val_split"),
            ("none", "base_model"),
            ("Qwen/Qwen3-30B-A3B-Instruct-2507", "project"),
            ("games", "run_name"),
            ("guess-001", "backend"),
            ("ServerlessBackend", "hyperparameters"),
            ("defaults", "iteration"),
            ("1", None),
        ]
    )
    done = chat.completed()
    assert done is not None
    assert done.answers["backend"] == "serverless"
    assert done.answers["judge_model"] == "anthropic/claude-sonnet-4-5"  # another LiteLLM id
    assert done.answers["reward_logic"]["kind"] == "function"
    assert done.answers["reward_mix"] == 0.3
    assert done.answers["ruler_rubric"] == GUESS_RUBRIC
    assert done.answers["invalid_action"] == "continue"
    assert done.answers["iteration"] == "dataset"  # 1 = the recommended option for fixed data


def test_customized_hyperparameters_loop_until_done() -> None:
    chat = single_turn_ruler_up_to_reward()
    chat.play(
        [
            ("ruler", "judge_model"),
            ("1", "ruler_rubric"),
            ("default", "train_split"),
            ("fraction", "train_fraction"),
            ("0.5", "val_split"),
            ("none", "base_model"),
            ("OpenPipe/Qwen3-14B-Instruct", "project"),
            ("math", "run_name"),
            ("math-002", "backend"),
            ("local", "hyperparameters"),
            ("customize", "hyperparameter_values"),
        ]
    )
    menu = chat.asked()
    assert menu is not None and [o.value for o in menu.options][-1] == "done"
    assert any(o.label == "GPU memory utilization: 0.7" for o in menu.options)  # LocalBackend only
    chat.say("rollouts_per_group")
    assert chat.asked() is not None and "Rollouts per group" in chat.asked().text  # type: ignore[union-attr]
    chat.say("1")
    assert chat.problem() is not None and "out of range" in chat.problem()  # type: ignore[operator]
    again = chat.asked()  # the value is asked again, not the whole menu
    assert again is not None and again.text == "New value for Rollouts per group?"
    chat.say("8")
    assert chat.problem() is None and chat.asking() == "hyperparameter_values"
    chat.say("1")  # the first field: learning rate
    chat.say("3e-5")
    assert any(o.label == "Completion tokens per reply: 1024" for o in chat.asked().options)  # type: ignore[union-attr]
    chat.say("Completion tokens per reply")
    chat.say("8")
    assert "out of range: give a number from 16 to 32768" in chat.problem()  # type: ignore[operator]
    chat.say("4096")  # room to think before answering
    chat.say("done")
    assert chat.asking() == "iteration"
    assert chat.session.answers["hyperparameter_values"] == {
        "rollouts_per_group": 8,
        "learning_rate": 3e-5,
        "max_completion_tokens": 4096,
    }
    chat.say("dataset")
    assert chat.completed() is not None


def test_back_edit_restart_and_cancel() -> None:
    chat = single_turn_ruler_up_to_reward()
    chat.say("back")
    assert chat.asking() == "agent_prompt"
    asked = chat.asked()
    assert asked is not None and "Current answer" in asked.text
    chat.say("keep")
    assert chat.asking() == "reward"

    chat.say("edit task")
    assert chat.asking() == "task"
    chat.say("Answer arithmetic questions; reply with only the final number.")
    assert chat.asking() == "reward"  # back where the user was
    assert chat.session.answers["task"].startswith("Answer arithmetic questions; reply")
    assert chat.session.answers["scenario_rows"] == MATH_ROWS  # nothing else lost

    chat.say("edit nonsense")
    assert chat.problem() == "There is no answered question “nonsense”. Pick one here:"
    menu = chat.edit_menu()
    assert menu is not None and menu.options[2].label == "Task"  # the answered ones, by label
    assert chat.asking() is None and chat.session.answers["task"]

    chat.say("status")
    assert any("questions answered" in notice for notice in chat.notices())

    chat.say("restart")
    assert chat.asking() == "replayable" and chat.session.answers == {}

    chat.say("cancel")
    assert chat.session.status == "cancelled"
    chat.say("static")
    assert chat.session.status == "cancelled" and chat.session.answers == {}
    assert any("cancelled" in notice for notice in chat.notices())


def test_editing_after_completion_reopens_and_completes_again() -> None:
    chat = Conversation()
    chat.play(
        [
            ("static", "turns"),
            ("single", "task"),
            ("Answer arithmetic questions with the number.", "scenario_source"),
        ]
    )
    chat.play(
        [
            ("inline", "scenario_rows"),
            (ROWS_JSONL, "system_prompt"),
            ("skip", "agent_prompt"),
            ("default", "reward"),
        ]
    )
    chat.play(
        [
            ("ruler", "judge_model"),
            ("1", "ruler_rubric"),
            ("default", "train_split"),
            ("all", "val_split"),
            ("none", "base_model"),
        ]
    )
    chat.play(
        [
            ("1", "project"),
            ("default", "run_name"),
            ("r-001", "backend"),
            ("local", "hyperparameters"),
        ]
    )
    chat.play([("defaults", "iteration"), ("dataset", None)])
    assert chat.session.status == "complete"
    chat.say("hello")
    assert any("edit <question>" in n for n in chat.notices())
    chat.say("edit run name")
    assert chat.session.status == "active" and chat.asking() == "run_name"
    chat.say("r-002")
    done = chat.completed()
    assert done is not None and done.answers["run_name"] == "r-002"


def test_cancel_after_the_script_was_generated_does_not_say_nothing_was() -> None:
    chat = single_turn_ruler_up_to_reward()
    chat.play([("ruler", "judge_model"), ("1", "ruler_rubric"), ("default", "train_split")])
    chat.play([("all", "val_split")])
    chat.play([("none", "base_model"), ("1", "project"), ("default", "run_name")])
    chat.play([("r-001", "backend"), ("local", "hyperparameters"), ("defaults", "iteration")])
    chat.play([("dataset", None)])
    assert chat.session.status == "complete"

    chat.say("cancel")

    assert chat.session.status == "cancelled"
    said = " ".join(chat.notices())
    assert "Nothing was generated" not in said
    assert "The script it generated is kept" in said and "cancel it on its card" in said


def test_the_not_sure_option_explains_and_asks_again_without_storing() -> None:
    chat = Conversation()
    chat.say("Not sure")
    assert chat.asking() == "replayable"
    assert "replayable" not in chat.session.answers
    assert any("multi-turn RL" in notice for notice in chat.notices())


def test_answers_come_back_as_effects_so_an_edge_can_update_the_question() -> None:
    chat = Conversation()
    chat.click("static")
    assert Answered("replayable", "Only logged or static scenarios") in chat.last.effects
    chat.click("single")
    assert chat.asking() == "task"


def test_a_stale_button_is_refused_and_the_open_question_asked_again() -> None:
    chat = Conversation()
    chat.say("static")
    from flows import Reply, advance
    from flows.wizards.rl.train_rl import TRAIN_RL

    turn = advance(TRAIN_RL, chat.session, Reply.button("replayable", "yes"))
    assert turn.session == chat.session
    assert isinstance(turn.messages[-1], Question) and turn.messages[-1].step_id == "turns"


def test_the_task_can_be_prefilled_but_must_still_be_confirmed() -> None:
    from flows import Reply, advance, begin
    from flows.definition.session import Session
    from flows.wizards.rl.train_rl import TRAIN_RL

    session = Session.start("train-rl", prefill={"task": "Summarize legal contracts faithfully."})
    session = begin(TRAIN_RL, session).session
    session = advance(TRAIN_RL, session, Reply("static")).session
    turn = advance(TRAIN_RL, session, Reply("single"))
    asked = turn.messages[-1]
    assert isinstance(asked, Question) and asked.step_id == "task"
    assert "Summarize legal contracts faithfully." in asked.text
    turn = advance(TRAIN_RL, turn.session, Reply("yes"))
    assert turn.session.answers["task"] == "Summarize legal contracts faithfully."


def test_a_session_resumed_while_a_setting_is_asked_asks_that_setting_again() -> None:
    from flows import begin
    from flows.wizards.rl.train_rl import TRAIN_RL

    chat = single_turn_ruler_up_to_reward()
    chat.play(
        [
            ("ruler", "judge_model"),
            ("1", "ruler_rubric"),
            ("default", "train_split"),
            ("all", "val_split"),
            ("none", "base_model"),
        ]
    )
    chat.play(
        [
            ("1", "project"),
            ("default", "run_name"),
            ("r-001", "backend"),
            ("local", "hyperparameters"),
        ]
    )
    chat.play([("customize", "hyperparameter_values")])
    chat.say("learning_rate")
    resumed = begin(TRAIN_RL, chat.session)
    asked = resumed.messages[-1]
    assert isinstance(asked, Question) and "New value for Learning rate" in asked.text
    chat.session = resumed.session
    chat.say("2e-5")
    assert chat.problem() is None
    assert chat.session.draft == {"learning_rate": 2e-5}


def test_another_judge_model_is_not_mistaken_for_a_listed_one_by_prefix() -> None:
    chat = single_turn_ruler_up_to_reward()
    # `openai/gpt-5.4` is a prefix of the listed `openai/gpt-5.4-mini`, and is listed itself.
    chat.play([("ruler", "judge_model"), ("openai/gpt-5.4", "ruler_rubric")])
    assert chat.session.answers["judge_model"] == "openai/gpt-5.4"
    chat.play([("back", "judge_model"), ("openai/gpt-5.4-pro", "ruler_rubric")])
    assert chat.session.answers["judge_model"] == "openai/gpt-5.4-pro"


def test_the_reward_recommended_is_programmatic_where_the_outcome_is_explicit() -> None:
    """A game's state, or a win or loss in the user's own words, can be scored exactly by code;
    RULER stays recommended for open-ended answers."""
    reward = TRAIN_RL.step("reward")
    assert isinstance(reward, Choice) and reward.recommend is not None
    math = answers_for("single", "ruler", "dataset", "local", True)
    game = answers_for("game", "ruler", "dataset", "local", True)
    tools = answers_for("tools", "ruler", "dataset", "local", True)
    cases = [
        (math, "ruler"),
        (game, "programmatic"),
        (tools, "ruler"),
        (
            tools | {"episode_end": "When the agent wins the auction or runs out of money."},
            "programmatic",
        ),
        (
            math | {"task": "Predict who wins each chess game from its opening moves."},
            "programmatic",
        ),
    ]
    for answers, recommended in cases:
        assert reward.recommend(answers) == recommended, answers["task"]
    asked = question(TRAIN_RL, Session("train-rl", answers=game), reward)
    assert asked.options[0].label == "Programmatic (recommended)"
    assert "The outcome is explicit in your game's state" in asked.text
