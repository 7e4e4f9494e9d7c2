"""The `train-sft` wizard: its questions as data (train_sft), what its answers mean, its parsers
and wording, the dataset checked at the question, and the rules one SFT row must follow."""
