"""The real backends' `train` signatures, which the stand-in trainer binds its arguments to (and
LocalBackend's other methods, which the stand-ins' must match).

A script that passes an argument the real backend would refuse fails in the dry run too.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path
from typing import Any

import art.serverless.backend


def local_train_signature() -> inspect.Signature:
    """`art.local.LocalBackend.train`'s signature, read from its source."""
    return local_backend_signature("train")


def local_backend_signature(method: str) -> inspect.Signature:
    """The signature of `art.local.LocalBackend`'s async `method`, read from its source.

    Importing art/local/backend.py needs torch, which a CPU dry run does not have.
    """
    spec = importlib.util.find_spec("art")
    assert spec is not None and spec.submodule_search_locations
    source = Path(next(iter(spec.submodule_search_locations)), "local", "backend.py")
    tree = ast.parse(source.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "LocalBackend":
            for item in node.body:
                if isinstance(item, ast.AsyncFunctionDef) and item.name == method:
                    return _signature_of(item.args)
    raise LookupError(f"LocalBackend.{method} not found in {source}")


def _signature_of(args: ast.arguments) -> inspect.Signature:
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    parameters = [
        inspect.Parameter(
            arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=_literal_or_none(default)
        )
        for arg, default in zip(positional, defaults, strict=True)
    ]
    parameters += [
        inspect.Parameter(
            arg.arg, inspect.Parameter.KEYWORD_ONLY, default=_literal_or_none(default)
        )
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    return inspect.Signature(parameters)


def _literal_or_none(node: ast.expr | None) -> Any:
    if node is None:
        return inspect.Parameter.empty
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


# Taken at import, before the bootstrap swaps the stand-in into art.serverless.backend (the
# stand-in backend imports this module, and the bootstrap imports that before it swaps).
SERVERLESS_TRAIN_SIGNATURE = inspect.signature(art.serverless.backend.ServerlessBackend.train)
