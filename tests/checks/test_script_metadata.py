"""Reading a script's PEP 723 block."""

from __future__ import annotations

import pytest

from checks.script_metadata import ScriptDependencies, ScriptMetadataError, script_dependencies

SCRIPT = """\
#!/usr/bin/env python
# /// script
# requires-python = ">=3.11"
# dependencies = [
#     "openpipe-art==0.5.18",
#     "wandb==0.25.0",  # a TOML comment
# ]
# ///
print("hi")
"""


def test_the_block_is_read_as_toml() -> None:
    assert script_dependencies(SCRIPT) == ScriptDependencies(
        ">=3.11", ("openpipe-art==0.5.18", "wandb==0.25.0")
    )


def test_no_block_is_none_and_other_block_types_are_ignored() -> None:
    assert script_dependencies("print('hi')\n") is None
    assert script_dependencies("# /// pyproject\n# x = 1\n# ///\n") is None


def test_the_digest_follows_the_meaning_not_the_spelling() -> None:
    respaced = SCRIPT.replace('"wandb==0.25.0",  # a TOML comment', '"wandb==0.25.0",')
    changed = SCRIPT.replace("wandb==0.25.0", "wandb==0.24.0")
    digest = script_dependencies(SCRIPT).digest()  # type: ignore[union-attr]
    assert script_dependencies(respaced).digest() == digest  # type: ignore[union-attr]
    assert script_dependencies(changed).digest() != digest  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (SCRIPT + SCRIPT, "more than one"),
        ("# /// script\n# dependencies = [\n# ///\n", "not TOML"),
        ('# /// script\n# dependencies = "art"\n# ///\n', "list of strings"),
        ("# /// script\n# requires-python = 3\n# ///\n", "must be a string"),
    ],
)
def test_a_malformed_block_is_refused_with_the_reason(source: str, message: str) -> None:
    with pytest.raises(ScriptMetadataError, match=message):
        script_dependencies(source)
