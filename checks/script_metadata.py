"""A script's PEP 723 inline metadata (`# /// script` ... `# ///`): what it runs on."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass

# The reference regular expression of PEP 723 (packaging.python.org, inline script metadata).
BLOCK = re.compile(r"(?m)^# /// (?P<type>[a-zA-Z0-9-]+)$\s(?P<content>(^#(| .*)$\s)+)^# ///$")


class ScriptMetadataError(ValueError):
    """The script's `# /// script` block is malformed (the message says how)."""


@dataclass(frozen=True)
class ScriptDependencies:
    """What a script's `# /// script` block asks for."""

    requires_python: str | None
    dependencies: tuple[str, ...]

    def requirements_text(self) -> str:
        """The dependencies as a requirements file, one a line."""
        return "".join(f"{requirement}\n" for requirement in self.dependencies)

    def digest(self) -> str:
        """A stable hash of the block's meaning (for caching what is built from it)."""
        payload = json.dumps([self.requires_python, list(self.dependencies)])
        return hashlib.sha256(payload.encode()).hexdigest()


def script_dependencies(source: str) -> ScriptDependencies | None:
    """The `# /// script` block of `source`, or None when it has none (PEP 723 rules)."""
    blocks = [m for m in BLOCK.finditer(source) if m.group("type") == "script"]
    if not blocks:
        return None
    if len(blocks) > 1:
        raise ScriptMetadataError("more than one `# /// script` block")
    content = "".join(
        line[2:] if line.startswith("# ") else line[1:]
        for line in blocks[0].group("content").splitlines(keepends=True)
    )
    try:
        table = tomllib.loads(content)
    except tomllib.TOMLDecodeError as error:
        raise ScriptMetadataError(f"the `# /// script` block is not TOML: {error}") from error
    dependencies = table.get("dependencies", [])
    requires_python = table.get("requires-python")
    if not isinstance(dependencies, list) or not all(isinstance(d, str) for d in dependencies):
        raise ScriptMetadataError("`dependencies` must be a list of strings")
    if requires_python is not None and not isinstance(requires_python, str):
        raise ScriptMetadataError("`requires-python` must be a string")
    return ScriptDependencies(requires_python, tuple(dependencies))
