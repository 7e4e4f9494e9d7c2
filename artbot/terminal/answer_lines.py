"""Which lines of input make one answer, when data or code comes without ``` fences.

Typed at a terminal, a paste arrives as lines already waiting behind the first (io.py asks the
terminal); those are the answer's, and an empty line sends it. Piped, every line is waiting, so
the text itself decides, at the questions that take data or code: an answer goes on while its
brackets are open or a block header (`def f():`) has no body yet, and, after that, while the next
lines read as more of the same (another JSONL row; an indented line, or a `def`, `class`, import,
decorator, comment or assignment after any blank lines). At a text question, only the tools' URL
lines (`name: [METHOD] https://...`) go on, one after another. Anything else is the next reply.
"""

from __future__ import annotations

import io
import re
import tokenize

DATA_KIND = "json"
CODE_KIND = "code"
TEXT_KIND = "text"

MORE_CODE = re.compile(
    r"""
    \s+\S                               # an indented line: a body goes on
    | (?:async\s+)?def\s | class\s      # the next definition
    | import\s | from\s+[\w.]+\s+import\s
    | @\w | \#                          # a decorator, a comment
    | [A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\s*:[^=]+)?   # a module-level assignment (constants,
      \s*(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=)       # tables), augmented (`LINES += ...`) too
    """,
    re.VERBOSE,
)
# At a text question, `name: [METHOD] https://...` lines (the tools' URLs) go on like JSONL rows.
ENDPOINT_LINE = re.compile(
    r"\s*[A-Za-z_]\w*\s*:\s*(?:(?:GET|POST|PUT|PATCH|DELETE)\s+)?https?://\S+\s*",
    re.IGNORECASE,
)


def unfinished(kind: str | None, lines: list[str]) -> bool:
    """Whether `lines` cannot be the whole answer yet: open brackets in data, or code whose
    brackets, string or block header are still open."""
    if kind == DATA_KIND:
        return _json_depth("\n".join(lines)) > 0
    if kind == CODE_KIND:
        return _code_unfinished(lines)
    return False


def may_continue(kind: str | None, lines: list[str]) -> bool:
    """Whether lines after `lines` might belong to it, so the next ones are worth reading ahead:
    data, code, or the tools' URL lines (never an ordinary text: a program that pipes one answer
    and waits for the next question must not be kept waiting for another line)."""
    if kind in (DATA_KIND, CODE_KIND):
        return True
    return kind == TEXT_KIND and ENDPOINT_LINE.fullmatch(lines[0]) is not None


def continues(kind: str | None, lines: list[str], following: list[str]) -> int:
    """How many of the `following` lines (the next ones of input, blank ones included) belong to
    the answer `lines` has begun: 0 when the next reply starts there. `following` ends with the
    first line that is not blank, or at the end of input."""
    if not following or not following[-1].strip():
        return 0  # only blank lines before the end of input: the answer is complete
    first, upcoming = lines[0].lstrip(), following[-1]
    if kind == DATA_KIND and first.startswith("{"):
        # JSONL: one object per line, no blank lines between rows.
        return 1 if len(following) == 1 and upcoming.lstrip().startswith("{") else 0
    if kind == TEXT_KIND and ENDPOINT_LINE.fullmatch(first):
        return 1 if len(following) == 1 and ENDPOINT_LINE.fullmatch(upcoming) else 0
    if kind == CODE_KIND and MORE_CODE.match(upcoming):
        return len(following)
    return 0


def _json_depth(text: str) -> int:
    """Brackets opened and not closed, outside strings (a string left open counts as closed:
    JSON strings never span lines, so the reader says what is wrong instead of waiting)."""
    depth = 0
    in_string = escaped = False
    for character in text:
        if in_string:
            if escaped:
                escaped = False
            elif character == "\\":
                escaped = True
            elif character in '"\n':
                in_string = False
        elif character == '"':
            in_string = True
        elif character in "[{":
            depth += 1
        elif character in "]}":
            depth -= 1
    return depth


def _code_unfinished(lines: list[str]) -> bool:
    code = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not code:
        return False
    if code[-1].rstrip().endswith((":", "\\")):
        return True  # a block header without its body, or a continued line
    try:
        for _ in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            pass
    except tokenize.TokenError:
        return True  # an open bracket or triple-quoted string
    except SyntaxError:
        return False  # broken, not unfinished: the wizard says what is wrong
    return False
