"""No external calls from a dry run: every socket may reach loopback only.

Environment variables point OpenAI clients and litellm at the stand-in policy; this guard
catches whatever else a script (or a library it imports) tries to reach, and says so.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from typing import Any

LOCAL_NAMES = frozenset({"", "localhost", "localhost.localdomain", "ip6-localhost"})

_installed = False


class NetworkBlockedError(ConnectionRefusedError):
    """A connection or lookup of a non-loopback host during a dry run."""


def is_loopback(host: object) -> bool:
    """Whether `host` (a name, an address, or None) stays on this machine."""
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    name = str(host).split("%", 1)[0].strip("[]").lower()
    if name in LOCAL_NAMES or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def install_network_guard(on_block: Callable[[str], None]) -> None:
    """Refuse non-loopback `connect` and `getaddrinfo` in this process; tell `on_block`."""
    global _installed
    if _installed:
        return
    _installed = True
    original_getaddrinfo = socket.getaddrinfo
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def refuse(host: object, port: object) -> NetworkBlockedError:
        target = f"{host}:{port}"
        on_block(target)
        return NetworkBlockedError(
            f"artbot dryrun blocks network access to {target}: a dry run makes no external "
            "call (the policy and the RULER judge are served on 127.0.0.1)"
        )

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_loopback(host):
            raise refuse(host, port)
        return original_getaddrinfo(host, port, *args, **kwargs)

    def target_of(sock: socket.socket, address: Any) -> tuple[object, object] | None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return None
        if isinstance(address, tuple) and len(address) >= 2:
            return address[0], address[1]
        return None

    def connect(self: socket.socket, address: Any) -> None:
        target = target_of(self, address)
        if target is not None and not is_loopback(target[0]):
            raise refuse(*target)
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        target = target_of(self, address)
        if target is not None and not is_loopback(target[0]):
            raise refuse(*target)
        return original_connect_ex(self, address)

    socket.getaddrinfo = getaddrinfo
    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
