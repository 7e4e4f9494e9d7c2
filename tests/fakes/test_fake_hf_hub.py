"""The loopback Hub refuses what the Hub refuses, to the real huggingface_hub client and to raw
requests alike: a missing or unknown token, a read token, a namespace of another, a repository
name the Hub does not take, LFS content that does not match its oid, a commit naming LFS content
never uploaded, weights sent as a regular file. And it speaks no Xet, saying so."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError

from tests.fakes.hf_hub import READ_TOKEN, WRITE_TOKEN, FakeHub, xet_disabled

WEIGHTS = bytes(range(256)) * 20


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as fake, xet_disabled():
        yield fake


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "adapter_config.json").write_text('{"r": 8}')
    (tmp_path / "adapter_model.safetensors").write_bytes(WEIGHTS)
    return tmp_path


def commit_lines(*lines: dict[str, object]) -> bytes:
    header = {"key": "header", "value": {"summary": "by hand", "description": ""}}
    return b"".join(json.dumps(line).encode() + b"\n" for line in (header, *lines))


def test_a_folder_is_pushed_as_huggingface_hub_pushes_it(hub: FakeHub, folder: Path) -> None:
    api = HfApi(endpoint=hub.url, token=hub.token)
    url = api.create_repo("alice/agent", private=True, exist_ok=True)
    assert api.create_repo("alice/agent", private=True, exist_ok=True) == url  # exist_ok: 409

    commit = api.upload_folder(folder_path=folder, repo_id="alice/agent", commit_message="first")

    repo = hub.repos["alice/agent"]
    assert repo.private and repo.files["adapter_model.safetensors"] == WEIGHTS
    assert repo.files["adapter_config.json"] == b'{"r": 8}'
    assert commit.oid == repo.head and repo.commits[0].summary == "first"
    assert list(hub.lfs) == [hashlib.sha256(WEIGHTS).hexdigest()]  # the weights, through LFS
    assert [method for method, path in hub.requests if path.startswith("/__lfs/")] == ["PUT"]
    with pytest.raises(HfHubHTTPError) as exists:
        api.create_repo("alice/agent")  # without exist_ok
    assert exists.value.response.status_code == 409


@pytest.mark.parametrize(
    ("token", "repo_id", "status"),
    [
        (None, "alice/agent", 401),
        ("not-a-token-the-hub-knows-0000", "alice/agent", 401),
        (READ_TOKEN, "alice/agent", 403),
        (WRITE_TOKEN, "bob/agent", 403),  # another user's namespace
    ],
    ids=["no token", "unknown token", "read token", "namespace of another"],
)
def test_a_repository_is_created_only_by_a_token_that_may_write_there(
    hub: FakeHub, token: str | None, repo_id: str, status: int
) -> None:
    namespace, name = repo_id.split("/")

    answer = httpx.post(
        f"{hub.url}/api/repos/create",
        json={"name": name, "organization": namespace, "type": "model", "visibility": "private"},
        headers={"Authorization": f"Bearer {token}"} if token else {},
    )

    assert answer.status_code == status, answer.text
    assert answer.json()["error"] and answer.headers["x-error-message"]
    assert hub.repos == {}


@pytest.mark.parametrize("name", ["bad--name", "-agent", "agent.", "a..b", "x" * 97, "sp ace"])
def test_a_repository_name_the_hub_refuses_is_refused(hub: FakeHub, name: str) -> None:
    answer = httpx.post(
        f"{hub.url}/api/repos/create",
        json={"name": name, "organization": "alice", "type": "model"},
        headers={"Authorization": f"Bearer {hub.token}"},
    )
    assert answer.status_code == 400 and "Invalid repo name" in answer.json()["error"]


def test_a_commit_of_lfs_content_never_uploaded_is_refused(hub: FakeHub) -> None:
    HfApi(endpoint=hub.url, token=hub.token).create_repo("alice/agent")
    oid = hashlib.sha256(WEIGHTS).hexdigest()
    body = commit_lines(
        {
            "key": "lfsFile",
            "value": {"path": "adapter_model.safetensors", "algo": "sha256", "oid": oid},
        }
    )

    answer = httpx.post(
        f"{hub.url}/api/models/alice/agent/commit/main",
        content=body,
        headers={"Authorization": f"Bearer {hub.token}", "Content-Type": "application/x-ndjson"},
    )

    assert answer.status_code == 400
    assert "LFS pointer pointed to a file that does not exist" in answer.json()["error"]
    assert hub.repos["alice/agent"].commits == []


def test_weights_sent_as_a_regular_file_are_refused(hub: FakeHub) -> None:
    HfApi(endpoint=hub.url, token=hub.token).create_repo("alice/agent")
    content = base64.b64encode(WEIGHTS).decode()
    body = commit_lines(
        {
            "key": "file",
            "value": {
                "path": "adapter_model.safetensors",
                "content": content,
                "encoding": "base64",
            },
        }
    )
    answer = httpx.post(
        f"{hub.url}/api/models/alice/agent/commit/main",
        content=body,
        headers={"Authorization": f"Bearer {hub.token}", "Content-Type": "application/x-ndjson"},
    )
    assert answer.status_code == 400 and "binary files" in answer.json()["error"]


def test_lfs_content_must_match_its_oid_and_size(hub: FakeHub) -> None:
    HfApi(endpoint=hub.url, token=hub.token).create_repo("alice/agent")
    oid = hashlib.sha256(WEIGHTS).hexdigest()
    batch = httpx.post(
        f"{hub.url}/alice/agent.git/info/lfs/objects/batch",
        json={
            "operation": "upload",
            "transfers": ["basic", "multipart"],
            "objects": [{"oid": oid, "size": len(WEIGHTS)}],
            "hash_algo": "sha256",
        },
        headers={"Authorization": f"Bearer {hub.token}"},
    ).json()
    assert batch["transfer"] == "basic"
    upload = batch["objects"][0]["actions"]["upload"]["href"]

    wrong = httpx.put(upload, content=WEIGHTS[:-1] + b"x")

    assert wrong.status_code == 400 and "does not match" in wrong.json()["error"]
    assert hub.lfs == {}
    assert httpx.put(upload, content=WEIGHTS).status_code == 403  # a signed URL is used once


def test_with_xet_huggingface_hub_asks_no_server_and_this_hub_says_it_speaks_none(
    folder: Path,
) -> None:
    """huggingface_hub 2.4 takes the Xet path whenever hf_xet is installed, whatever the server
    offers: so the tests turn it off (`xet_disabled`), and forgetting to fails at once."""
    with FakeHub() as hub:
        api = HfApi(endpoint=hub.url, token=hub.token)
        api.create_repo("alice/agent")
        with pytest.raises(Exception, match="501"):
            api.upload_folder(folder_path=folder, repo_id="alice/agent", commit_message="x")
    assert ("GET", "/api/models/alice/agent/xet-write-token/main") in hub.requests
    assert not any(path.endswith("/lfs/objects/batch") for _, path in hub.requests)
    assert hub.repos["alice/agent"].commits == []
