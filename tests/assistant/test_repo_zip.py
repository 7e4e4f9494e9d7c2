"""A repo dropped as a `.zip` is read in memory as hostile input: Python files and requirements
read, everything suspicious skipped with its reason, a bad archive refused as a whole."""

from __future__ import annotations

import io
import stat
import warnings
import zipfile

import pytest

from assistant.repo_zip import RepoZip, ZipLimits, ZipRefused, read_repo_zip


def zipped(
    *members: tuple[str | zipfile.ZipInfo, bytes], method: int = zipfile.ZIP_DEFLATED
) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, content in members:
            archive.writestr(name, content)
    return buffer.getvalue()


def marked_encrypted(content: bytes, name: str) -> bytes:
    """`content` with `name`'s "encrypted" flag set in its local and central headers (zipfile
    writes no encrypted members)."""
    patched = bytearray(content)
    for signature, flag_at, name_at in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        start = 0
        while (start := patched.find(signature, start)) >= 0:
            if patched[start + name_at : start + name_at + len(name)] == name.encode():
                patched[start + flag_at] |= 0x1
            start += 4
    return bytes(patched)


def skipped(repo: RepoZip) -> dict[str, str]:
    return {s.path: s.why for s in repo.skipped}


def test_python_files_and_requirements_are_read_and_the_rest_left_out() -> None:
    content = zipped(
        ("agent/rollout.py", b"from agent.tools import search\n"),
        ("agent/tools.py", b"def search(q: str) -> str:\n    return q\n"),
        ("agent/requirements.txt", b"openpipe-art==0.5.18\n"),
        ("agent/README.md", b"# my agent\n"),
        ("agent/__pycache__/tools.cpython-311.pyc", b"\x00\x01"),
        ("__MACOSX/agent/._tools.py", b"\x00\x05\x16\x07"),
        ("agent/", b""),
    )

    repo = read_repo_zip("agent.zip", content)

    assert [f.path for f in repo.python] == ["agent/rollout.py", "agent/tools.py"]
    assert repo.python[1].text == "def search(q: str) -> str:\n    return q\n"
    assert [f.path for f in repo.requirements] == ["agent/requirements.txt"]
    assert repo.skipped == ()
    assert repo.others == 3
    assert repo.summary() == (
        "Read 2 Python files from agent.zip and agent/requirements.txt "
        "(agent/rollout.py, agent/tools.py). 3 other files (not your Python code) left out."
    )


def test_a_zip_bomb_member_is_skipped_unread() -> None:
    content = zipped(("bomb.py", b"#" * 5_000_000), ("ok.py", b"x = 1\n"))

    repo = read_repo_zip("agent.zip", content)

    assert [f.path for f in repo.python] == ["ok.py"]
    assert "a zip bomb?" in skipped(repo)["bomb.py"]
    assert "skipped 1: bomb.py (compressed " in repo.summary()


def test_a_header_that_lies_about_the_size_is_caught_while_reading() -> None:
    content = bytearray(zipped(("agent.py", b"x = 1\n" * 100), method=zipfile.ZIP_STORED))
    # The stored bytes changed under the same header: the CRC no longer matches.
    at = content.index(b"x = 1\n")
    content[at] = ord("y")

    repo = read_repo_zip("agent.zip", bytes(content))

    assert repo.python == ()
    assert skipped(repo) == {"agent.py": "damaged (its data does not match its header)"}


@pytest.mark.parametrize(
    "name", ["../../etc/evil.py", "/abs/evil.py", "C:/evil.py", "a/../../b.py"]
)
def test_a_path_outside_the_archive_is_ignored(name: str) -> None:
    repo = read_repo_zip("agent.zip", zipped((name, b"x = 1\n"), ("good.py", b"y = 2\n")))

    assert [f.path for f in repo.python] == ["good.py"]
    assert skipped(repo) == {name: "a path outside the archive: ignored"}


