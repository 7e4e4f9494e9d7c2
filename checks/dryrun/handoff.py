"""The contract between `dryrun_script` (parent) and the bootstrap (child): variable names.

Kept apart from the bootstrap so that importing `checks.dryrun` does not import the module
that `python -m checks.dryrun.child.bootstrap` then runs as `__main__`.
"""

RECORD_ENV = "ARTBOT_DRYRUN_RECORD"
MAX_STEPS_ENV = "ARTBOT_DRYRUN_MAX_STEPS"
SEED_ENV = "ARTBOT_DRYRUN_SEED"
INJECTED_PATH_ENV = "ARTBOT_DRYRUN_INJECTED_PATH"
# When (seconds since the epoch) the child records where it is: a timeout is coming.
STACKS_AT_ENV = "ARTBOT_DRYRUN_STACKS_AT"
# Set when the child runs in the script's own environment: what is missing there, the script
# lacks too, so the stand-ins import what the real code would.
OWN_ENVIRONMENT_ENV = "ARTBOT_DRYRUN_OWN_ENVIRONMENT"
OPENAI_KEY_PLACEHOLDER = "sk-artbot-dryrun-placeholder"
# W&B API keys are 40 characters; some code checks the length.
WANDB_KEY_PLACEHOLDER = "artbot-dryrun-placeholder".ljust(40, "0")
