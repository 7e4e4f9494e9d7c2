"""What a run shows in its thread, never sent from here (the outbox carries it): Block Kit for
the status card, the success and failure messages and the listings; the reward curves as PNG;
sample rollouts."""