def test_symlinks_nested_archives_and_encrypted_members_are_skipped() -> None:
    link = zipfile.ZipInfo("passwd.py")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    content = zipped(
        (link, b"/etc/passwd"),
        ("vendor/inner.zip", zipped(("x.py", b"x = 1\n"))),
        ("secret.py", b"x = 1\n"),
        ("agent.py", b"x = 1\n"),
    )
    content = marked_encrypted(content, "secret.py")

    repo = read_repo_zip("agent.zip", content)

    assert [f.path for f in repo.python] == ["agent.py"]
    assert skipped(repo) == {
        "passwd.py": "a symbolic link: ignored",
        "vendor/inner.zip": "an archive inside the archive: not opened",
        "secret.py": "encrypted: refused",
    }


def test_non_utf8_files_and_duplicates_are_skipped_and_keys_removed() -> None:
    token = b'SLACK = "xoxb-' + b"1234567890-abcdefghij" + b'"\n'
    with warnings.catch_warnings():  # zipfile warns of the duplicate name it writes
        warnings.simplefilter("ignore")
        content = zipped(
            ("latin.py", "caf\xe9 = 1\n".encode("latin-1")),
            ("config.py", token),
            ("agent.py", b"x = 1\n"),
            ("agent.py", b"x = 2\n"),
        )

    repo = read_repo_zip("agent.zip", content)

    assert [(f.path, f.text) for f in repo.python] == [
        ("agent.py", "x = 1\n"),
        ("config.py", 'SLACK = "[redacted]"\n'),
    ]
    assert skipped(repo) == {
        "latin.py": "not UTF-8 text",
        "agent.py": "a second entry with the same name",
    }
    assert repo.summary().endswith(
        "What looks like a key or token was removed (never sent) from config.py."
    )
    assert "xoxb" not in repo.summary()


def test_per_member_and_total_sizes_are_limited() -> None:
    limits = ZipLimits(member_bytes=100, total_bytes=150)
    content = zipped(
        ("big.py", b"# " + bytes(range(65, 91)) * 10),  # 262 bytes that barely compress
        ("a.py", b"a = 1  # " + b"x" * 80 + b"\n"),
        ("b.py", b"b = 1  # " + b"y" * 80 + b"\n"),
    )

    repo = read_repo_zip("agent.zip", content, limits)

    assert [f.path for f in repo.python] == ["a.py"]
    assert skipped(repo) == {
        "big.py": "262 bytes; the limit is 100 per file",
        "b.py": "over the limit of 150 bytes read from one zip",
    }


def test_too_many_entries_a_big_archive_and_a_damaged_one_are_refused_whole() -> None:
    many = zipped(*((f"m{i}.py", b"x = 1\n") for i in range(301)))
    with pytest.raises(ZipRefused, match=r"agent\.zip has 301 entries; the limit is 300"):
        read_repo_zip("agent.zip", many)
    with pytest.raises(ZipRefused, match=r"a \.zip may be 10 at most"):
        read_repo_zip("agent.zip", zipped(("a.py", b"x = 1\n")), ZipLimits(zip_bytes=10))
    with pytest.raises(ZipRefused, match="not a zip file I can read"):
        read_repo_zip("agent.zip", b"PK\x03\x04 this is not really a zip")
    truncated = zipped(("a.py", b"x = 1\n" * 50))[:-30]
    with pytest.raises(ZipRefused, match="not a zip file I can read"):
        read_repo_zip("agent.zip", truncated)


def test_the_summary_lists_a_few_names_then_counts() -> None:
    content = zipped(*((f"../m{i}.py", b"x = 1\n") for i in range(10)), ("ok.py", b"x = 1\n"))

    summary = read_repo_zip("agent.zip", content).summary()

    assert summary.startswith("Read 1 Python file from agent.zip (ok.py); skipped 10: ../m0.py (")
    assert summary.endswith("; 2 more.")
