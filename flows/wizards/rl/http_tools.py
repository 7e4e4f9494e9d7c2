"""Tools served over HTTP: a method and a URL per tool, whose `{name}` path parameters come from
the call's arguments or the episode's scenario, and an optional header that authenticates every
call with a key read from an environment variable where training runs (never the key itself)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from flows.conversation.validators import http_url, load_json
from flows.definition.steps import Answers, InvalidAnswer
from flows.wizards.rl.agent_prompt import known_fields

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
DEFAULT_METHOD = "POST"
# Methods whose arguments go in the query string; the others send them as a JSON body.
QUERY_METHODS = frozenset({"GET", "DELETE"})
PATH_PARAMETER = re.compile(r"\{([^{}]*)\}")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
HEADER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,63}")
VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]{0,63})\}|([A-Za-z_][A-Za-z0-9_]{0,63}))")
# Headers a tool call may not set: the HTTP client owns them.
RESERVED_HEADERS = frozenset({"host", "content-length", "content-type", "transfer-encoding"})


def endpoint(value: str) -> tuple[str, str]:
    """`GET https://...` or a bare URL (POST): the method and the URL."""
    method, _, rest = value.strip().partition(" ")
    if method.upper() in METHODS and rest.strip():
        return method.upper(), http_url(rest)
    return DEFAULT_METHOD, http_url(value)


def path_parameters(url: str) -> list[str]:
    """The `{name}` placeholders of a URL's path, each a Python identifier."""
    names = PATH_PARAMETER.findall(url)
    for name in names:
        if not IDENTIFIER.fullmatch(name):
            raise InvalidAnswer(
                f"“{{{name[:40]}}}” in “{url[:80]}” is not a path parameter: write `{{name}}` "
                "with the name of one of the tool's parameters or of a scenario field."
            )
    if "{" in PATH_PARAMETER.sub("", url) or "}" in PATH_PARAMETER.sub("", url):
        raise InvalidAnswer(f"“{url[:80]}” has an unmatched brace.")
    return names


def tool_endpoints(value: str, answers: Answers) -> dict[str, str]:
    """One endpoint per tool (but the final-answer tool, never called over HTTP): a JSON object,
    or `name: [METHOD] url` lines. Stored as `METHOD url`."""
    final = answers.get("final_answer_tool")
    tools = {
        t["function"]["name"]: t for t in answers.get("tools", []) if t["function"]["name"] != final
    }
    stripped = value.strip()
    if stripped.startswith("{"):
        loaded = load_json(stripped, "JSON")
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            raise InvalidAnswer("Expected a JSON object mapping each tool name to its URL.")
        pairs = {str(name): str(url) for name, url in loaded.items()}
    else:
        pairs = {}
        for line in stripped.splitlines():
            if not line.strip():
                continue
            name, sep, url = line.partition(":")
            if not sep or not url.strip():
                raise InvalidAnswer(f"“{line[:60]}” is not `tool_name: [METHOD] https://...`.")
            pairs[name.strip()] = url.strip()
    unknown = sorted(set(pairs) - set(tools))
    if unknown:
        raise InvalidAnswer(
            f"There is no tool named {', '.join(unknown)[:200]}; the tools are {', '.join(tools)}."
        )
    missing = [n for n in tools if n not in pairs]
    if missing:
        raise InvalidAnswer(f"Give a URL for every tool; missing: {', '.join(missing)}.")
    fields = known_fields(answers)
    endpoints: dict[str, str] = {}
    for name, text in pairs.items():
        method, url = endpoint(text)
        properties = tools[name]["function"].get("parameters", {}).get("properties", {})
        for parameter in path_parameters(url):
            if parameter not in properties and fields is not None and parameter not in fields:
                raise InvalidAnswer(
                    f"`{{{parameter}}}` in {name}'s URL is neither a parameter of the tool nor a "
                    f"field of your scenarios: the tool's parameters are "
                    f"{', '.join(properties) or 'none'}."
                )
        endpoints[name] = f"{method} {url}"
    return endpoints


def split_endpoints(stored: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The script's TOOL_URLS and TOOL_METHODS from a stored answer (a bare URL is a POST, as
    answers stored before methods existed are)."""
    urls: dict[str, str] = {}
    methods: dict[str, str] = {}
    for name, text in stored.items():
        method, _, rest = text.partition(" ")
        if method in METHODS and rest:
            methods[name], urls[name] = method, rest
        else:  # checked when answered: only its method is read here
            methods[name], urls[name] = DEFAULT_METHOD, text
    return urls, methods


def tool_auth(value: str, answers: Answers) -> dict[str, str]:
    """`Header: text $VARIABLE text`: the header every tool call carries, its value with the
    environment variable's value in place of `$VARIABLE` where training runs. The stored answer
    (a JSON object: an answers file, an export) reads back as itself."""
    if value.strip().startswith("{"):
        return _stored_auth(load_json(value.strip(), "JSON"))
    name, sep, template = value.strip().partition(":")
    name = name.strip()
    if not sep or not HEADER_NAME.fullmatch(name):
        raise InvalidAnswer(
            "Write the header as `Name: value`, with `$VARIABLE` where the key goes, e.g. "
            "`Authorization: Bearer $SUPPORT_API_KEY`."
        )
    if name.lower() in RESERVED_HEADERS:
        raise InvalidAnswer(f"`{name}` is set by the HTTP client; choose another header.")
    template = template.strip()
    found = list(VARIABLE.finditer(template))
    if len(found) != 1:
        raise InvalidAnswer(
            "Put exactly one environment variable in the value, as `$NAME` (e.g. "
            "`Bearer $SUPPORT_API_KEY`): the script reads the key from it where training runs, so "
            "the key itself is never typed here."
        )
    match = found[0]
    variable = match.group(1) or match.group(2)
    prefix, suffix = template[: match.start()], template[match.end() :]
    if any(ch in prefix + suffix for ch in "\r\n\x00") or len(prefix + suffix) > 200:
        raise InvalidAnswer("The header's value must be one short line.")
    return {"header": name, "prefix": prefix, "variable": variable, "suffix": suffix}


def _stored_auth(loaded: Any) -> dict[str, str]:
    if loaded == {}:
        return {}
    keys = {"header", "prefix", "variable", "suffix"}
    if not isinstance(loaded, dict) or set(loaded) != keys:
        raise InvalidAnswer(f"Expected an object with {', '.join(sorted(keys))}, or {{}}.")
    if not all(isinstance(loaded[key], str) for key in keys):
        raise InvalidAnswer("Each of the header's parts must be text.")
    typed = f"{loaded['header']}: {loaded['prefix']}${{{loaded['variable']}}}{loaded['suffix']}"
    parsed = tool_auth(typed, {})
    if parsed != loaded:
        raise InvalidAnswer("That header does not read back as itself: type it as `Name: value`.")
    return parsed


def tool_auth_display(value: Any) -> str:
    if isinstance(value, Mapping) and value.get("header"):
        return f"`{value['header']}: {value['prefix']}${value['variable']}{value['suffix']}`"
    return "no header"
