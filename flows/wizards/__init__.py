"""The two wizards as data, `train-rl` and `train-sft`, with the parts only they use: the shared
questions, what the agent is shown, HTTP tools, RULER's judges, the simulated user, the SFT data
and its rows, and RL after SFT."""
