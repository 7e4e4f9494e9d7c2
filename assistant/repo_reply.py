"""A small repo dropped as a `.zip` at a question: read like `.py` files are. At the tools
question its tool modules are read into tool schemas (no model), offered to accept; anywhere
else its code goes to the recommendations for the questions ahead. What was read and what was
skipped (and why) is said first; a bad archive is refused with the reason and the session does
not move.

    if repo_zip_in(reply) is not None:
        turn, proposal = answer_repo_zip(ask, flow, session, question, reply.attachments[0])
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from assistant.drafts import TOOLS_STEP, AskModel
from assistant.proposals import Proposal, trial
from assistant.recommendations import MAX_AGENT_CODE_CHARS, recommend_from_code
from assistant.repo_zip import RepoFile, RepoZip, ZipRefused, is_zip, read_repo_zip
from assistant.tool_offer import tools_summary
from flows import (
    Attachment,
    Flow,
    InvalidAnswer,
    Notice,
    Problem,
    Question,
    Reply,
    Session,
    Turn,
    begin,
    tool_schemas_from_code,
)

TOOLS_HINT = (
    "None of them looks like your tools (a file or folder named like `tools`, tests left out): "
    "send the file that defines them as a `.py`."
)


def repo_zip_in(reply: Reply) -> Attachment | None:
    """The `.zip` a reply carries, when it is the reply's one file; None otherwise."""
    if reply.value is not None or len(reply.attachments) != 1:
        return None
    attachment = reply.attachments[0]
    return attachment if is_zip(attachment.name) else None


def answer_repo_zip(
    ask: AskModel, flow: Flow, session: Session, question: Question, attachment: Attachment
) -> tuple[Turn, Proposal | None]:
    """The turn for a repo's `.zip` dropped at `question`: tool schemas read from its tool
    modules at the tools question (a proposal), recommendations from its code elsewhere; the
    open question asked again with the reason when nothing could be read."""
    try:
        repo = read_repo_zip(attachment.name, attachment.content)
    except ZipRefused as why:
        return _refused(flow, session, str(why)), None
    if not repo.python:
        return _refused(flow, session, f"{repo.summary()} There is no Python code to read."), None
    if question.step_id == TOOLS_STEP:
        return _offer_tools(flow, session, repo)
    code, note = code_for_model(repo, MAX_AGENT_CODE_CHARS)
    turn = recommend_from_code(ask, flow, session, code)
    said = Notice(f"{repo.summary()}{note}")
    return Turn(turn.session, (said, *turn.messages), turn.effects), None


def code_for_model(repo: RepoZip, budget: int) -> tuple[str, str]:
    """The repo's files as one text, each after a `# file: PATH` line, whole files in order
    while they fit in `budget` characters; and a note naming what did not (or "")."""
    blocks = [f"# file: {f.path}\n{f.text.rstrip()}\n" for f in repo.files]
    sent: list[str] = []
    left_out: list[str] = []
    used = 0
    for file, block in zip(repo.files, blocks, strict=True):
        if used + len(block) > budget:
            left_out.append(file.path)
            continue
        sent.append(block)
        used += len(block + "\n")
    if not sent:  # one file bigger than the budget: its beginning
        first = repo.files[0].path
        note = f" Only the first {budget:,} characters of {first} went to the model."
        return blocks[0][:budget], note
    if not left_out:
        return "\n".join(sent), ""
    names = ", ".join(left_out[:8]) + (
        f" and {len(left_out) - 8} more" if len(left_out) > 8 else ""
    )
    return "\n".join(sent), f" Not sent to the model (over {budget:,} characters in all): {names}."


def tool_files(repo: RepoZip) -> list[RepoFile]:
    """The files that hold the tools: those named like `tools` (a file or a folder), tests left
    out; else the repo's only Python file."""
    named = [f for f in repo.python if _names_tools(f.path)]
    if named:
        return named
    return list(repo.python) if len(repo.python) == 1 else []


def _names_tools(path: str) -> bool:
    parts = [p.lower() for p in PurePosixPath(path).parts]
    if any(p.startswith("test") or p == "conftest.py" for p in parts):
        return False
    return any("tool" in p for p in [*parts[:-1], PurePosixPath(parts[-1]).stem])


def _offer_tools(flow: Flow, session: Session, repo: RepoZip) -> tuple[Turn, Proposal | None]:
    files = tool_files(repo)
    if not files:
        return _refused(flow, session, f"{repo.summary()} {TOOLS_HINT}"), None
    schemas: list[dict[str, Any]] = []
    problems: list[str] = []
    for file in files:
        try:
            found = tool_schemas_from_code(file.text)
        except InvalidAnswer as error:
            problems.append(f"{file.path}: {error}")
            continue
        named = {s["function"]["name"] for s in schemas}
        schemas += [s for s in found if s["function"]["name"] not in named]
    paths = ", ".join(f.path for f in files)
    if not schemas:
        why = " ".join(problems)
        return _refused(
            flow, session, f"{repo.summary()} Reading {paths} as tool code: {why}"
        ), None
    reason = f"From {paths}:\n{tools_summary(schemas)}"
    proposal = trial(flow, session, TOOLS_STEP, json.dumps(schemas), reason)
    if proposal is None:
        refused = f"{repo.summary()} The tools read from {paths} are not a valid answer here."
        return _refused(flow, session, refused), None
    return Turn(session, (Notice(repo.summary()),)), proposal


def _refused(flow: Flow, session: Session, why: str) -> Turn:
    """The open question again, after why the archive gave nothing; the session unchanged."""
    again = begin(flow, session)
    return Turn(again.session, (Problem(why), *again.messages))
