"""The README.md that goes with an exported adapter: the Hub's model card, whose YAML front matter
names the base model (`base_model`, so that the Hub links the two) and the library (`peft`), and
whose text says how to load the adapter with PEFT and serve it with vLLM."""

from __future__ import annotations

import json
import re

# A Hub model id (`org/name` or `name`): what may go into the card's code unquoted. model.json
# is the job's, so anything else is left out of the code.
MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
SERVED_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def model_card(*, repo_id: str, base_model: str | None, model: str, step: int, job_id: str) -> str:
    """The card of checkpoint `step` of `model` (job `job_id`), pushed to `repo_id`."""
    base = base_model if base_model and MODEL_ID.fullmatch(base_model) else None
    front = ["---"]
    if base:
        front.append(f"base_model: {json.dumps(base)}")
    front += ["library_name: peft", "tags:", "- lora", "- art", "- artbot", "---"]
    name = SERVED_NAME.sub("-", model).strip("-.") or "agent"
    base_shown = base or "<the base model>"
    title = repo_id.split("/", 1)[1]
    about = (
        f"A LoRA adapter of [`{base}`](https://huggingface.co/{base})" if base else "A LoRA adapter"
    )
    return "\n".join(
        [
            *front,
            "",
            f"# {title}",
            "",
            f"{about}, trained with reinforcement learning by "
            "[ART](https://github.com/OpenPipe/ART) (OpenPipe's Agent Reinforcement Trainer) "
            f"and pushed by artbot: checkpoint step {step} of the model `{name}` "
            f"(runner job `{job_id}`).",
            "",
            "## Load it with PEFT",
            "",
            "```python",
            "from peft import PeftModel",
            "from transformers import AutoModelForCausalLM, AutoTokenizer",
            "",
            f'base = AutoModelForCausalLM.from_pretrained("{base_shown}")',
            f'tokenizer = AutoTokenizer.from_pretrained("{base_shown}")',
            f'model = PeftModel.from_pretrained(base, "{repo_id}")',
            "```",
            "",
            "## Serve it with vLLM",
            "",
            "```console",
            f"$ vllm serve {base_shown} --enable-lora --max-lora-rank 64 \\",
            f"    --lora-modules {name}={repo_id}",
            "```",
            "",
            f"Then ask for the model `{name}` on vLLM's OpenAI-compatible API "
            "(`/v1/chat/completions`).",
            "",
        ]
    )
