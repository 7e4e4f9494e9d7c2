"""A trained model as it leaves the runner: a LocalBackend job's checkpoints listed with their
rewards, the one its owner chose as the model, pushed to the Hugging Face Hub or downloaded."""
