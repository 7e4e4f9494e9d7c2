"""Runs in place of `vllm serve` for a serving job: a real OpenAI-compatible HTTP server on
loopback, answering chat completions deterministically.

    stand_in_vllm.py BASE_MODEL --lora-modules NAME=PATH --host 127.0.0.1 --port PORT

Strict like vLLM where the runner and the bot depend on it: it refuses to start without a LoRA
folder holding `adapter_config.json` for this base model; `/v1/models` lists the base model and
the LoRA (its `parent` the base model); a chat completion for any other model is vLLM's 404
NotFoundError body; malformed bodies are 400s; answers have OpenAI's chat.completion shape. The
reply is `<model> heard: <the last user message>`. `--exit-after-start` exits at once (a server
that dies before it answers); `/health` answers as vLLM's does. Every request is appended to
`<cwd>/stand_in_vllm.requests.jsonl` for tests to read.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("--lora-modules", required=True)
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--exit-after-start", action="store_true")
args, _unknown = parser.parse_known_args()

lora_name, _, lora_path = args.lora_modules.partition("=")
adapter = Path(lora_path) / "adapter_config.json"
if not adapter.is_file():
    sys.exit(f"ValueError: no adapter_config.json in the LoRA folder {lora_path}")
if json.loads(adapter.read_text())["base_model_name_or_path"] != args.model:
    sys.exit(f"ValueError: the LoRA {lora_name} was not trained on {args.model}")
if args.exit_after_start:
    print("RuntimeError: CUDA error: no kernel image is available", file=sys.stderr)
    sys.exit(1)
if args.host not in ("127.0.0.1", "localhost"):
    sys.exit("the stand-in listens on loopback only")

REQUESTS = Path.cwd() / "stand_in_vllm.requests.jsonl"
ids = itertools.count(1)


def models() -> dict[str, Any]:
    created = int(time.time())
    return {
        "object": "list",
        "data": [
            {"id": args.model, "object": "model", "created": created, "owned_by": "vllm"},
            {
                "id": lora_name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": lora_path,
                "parent": args.model,
            },
        ],
    }


def error(message: str, kind: str, code: int) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *values: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/health":
            self._answer(200, None)
        elif self.path == "/v1/models":
            self._answer(200, models())
        else:
            self._answer(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path != "/v1/chat/completions":
            self._answer(404, {"detail": "Not Found"})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._answer(400, error("the body is not JSON", "BadRequestError", 400))
            return
        with REQUESTS.open("a") as log:
            log.write(json.dumps(body) + "\n")
        model, messages = body.get("model"), body.get("messages")
        if model not in (lora_name, args.model):
            self._answer(404, error(f"The model `{model}` does not exist.", "NotFoundError", 404))
            return
        if not isinstance(messages, list) or not all(
            isinstance(m, dict) and m.get("role") in ("system", "user", "assistant", "tool")
            for m in messages
        ):
            self._answer(400, error("messages: a list of messages", "BadRequestError", 400))
            return
        said = next((str(m.get("content")) for m in reversed(messages) if m["role"] == "user"), "")
        content = f"{model} heard: {said}"
        self._answer(
            200,
            {
                "id": f"chatcmpl-{next(ids)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "tool_calls": []},
                        "logprobs": None,
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": len(said.split()),
                    "completion_tokens": len(content.split()),
                    "total_tokens": len(said.split()) + len(content.split()),
                },
            },
        )

    def _answer(self, status: int, body: dict[str, Any] | None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
