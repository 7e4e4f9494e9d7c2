"""The two wizards as data, `train-rl` (rl/) and `train-sft` (sft/), with what both use: the
questions they ask in the same words, where an RL run starts, and RL after SFT."""
