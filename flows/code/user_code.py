"""Code the user sent on purpose, placed in a scope of its own inside the generated script.

Python has one namespace per module, so user code pasted at the script's top level would share
it with the script's own imports, constants and functions: a user's `from random import random`,
`SYSTEM_PROMPT = ...` or helper `def validate(board)` would silently replace the script's (or the
script's would replace theirs). Renaming one side cannot rule that out. Instead each piece of user
code becomes the body of a function of its own (`def user_environment(): ...`) that returns only
its entry points: the user's imports, helpers and constants are that function's locals, so no
name of theirs can reach the script's namespace, and the script binds nothing but the entry points
it calls. The body is the user's code unchanged, shifted right (lines inside a multi-line string
keep their text exactly), with two changes a function scope needs: `from __future__` imports are
dropped (the script has `from __future__ import annotations` itself) and `global NAME`, for a name
the code binds at its top level, becomes `nonlocal NAME`. The result is checked: it must compile
and its syntax tree must equal the original's, so a placement that changed meaning never ships.
"""

from __future__ import annotations

import ast
import copy
import io
import symtable
import tokenize

from flows.definition.steps import InvalidAnswer

INDENT = "    "
_STRING_OPEN = {tokenize.STRING}
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+ tokenizes f-strings
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def check_compiles(source: str, what: str) -> None:
    """Beyond parsing: `return`, `yield` or `await` outside a function fail here (the parser
    accepts them), and would change meaning inside the scope the code is placed in."""
    try:
        compile(source, f"<{what}>", "exec", dont_inherit=True)
    except SyntaxError as error:
        raise InvalidAnswer(
            f"That {what} does not compile: {error.msg} (line {error.lineno})."
        ) from None


def scoped_body(source: str, what: str, script_names: frozenset[str] = frozenset()) -> str:
    """The user's code as the body of a function (indented one level), meaning unchanged.

    `script_names` are the names the script binds at its top level: see `_mark_annotation_only`.
    """
    module = ast.parse(source)
    lines = source.split("\n")
    _rewrite_globals(source, module, lines, what)
    _mark_annotation_only(module, lines, script_names)
    _drop_main_blocks(module, lines)
    _drop_future_imports(module, lines, what)
    edited = "\n".join(lines)
    body = _indent(edited)
    _check_same_meaning(module, body, what)
    return body


