"""Runs in place of any generated script on the runner: a fine-tuning script goes to the stand-in
SFT trainer (stand_in_sft.py), an RL one to the stand-in RL trainer (stand_in_training.py).

An RL script that continues a fine-tuning run (its SFT_MODEL and SFT_PROJECT constants) first
does what its fork does on LocalBackend: it needs the SFT model's checkpoints under its art path
(ART's `_experimental_fork_checkpoint` copies the latest), and stops as the script would without
them. So a continued run passes only when the runner started it in the SFT job's folder.
"""

import argparse
import ast
import runpy
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
parser = argparse.ArgumentParser()
parser.add_argument("script")
parser.add_argument("--art-path", default=".art")
args, _ = parser.parse_known_args()
source = Path(args.script).read_text()

if "train_sft_from_file(" in source or "model.train_sft(" in source:
    runpy.run_path(str(here / "stand_in_sft.py"), run_name="__main__")
    sys.exit(0)

constants = {
    node.targets[0].id: ast.literal_eval(node.value)
    for node in ast.parse(source).body
    if isinstance(node, ast.Assign)
    and len(node.targets) == 1
    and isinstance(node.targets[0], ast.Name)
    and node.targets[0].id in ("SFT_MODEL", "SFT_PROJECT")
}
if "_experimental_fork_checkpoint(" in source:
    assert set(constants) == {"SFT_MODEL", "SFT_PROJECT"}, "a fork without its SFT model's name"
    model, project = constants["SFT_MODEL"], constants["SFT_PROJECT"]
    checkpoints = Path(args.art_path) / project / "models" / model / "checkpoints"
    found = sorted(p.name for p in checkpoints.glob("[0-9]*") if p.is_dir())
    if not found:
        print(f"No checkpoints found for model {model} in project {project}", file=sys.stderr)
        sys.exit(1)
    print(f"Forked {model} of {project} at checkpoint {found[-1]}.", flush=True)
runpy.run_path(str(here / "stand_in_training.py"), run_name="__main__")
