"""Third-party imports in user code, and the PEP 508 requirements that provide them.

What the user names here becomes part of the script's PEP 723 block, so a requirement is read
strictly: a distribution name, optional extras and optional version specifiers; no URL, path,
marker or pip option. It is printed as a TOML string literal (flows.script.literals.toml_string).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Iterable
from functools import lru_cache

from flows.definition.steps import InvalidAnswer

# Installed with the script's own dependencies (its PEP 723 block, ART's and the OpenAI client's
# requirements): importing these needs nothing extra.
PROVIDED = frozenset(
    {
        # the script's own
        "art",
        "openai",
        "polars",
        "numpy",
        "pyarrow",
        "dotenv",
        # openpipe-art's
        "litellm",
        "nest_asyncio",
        "setproctitle",
        "tblib",
        "typer",
        "weave",
        # openai's
        "httpx",
        "pydantic",
        "anyio",
        "distro",
        "jiter",
        "sniffio",
        "tqdm",
        "typing_extensions",
    }
)

# Imported into the script's process by ART's LocalBackend (openpipe-art's `backend` extra) and
# the libraries under it: a file of one of these names beside the script is imported instead.
TRAINING_STACK = frozenset(
    {
        "accelerate",
        "bitsandbytes",
        "datasets",
        "huggingface_hub",
        "peft",
        "safetensors",
        "tokenizers",
        "torch",
        "torchao",
        "transformers",
        "triton",
        "trl",
        "unsloth",
        "unsloth_zoo",
        "vllm",
        "wandb",
    }
)

# Import names whose distribution on PyPI is called something else.
PYPI_NAMES = {
    "attr": "attrs",
    "bs4": "beautifulsoup4",
    "Crypto": "pycryptodome",
    "cv2": "opencv-python",
    "dateutil": "python-dateutil",
    "docx": "python-docx",
    "fitz": "pymupdf",
    "git": "gitpython",
    "jwt": "pyjwt",
    "magic": "python-magic",
    "OpenSSL": "pyopenssl",
    "PIL": "pillow",
    "pptx": "python-pptx",
    "serial": "pyserial",
    "skimage": "scikit-image",
    "sklearn": "scikit-learn",
    "yaml": "pyyaml",
    "zmq": "pyzmq",
}

MAX_REQUIREMENTS = 20
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?"
_VERSION = r"[0-9]+(?:\.[0-9]+){0,5}(?:\.\*|(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
_SPECIFIER = rf"(?:===?|!=|<=|>=|~=|<|>)\s*{_VERSION}"
REQUIREMENT = re.compile(
    rf"^(?P<name>{_NAME})\s*(?:\[\s*(?P<extras>{_NAME}(?:\s*,\s*{_NAME})*)\s*\])?"
    rf"\s*(?P<specifiers>{_SPECIFIER}(?:\s*,\s*{_SPECIFIER})*)?$"
)


def imported_modules(sources: Iterable[str]) -> set[str]:
    """Top-level names of every module the code imports (absolute imports, at any depth)."""
    return set().union(*(_imports(source) for source in sources))


@lru_cache(maxsize=64)
def _imports(source: str) -> frozenset[str]:
    modules: set[str] = set()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return frozenset(modules)


def third_party(modules: Iterable[str]) -> list[str]:
    """The modules that neither the standard library nor the script's dependencies provide."""
    return sorted(
        m
        for m in set(modules)
        if m not in sys.stdlib_module_names and m not in PROVIDED and m != "__future__"
    )


def shadowed_module(name: str, user_imports: Iterable[str] = ()) -> str | None:
    """What a file `<name>.py` beside the script would stand in for, in words: Python puts the
    script's folder first on the import path, so the script (or ART, or a library) would import
    that file instead of the module. None when `name` is no module the script's process loads:
    the standard library's, ART's, the script's dependencies', the training stack's, or one the
    user's code imports (`user_imports`)."""
    if name in sys.stdlib_module_names:
        return "a module of Python's standard library"
    if name == "art":
        return "ART itself"
    if name in PROVIDED or name in TRAINING_STACK:
        return "a module the script's dependencies provide"
    if name in set(user_imports):
        return "a module your code imports"
    return None


def suggested_requirements(modules: Iterable[str]) -> list[str]:
    """A guess at the distributions: the import name, or its known PyPI name."""
    return sorted({PYPI_NAMES.get(m, m.replace("_", "-")).lower() for m in modules})


def requirement(text: str) -> str:
    """One requirement, checked strictly and written without spaces (`pyyaml>=6,<7`)."""
    cleaned = text.strip().strip("`").strip()
    match = REQUIREMENT.match(cleaned) if len(cleaned) <= 200 else None
    if match is None:
        raise InvalidAnswer(
            f"“{cleaned[:80]}” is not a package requirement I accept: give a PyPI name with "
            "optional extras and versions, e.g. `pyyaml`, `pyyaml>=6,<7` or `requests[socks]`; "
            "no URLs, paths or pip options."
        )
    name = match["name"]
    extras = match["extras"]
    specifiers = match["specifiers"]
    return (
        name
        + (f"[{','.join(e.strip() for e in extras.split(','))}]" if extras else "")
        + (re.sub(r"\s+", "", specifiers) if specifiers else "")
    )


def requirements(text: str) -> list[str]:
    """Requirements one per line (or several on a line, separated by spaces), or a JSON list."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            loaded = json.loads(stripped)
        except json.JSONDecodeError:
            raise InvalidAnswer("That is not a valid JSON list of requirements.") from None
        if not isinstance(loaded, list) or not all(isinstance(item, str) for item in loaded):
            raise InvalidAnswer("Expected a JSON list of requirement strings.")
        items: list[str] = loaded
    else:
        items = []
        for line in stripped.splitlines():
            line = line.strip().removeprefix("- ").strip()
            if not line:
                continue
            items.extend([line] if REQUIREMENT.match(line.strip("`")) else line.split())
    if not items:
        raise InvalidAnswer("Name at least one package, e.g. `pyyaml`.")
    if len(items) > MAX_REQUIREMENTS:
        raise InvalidAnswer(f"That is {len(items)} packages; the limit is {MAX_REQUIREMENTS}.")
    parsed = [requirement(item) for item in items]
    return list(dict.fromkeys(parsed))
