"""Dies as a run does when the GPU is full."""

import sys

print("INFO 11-22 09:00:00 [gpu_worker.py:100] Loading model weights", flush=True)
print(
    """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/unsloth/models/llama.py", line 900, in forward
    hidden = self.mlp(hidden)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. """
    "GPU 0 has a total capacity of 79.10 GiB of which 1.12 GiB is free.",
    file=sys.stderr,
)
sys.exit(1)
