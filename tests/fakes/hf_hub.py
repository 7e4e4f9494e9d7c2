"""A Hugging Face Hub on loopback, for the runner's export tests: a real HTTP server that answers
what huggingface_hub 2.4 calls to create a repository and push a folder to it, and keeps what
was pushed.

    with FakeHub() as hub:
        api = HfApi(endpoint=hub.url, token=hub.token)
        api.create_repo("alice/agent", private=True, exist_ok=True)
        api.upload_folder(folder_path=folder, repo_id="alice/agent", commit_message="...")
        assert hub.repos["alice/agent"].files["adapter_config.json"] == b"..."

It speaks the HTTP (legacy LFS) upload path only, not Xet: huggingface_hub 2.4 chooses Xet on
the client's side, whenever hf_xet is installed (`utils.is_xet_available`), without asking the
server; `xet_disabled()` turns it off for a test (the Xet token endpoint answers 501 here, so a
test that forgets fails at once, saying so). What it answers, as the Hub does:
- `POST /api/repos/create`: 401 without a bearer token or with one it does not know, 400 for a
  name the Hub refuses, 403 for a namespace the token's user may not write (or a read token),
  409 when the repository exists (huggingface_hub's `exist_ok` turns that into success);
- `GET /api/models/{repo}[/revision/{rev}]`: the repository's id, privacy and head commit; 401
  (RepoNotFound) for a private one without its owner's token, 404 (RepoNotFound) for none;
- `POST /api/validate-yaml`: a README's YAML front matter must parse to a mapping;
- `POST /api/models/{repo}/preupload/{rev}`: `lfs` for `*.safetensors` (and the Hub's other
  binary patterns) and files over 10 MB, `regular` for the rest, with the oid of the file already
  there (the client drops unchanged files);
- `POST /{repo}.git/info/lfs/objects/batch`: `basic` transfer only, an upload and a verify
  action per object not stored yet; `PUT` of the content, whose sha256 and size must match;
- `POST /api/models/{repo}/commit/{rev}`: the NDJSON header line first, then `file` lines
  (base64) and `lfsFile` lines whose oid must have been uploaded (and a binary pattern must not
  come as a regular file); answers the commit's URL and oid.

Every request needs the write token of a user who may write the repository (the LFS content's
PUT excepted: its URL is the signature, as S3's are). `refused` says why each refused request
was refused; `hold` keeps commits waiting until a test lets them through.
"""

from __future__ import annotations

import base64
import contextlib
import fnmatch
import hashlib
import json
import re
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import yaml

WRITE_TOKEN = "hub-write-token-not-a-secret-0001"
READ_TOKEN = "hub-read-token-not-a-secret-0002"
USER = "alice"
ORGS = ("acme",)
REGULAR_LIMIT = 10 * 1024 * 1024
"""Files over 10 MB go through LFS, as the Hub says (and as its pre-commit hook enforces)."""
LFS_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.gguf", "*.h5", "*.onnx")
"""Some of the patterns the Hub's default .gitattributes tracks with LFS."""
HOLD_S = 60.0
"""The longest a held commit waits (a test that forgets to release it fails, not hangs)."""
REPO_PART = r"(?!.*(?:--|\.\.))[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?"
REPO_ID = re.compile(rf"^({REPO_PART})/({REPO_PART})$")
MODEL_API = re.compile(rf"^/api/models/({REPO_PART}/{REPO_PART})(?:/(.*))?$")
LFS_BATCH = re.compile(rf"^/({REPO_PART}/{REPO_PART})\.git/info/lfs/objects/batch$")


@dataclass(frozen=True)
class Account:
    """Who a token is: a user, the organizations they may write to, and whether it may write."""

    user: str
    orgs: tuple[str, ...] = ()
    write: bool = True

    def may_write(self, namespace: str) -> bool:
        return self.write and (namespace == self.user or namespace in self.orgs)


@dataclass(frozen=True)
class Commit:
    oid: str
    summary: str
    description: str
    paths: tuple[str, ...]


@dataclass
class HubRepo:
    """A repository as pushed: its files (path -> bytes), privacy and commits, oldest first."""

    repo_id: str
    private: bool
    owner: str
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)

    @property
    def head(self) -> str:
        return self.commits[-1].oid if self.commits else "0" * 40


class Refused(Exception):
    """A request the Hub refuses: its status, message and X-Error-Code."""

    def __init__(self, status: int, message: str, code: str | None = None, **extra: object) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.extra = extra