def _is_main_block(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (either way round) with no `else`: a module's demo or
    command-line entry, which must not run when the training script starts."""
    if not isinstance(node, ast.If) or node.orelse:
        return False
    test = node.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and len(test.comparators) == 1
    ):
        return False
    sides = {ast.dump(test.left), ast.dump(test.comparators[0])}
    return sides == {ast.dump(ast.Name("__name__", ast.Load())), ast.dump(ast.Constant("__main__"))}


def _drop_main_blocks(module: ast.Module, lines: list[str]) -> None:
    """Remove top-level `if __name__ == "__main__":` blocks: in the script they would run at
    start-up, since the script itself runs as `__main__`."""
    for node in reversed(module.body):
        if _is_main_block(node):
            del lines[node.lineno - 1 : node.end_lineno or node.lineno]


def _drop_future_imports(module: ast.Module, lines: list[str], what: str) -> None:
    drop: list[tuple[int, int]] = []
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
            if any(
                other is not node
                and other.lineno - 1 <= end
                and start <= (other.end_lineno or 0) - 1
                for other in module.body
            ):
                raise InvalidAnswer(
                    f"In the {what}, put `from __future__ import ...` on a line of its own."
                )
            drop.append((start, end))
    for start, end in reversed(drop):
        del lines[start : end + 1]
        if 0 < start < len(lines) and not lines[start - 1].strip() and not lines[start].strip():
            del lines[start]  # the blank lines around it become one


def _top_level_bindings(source: str) -> set[str]:
    table = symtable.symtable(source, "<user code>", "exec")
    return {
        symbol.get_name()
        for symbol in table.get_symbols()
        if symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()
    }


def _rewrite_globals(source: str, module: ast.Module, lines: list[str], what: str) -> None:
    """`global NAME` inside the user's functions meant the user's own top level; in a function
    scope that is `nonlocal NAME`. The keyword is swapped in place, everything else kept."""
    bound = _top_level_bindings(source)
    for statement in module.body:
        if isinstance(statement, ast.Global):
            raise InvalidAnswer(
                f"The {what} has `global {', '.join(statement.names)}` at its top level, where it "
                "does nothing: remove it."
            )
    for node in ast.walk(module):
        if not isinstance(node, ast.Global):
            continue
        unbound = [name for name in node.names if name not in bound]
        if unbound:
            raise InvalidAnswer(
                f"The {what} declares `global {', '.join(unbound)}` but never assigns "
                f"{'it' if len(unbound) == 1 else 'them'} at its top level: add "
                f"`{unbound[0]} = ...` at the top level (e.g. `{unbound[0]} = None`), so the "
                "script can keep your code's names apart from its own."
            )
        line = lines[node.lineno - 1]
        column = len(line.encode()[: node.col_offset].decode())
        if not line.startswith("global", column):
            raise InvalidAnswer(f"The {what} has a `global` statement I cannot place: simplify it.")
        lines[node.lineno - 1] = line[:column] + "nonlocal" + line[column + len("global") :]


def _mark_annotation_only(
    module: ast.Module, lines: list[str], script_names: frozenset[str]
) -> None:
    """Keep ruff's verdict on the user's code what it was at a module's top level:

    - a constant the code never reads is fine at top level but an unused local (F841) in a
      function;
    - ruff looks up the names in deferred annotations (`from __future__ import annotations`, which
      the script has) in the module's global scope first, so a name of the user's code that the
      script also binds at its top level, and that the code uses only in annotations (`import art`
      for `trajectory: art.Trajectory`), looks unused to ruff (F401, F841) though Python and
      pyright see it used.

    Those lines, and only those, get a `# noqa` for that rule; an import never used at all is
    still reported, as it would be anywhere."""
    in_annotations, elsewhere = _name_uses(module)
    elsewhere |= {
        name for node in ast.walk(module) if isinstance(node, ast.Global) for name in node.names
    }
    for node in module.body:
        candidates: list[tuple[str, int, str]] = []
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                name = (alias.asname or alias.name).split(".")[0]
                candidates.append((name, alias.lineno, "F401"))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    candidates.append((target.id, target.lineno, "F841"))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            candidates.append((node.target.id, node.target.lineno, "F841"))
        for name, lineno, rule in candidates:
            if name in elsewhere or name.startswith("_"):
                continue  # used, or a name ruff never reports
            if name in in_annotations and name not in script_names:
                continue  # ruff sees this use
            if rule == "F401" and name not in in_annotations:
                continue  # an import never used: ruff reports it at a module's top level too
            line = lines[lineno - 1]
            if "noqa" in line or line.rstrip().endswith("\\"):
                continue
            lines[lineno - 1] = line.rstrip() + f"  # noqa: {rule}"


def _name_uses(module: ast.Module) -> tuple[set[str], set[str]]:
    """Names read inside annotations (strings included), and names read anywhere else."""
    annotations: list[ast.expr] = []
    for node in ast.walk(module):
        if isinstance(node, ast.arg) and node.annotation is not None:
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
    in_annotations: set[str] = set()
    annotation_nodes: set[int] = set()
    for annotation in annotations:
        for part in ast.walk(annotation):
            annotation_nodes.add(id(part))
            if isinstance(part, ast.Name):
                in_annotations.add(part.id)
            elif isinstance(part, ast.Constant) and isinstance(part.value, str):
                try:
                    quoted = ast.parse(part.value, mode="eval")
                except SyntaxError:
                    continue
                in_annotations.update(n.id for n in ast.walk(quoted) if isinstance(n, ast.Name))
    elsewhere = {
        node.id
        for node in ast.walk(module)
        if isinstance(node, ast.Name)
        and isinstance(node.ctx, ast.Load)
        and id(node) not in annotation_nodes
    }
    return in_annotations, elsewhere


def _string_continuation_lines(source: str) -> set[int]:
    """1-based numbers of lines that begin inside a string token (their text is the string's)."""
    inside: set[int] = set()
    depth = 0
    start_row = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if _FSTRING_START is not None and token.type == _FSTRING_START:
            if depth == 0:
                start_row = token.start[0]
            depth += 1
        elif _FSTRING_END is not None and token.type == _FSTRING_END:
            depth -= 1
            if depth == 0:
                inside.update(range(start_row + 1, token.end[0] + 1))
        elif token.type in _STRING_OPEN and depth == 0:
            inside.update(range(token.start[0] + 1, token.end[0] + 1))
    return inside


def _indent(source: str) -> str:
    """Each line one level right, except the lines that continue a string; blank lines between
    statements come one at a time, as in a function body (a module's two become one)."""
    keep = _string_continuation_lines(source)
    shifted: list[str] = []
    for number, line in enumerate(source.split("\n"), 1):
        if number in keep:
            shifted.append(line)
        elif line.strip():
            shifted.append(INDENT + line)
        elif shifted and shifted[-1]:
            shifted.append("")
    return "\n".join(shifted).strip("\n") + "\n"


def _expected_body(module: ast.Module) -> list[ast.stmt]:
    """The original statements as they must read in the function: no `__future__` imports, no
    `if __name__ == "__main__":` block, and `global` declarations as `nonlocal`."""
    module = copy.deepcopy(module)
    for node in ast.walk(module):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                setattr(
                    node,
                    field,
                    [
                        ast.Nonlocal(names=item.names) if isinstance(item, ast.Global) else item
                        for item in value
                    ],
                )
    return [
        node
        for node in module.body
        if not (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        and not _is_main_block(node)
    ]


def _check_same_meaning(module: ast.Module, body: str, what: str) -> None:
    wrapped = "def user_code():\n" + body
    try:
        compile(wrapped, f"<{what}>", "exec", dont_inherit=True)
    except SyntaxError as error:
        raise InvalidAnswer(
            f"The {what} cannot run inside a function of its own, which is how the script keeps "
            f"its names apart from yours: {error.msg} (line {error.lineno}, counting a first line "
            "the script adds). A star import (`from x import *`) is the usual cause: import the "
            "names you use."
        ) from None
    placed = ast.parse(wrapped).body[0]
    assert isinstance(placed, ast.FunctionDef)
    expected = ast.Module(body=_expected_body(module), type_ignores=[])
    if ast.dump(ast.Module(body=placed.body, type_ignores=[])) != ast.dump(expected):
        raise InvalidAnswer(
            f"The {what} reads differently once placed in the script (a line continued inside a "
            "string or with a backslash, perhaps): simplify that line."
        )
