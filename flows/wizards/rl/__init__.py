"""The `train-rl` wizard: its questions as data (train_rl), its branches, its wording and its
parsers, and the parts only RL asks about: what the agent is shown, HTTP tools, RULER's judges
and the simulated user."""
