"""What the preflight's two sides share: the child's variables, the forwarder's routes, and
HTTP over the Unix socket that joins them.

The sandbox has a network namespace of its own (nothing but its own loopback), so the script
cannot reach the endpoint, nor the parent's loopback. The parent's forwarder listens on a Unix
socket in a folder bound into the sandbox; only it holds the key and knows the endpoint.
"""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

SOCKET_ENV = "ARTBOT_PREFLIGHT_SOCKET"
GROUPS_ENV = "ARTBOT_PREFLIGHT_GROUPS"
COMPLETIONS_PATH = "/v1/chat/completions"
GROUPS_PATH = "/artbot/groups"
SPEND_CAP_CODE = "artbot_spend_cap"
# The fields the relay adds to each choice it returns, read back from the gathered trajectories.
USAGE_FIELD = "artbot_completion_tokens"
FINISHED_FIELD = "artbot_finished_at"
REQUESTED_FIELD = "artbot_requested_at"


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 to a server on a Unix socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._socket_path)
        self.sock = sock


def post_json(path: str, route: str, payload: Any, timeout: float) -> tuple[int, Any]:
    """POST `payload` to the forwarder at socket `path`; its status and decoded JSON body."""
    connection = UnixHTTPConnection(path, timeout)
    try:
        connection.request("POST", route, json.dumps(payload), {"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
    finally:
        connection.close()
    try:
        return response.status, json.loads(body or b"null")
    except ValueError:
        return response.status, {"error": {"message": body.decode(errors="replace")[:500]}}
