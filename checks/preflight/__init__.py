"""`artbot preflight SCRIPT`: the script's own rollouts and reward against a real model, before
GPU time (issue 29). Built on the dry run: same sandbox, bootstrap and stand-in trainer."""