@dataclass
class FakeHub:
    """The Hub, started on 127.0.0.1:0 by `with`; `url` is its HF_ENDPOINT."""

    tokens: dict[str, Account] = field(
        default_factory=lambda: {
            WRITE_TOKEN: Account(USER, ORGS),
            READ_TOKEN: Account(USER, ORGS, write=False),
        }
    )
    repos: dict[str, HubRepo] = field(default_factory=dict)
    lfs: dict[str, bytes] = field(default_factory=dict)
    """LFS content by sha256 oid, once its PUT checked out."""
    requests: list[tuple[str, str]] = field(default_factory=list)
    """(method, path) of every request, in order."""
    refused: list[str] = field(default_factory=list)
    hold: threading.Event | None = None
    """When set to an event, each commit waits for it (an upload under way, without a clock)."""
    _uploads: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Upload URL's secret -> (oid, size) it must receive."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def token(self) -> str:
        return WRITE_TOKEN

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                hub._handle(self)

            def do_POST(self) -> None:
                hub._handle(self)

            def do_PUT(self) -> None:
                hub._handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    # -- dispatch --

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path.split("?")[0]
        method = handler.command
        with self._lock:
            self.requests.append((method, path))
        try:
            body = _read_body(handler)
            status, answer = self._route(handler, method, path, body)
        except Refused as refusal:
            with self._lock:
                self.refused.append(f"{method} {path}: {refusal.status} {refusal.message}")
            headers = {"X-Error-Message": refusal.message}
            if refusal.code:
                headers["X-Error-Code"] = refusal.code
            answer = {"error": refusal.message, **refusal.extra}
            return _send(handler, refusal.status, answer, headers)
        _send(handler, status, answer)

    def _route(
        self, handler: BaseHTTPRequestHandler, method: str, path: str, body: bytes
    ) -> tuple[int, Any]:
        if method == "POST" and path == "/api/repos/create":
            return self._create_repo(self._account(handler), _json(body))
        if method == "POST" and path == "/api/validate-yaml":
            self._account(handler)
            return self._validate_yaml(_json(body))
        if method == "PUT" and path.startswith("/__lfs/"):
            return self._lfs_put(path.removeprefix("/__lfs/"), body)
        if method == "POST" and path.startswith("/__lfs-verify/"):
            return self._lfs_verify(self._account(handler), _json(body))
        batch = LFS_BATCH.match(path)
        if method == "POST" and batch:
            repo = self._writable(self._account(handler), batch[1])
            return self._lfs_batch(repo, _json(body))
        model = MODEL_API.match(path)
        if model is None:
            raise Refused(404, f"Sorry, we can't find the page you are looking for: {path}")
        repo_id, rest = model[1], model[2] or ""
        if method == "GET" and (rest == "" or rest.startswith("revision/")):
            return self._repo_info(self._account(handler, optional=True), repo_id)
        if method == "GET" and rest.startswith("xet-write-token/"):
            raise Refused(
                501, "this loopback Hub does not speak Xet: set HF_HUB_DISABLE_XET (xet_disabled)"
            )
        if method == "POST" and rest.startswith("preupload/"):
            repo = self._writable(self._account(handler), repo_id)
            return self._preupload(repo, _json(body))
        if method == "POST" and rest.startswith("commit/"):
            if handler.headers.get("Content-Type", "").split(";")[0] != "application/x-ndjson":
                raise Refused(400, "a commit is sent as application/x-ndjson")
            repo = self._writable(self._account(handler), repo_id)
            if self.hold is not None:
                self.hold.wait(HOLD_S)
            return self._commit(repo, body)
        raise Refused(404, f"Sorry, we can't find the page you are looking for: {path}")

    def _account(self, handler: BaseHTTPRequestHandler, *, optional: bool = False) -> Account:
        scheme, _, token = handler.headers.get("Authorization", "").partition(" ")
        if not token:
            if optional:
                return Account("", write=False)
            raise Refused(401, "You must be authenticated to access it.")
        account = self.tokens.get(token.strip()) if scheme.lower() == "bearer" else None
        if account is None:
            raise Refused(401, "Invalid credentials in Authorization header")
        return account

    def _writable(self, account: Account, repo_id: str) -> HubRepo:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and not account.may_write(repo.owner)):
            raise Refused(404, "Repository not found", "RepoNotFound")
        if not account.may_write(repo.owner):
            raise Refused(403, f"You don't have the rights to write to {repo_id}")
        return repo

    # -- repositories --

    def _create_repo(self, account: Account, payload: dict[str, Any]) -> tuple[int, Any]:
        name, organization = payload.get("name"), payload.get("organization")
        namespace = organization if organization is not None else account.user
        if not isinstance(name, str) or not isinstance(namespace, str):
            raise Refused(400, "name and organization must be strings")
        repo_id = f"{namespace}/{name}"
        if not REPO_ID.match(repo_id) or len(name) > 96 or len(namespace) > 96:
            raise Refused(400, f"Invalid repo name: {repo_id}")
        if payload.get("type", "model") != "model":
            raise Refused(400, "this loopback Hub holds model repositories only")
        visibility = payload.get("visibility", "public")
        if visibility not in ("public", "private"):
            raise Refused(400, f"Invalid visibility: {visibility}")
        if not account.may_write(namespace):
            raise Refused(
                403,
                f'You don\'t have the rights to create a model under the namespace "{namespace}"',
            )
        with self._lock:
            if repo_id in self.repos:  # with the URL: huggingface_hub's exist_ok reads it
                raise Refused(
                    409, "You already created this model repo", url=f"{self.url}/{repo_id}"
                )
            self.repos[repo_id] = HubRepo(repo_id, visibility == "private", namespace)
        return 200, {"url": f"{self.url}/{repo_id}", "name": repo_id, "id": secrets.token_hex(12)}

    def _repo_info(self, account: Account, repo_id: str) -> tuple[int, Any]:
        repo = self.repos.get(repo_id)
        if repo is None:
            raise Refused(404, "Repository not found", "RepoNotFound")
        if repo.private and account.user != repo.owner and repo.owner not in account.orgs:
            raise Refused(401, "Repository not found", "RepoNotFound")
        siblings = [{"rfilename": path} for path in sorted(repo.files)]
        return 200, {"id": repo_id, "private": repo.private, "sha": repo.head, "siblings": siblings}

    def _validate_yaml(self, payload: dict[str, Any]) -> tuple[int, Any]:
        content = payload.get("content")
        if not isinstance(content, str):
            raise Refused(400, "content must be a string")
        front = re.match(r"^---\n(.*?)\n---\n", content, re.S)
        if front is None:
            return 200, {"errors": [], "warnings": [{"message": "empty or missing yaml metadata"}]}
        try:
            metadata = yaml.safe_load(front[1])
        except yaml.YAMLError as error:
            return 400, {"errors": [{"message": f"invalid YAML: {error}"}]}
        if not isinstance(metadata, dict):
            return 400, {"errors": [{"message": "the YAML metadata must be a mapping"}]}
        return 200, {"errors": [], "warnings": []}

    # -- uploads --

    def _preupload(self, repo: HubRepo, payload: dict[str, Any]) -> tuple[int, Any]:
        files = payload.get("files")
        if not isinstance(files, list):
            raise Refused(400, "files must be a list")
        answered = []
        for file in files:
            path, size = file.get("path"), file.get("size")
            if not isinstance(path, str) or not isinstance(size, int):
                raise Refused(400, "each file needs a path and a size")
            base64.b64decode(file.get("sample", ""), validate=True)
            mode = "lfs" if _must_be_lfs(path, size) else "regular"
            kept = repo.files.get(path)
            oid = None
            if kept is not None:
                oid = hashlib.sha256(kept).hexdigest() if mode == "lfs" else _git_oid(kept)
            answered.append({"path": path, "uploadMode": mode, "shouldIgnore": False, "oid": oid})
        return 200, {"files": answered, "commitOid": repo.head}

    def _lfs_batch(self, repo: HubRepo, payload: dict[str, Any]) -> tuple[int, Any]:
        if payload.get("operation") != "upload":
            raise Refused(400, "operation must be upload")
        if "basic" not in payload.get("transfers", ["basic"]):
            raise Refused(422, "this loopback Hub offers the basic transfer only")
        if payload.get("hash_algo", "sha256") != "sha256":
            raise Refused(422, "hash_algo must be sha256")
        objects = []
        for item in payload.get("objects", []):
            oid, size = item.get("oid"), item.get("size")
            if not (isinstance(oid, str) and re.fullmatch(r"[0-9a-f]{64}", oid)):
                raise Refused(422, f"not a sha256 oid: {oid!r}")
            if not isinstance(size, int) or size < 0:
                raise Refused(422, f"not a size: {size!r}")
            if oid in self.lfs:
                objects.append({"oid": oid, "size": size})  # there already: no actions
                continue
            secret = secrets.token_urlsafe(16)
            with self._lock:
                self._uploads[secret] = (oid, size)
            objects.append(
                {
                    "oid": oid,
                    "size": size,
                    "authenticated": True,
                    "actions": {
                        "upload": {"href": f"{self.url}/__lfs/{secret}"},
                        "verify": {"href": f"{self.url}/__lfs-verify/{repo.repo_id}"},
                    },
                }
            )
        return 200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"}

    def _lfs_put(self, secret: str, body: bytes) -> tuple[int, Any]:
        with self._lock:
            expected = self._uploads.pop(secret, None)
        if expected is None:
            raise Refused(403, "Request has expired or is not signed")
        oid, size = expected
        if len(body) != size or hashlib.sha256(body).hexdigest() != oid:
            raise Refused(400, "the content does not match the oid and size announced")
        with self._lock:
            self.lfs[oid] = body
        return 200, {}

    def _lfs_verify(self, account: Account, payload: dict[str, Any]) -> tuple[int, Any]:
        oid, size = payload.get("oid"), payload.get("size")
        stored = self.lfs.get(oid) if isinstance(oid, str) else None
        if stored is None or len(stored) != size:
            raise Refused(404, f"LFS object {oid} was never uploaded")
        return 200, {}

    def _commit(self, repo: HubRepo, body: bytes) -> tuple[int, Any]:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise Refused(400, "the first line of a commit is its header")
        header = lines[0].get("value") or {}
        summary = header.get("summary")
        if not isinstance(summary, str) or not summary:
            raise Refused(400, "a commit needs a summary")
        added: dict[str, bytes] = {}
        for line in lines[1:]:
            key, value = line.get("key"), line.get("value") or {}
            path = value.get("path")
            if not isinstance(path, str) or not path or path.startswith("/") or ".." in path:
                raise Refused(400, f"invalid path in repo: {path!r}")
            if key == "file":
                if value.get("encoding") != "base64":
                    raise Refused(400, "a file's content is base64")
                content = base64.b64decode(value.get("content", ""), validate=True)
                if _must_be_lfs(path, len(content)):
                    raise Refused(
                        400,
                        f"Your push was rejected because it contains binary files: {path} "
                        "must be stored with LFS",
                    )
                added[path] = content
            elif key == "lfsFile":
                oid = value.get("oid")
                if value.get("algo") != "sha256" or oid not in self.lfs:
                    raise Refused(
                        400,
                        f"Your push was rejected because an LFS pointer pointed to a file that "
                        f"does not exist: {path} ({oid})",
                    )
                if value.get("size") is not None and value["size"] != len(self.lfs[oid]):
                    raise Refused(400, f"{path}: the size does not match the LFS object")
                added[path] = self.lfs[oid]
            else:
                raise Refused(400, f"this loopback Hub does not take {key!r} lines")
        oid = hashlib.sha1(
            repo.head.encode() + json.dumps(sorted(added), ensure_ascii=True).encode()
        ).hexdigest()
        with self._lock:
            repo.files.update(added)
            repo.commits.append(
                Commit(oid, summary, str(header.get("description") or ""), tuple(sorted(added)))
            )
        return 200, {
            "success": True,
            "commitOid": oid,
            "commitUrl": f"{self.url}/{repo.repo_id}/commit/{oid}",
            "pullRequestUrl": None,
        }


@contextlib.contextmanager
def xet_disabled() -> Iterator[None]:
    """huggingface_hub without Xet: uploads take the HTTP (LFS) path this fake speaks."""
    from huggingface_hub import constants

    before = constants.HF_HUB_DISABLE_XET
    constants.HF_HUB_DISABLE_XET = True
    try:
        yield
    finally:
        constants.HF_HUB_DISABLE_XET = before


def _must_be_lfs(path: str, size: int) -> bool:
    name = path.rsplit("/", 1)[-1]
    return size > REGULAR_LIMIT or any(fnmatch.fnmatch(name, pattern) for pattern in LFS_PATTERNS)


def _git_oid(content: bytes) -> str:
    """A git blob's oid, as huggingface_hub computes a regular file's (`sha.git_hash`)."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(value, dict):
        raise Refused(400, "the body is not a JSON object")
    return value


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        chunks = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                handler.rfile.readline()  # the empty line after the last chunk
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


def _send(
    handler: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None
) -> None:
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)
