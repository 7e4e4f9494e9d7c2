"""Slack tokens encrypted at rest: the keys, the cipher, and the column type that uses it.

The keys are Fernet keys (cryptography's `MultiFernet`): the first encrypts, every one decrypts,
so a key is rotated by putting a new one first and re-encrypting (`artbot db rotate-token-key`).
They come from ARTBOT_TOKEN_KEYS (comma-separated), else from the key file in the data dir
(`<data dir>/token-keys`, one key a line), which `artbot serve` generates (mode 0600) the first
time it serves OAuth installs with no key configured. A key is never logged or printed.

A stored token is a Fernet token (it begins with FERNET_PREFIX); a Slack token never does (they
begin with `xox`), which is how a migration tells the plaintext rows of an older artbot apart.
"""

from __future__ import annotations

import binascii
import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import Connection, Dialect, String, Table, TypeDecorator, select, update

from config.from_environment import SettingsError, load_from_environment
from storage.database import data_dir

TOKEN_KEYS_VARIABLE = "ARTBOT_TOKEN_KEYS"
KEY_FILE_NAME = "token-keys"
FERNET_PREFIX = "gAAAAA"
"""How every Fernet token begins (version byte 0x80, then a timestamp's high zero bytes)."""
TOKEN_COLUMNS = ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token")
"""The columns of slack_sdk's installation tables that hold a secret (where a table has them)."""
TOKEN_COLUMN_LENGTH = 1000
"""Room for an encrypted token: a Fernet token of a 200-character Slack token is 356."""
KEY_FILE_HEADER = (
    "# artbot's keys for the Slack tokens in its database: one Fernet key a line; the first\n"
    "# encrypts, every one decrypts. Without them the stored tokens cannot be read: back this\n"
    "# file up, or set ARTBOT_TOKEN_KEYS instead (docs/slack.md: Tokens at rest).\n"
)


class TokenKeyError(Exception):
    """The token keys cannot be used (missing, malformed, readable by others, or not the keys
    that encrypted the stored tokens); the message says what to do, never a key."""


class TokenUnreadable(TokenKeyError):
    """A stored token that none of the keys decrypts."""


def parse_token_keys(text: str, separator: str = ",") -> list[bytes]:
    """The Fernet keys in `text`, in order; ValueError says which one is malformed (by place)."""
    parts = [part.strip() for part in text.split(separator)]
    keys = [part for part in parts if part and not part.startswith("#")]
    if not keys:
        raise ValueError("holds no key")
    for place, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except (ValueError, binascii.Error):
            raise ValueError(
                f"key {place} is not a Fernet key (32 url-safe base64-encoded bytes; make one "
                'with `python -c "from cryptography.fernet import Fernet; '
                'print(Fernet.generate_key().decode())"`)'
            ) from None
    return [key.encode("ascii") for key in keys]


class TokenKeySettings(BaseSettings):
    """The token keys from the environment (`artbot serve`'s settings include them)."""

    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    artbot_token_keys: SecretStr | None = Field(
        default=None,
        description="comma-separated Fernet keys for the Slack tokens at rest; the first encrypts",
    )

    @field_validator("artbot_token_keys")
    @classmethod
    def _keys_shape(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        parse_token_keys(value.get_secret_value())
        return value


class TokenCipher:
    """Encrypts tokens with the first key, decrypts them with any."""

    def __init__(self, keys: Sequence[bytes], source: str, *, generated: bool = False) -> None:
        if not keys:
            raise TokenKeyError(f"{source} holds no key")
        self._fernet = MultiFernet([Fernet(key) for key in keys])
        self.key_count = len(keys)
        self.source = source
        """Where the keys came from: ARTBOT_TOKEN_KEYS or the key file's path."""
        self.generated = generated
        """The key file was made just now."""

    def __repr__(self) -> str:
        return f"TokenCipher({self.key_count} key(s) from {self.source})"

    def encrypt(self, token: str) -> str:
        return self._fernet.encrypt(token.encode("utf-8")).decode("ascii")

    def decrypt(self, stored: str) -> str:
        """The token; TokenUnreadable when no key decrypts it (or it was never encrypted)."""
        try:
            return self._fernet.decrypt(stored.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            raise TokenUnreadable(
                f"a stored Slack token cannot be decrypted with the keys from {self.source}"
            ) from None

    def rotate(self, stored: str) -> str:
        """`stored` encrypted again with the first key (a plaintext token: encrypted)."""
        if not looks_encrypted(stored):
            return self.encrypt(stored)
        return self.encrypt(self.decrypt(stored))


def looks_encrypted(value: str) -> bool:
    """A Fernet token, as the cipher stores them; False for a plaintext Slack token."""
    return value.startswith(FERNET_PREFIX)


class EncryptedToken(TypeDecorator[str]):
    """A token column, encrypted by `cipher` on the way in and decrypted on the way out."""

    impl = String(TOKEN_COLUMN_LENGTH)
    cache_ok = True

    def __init__(self, cipher: TokenCipher) -> None:
        super().__init__()
        self.cipher = cipher

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else self.cipher.encrypt(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else self.cipher.decrypt(value)


# ---- where the keys come from ---------------------------------------------------------------


def key_file(data: Path | None = None) -> Path:
    """The key file: `<data dir>/token-keys`."""
    return (data or data_dir()) / KEY_FILE_NAME


def token_cipher(
    configured: SecretStr | None, path: Path | None = None, *, generate: bool = False
) -> TokenCipher | None:
    """The cipher of ARTBOT_TOKEN_KEYS (`configured`), else of the key file at `path` (default:
    in the data dir); with neither, a new key file when `generate`, else None.
    TokenKeyError when the key file is malformed or others may read it."""
    if configured is not None and configured.get_secret_value().strip():
        try:
            keys = parse_token_keys(configured.get_secret_value())
        except ValueError as error:
            raise TokenKeyError(f"{TOKEN_KEYS_VARIABLE}: {error}") from None
        return TokenCipher(keys, TOKEN_KEYS_VARIABLE)
    path = path or key_file()
    if path.exists():
        return _read_key_file(path)
    if not generate:
        return None
    _write_key_file(path)
    cipher = _read_key_file(path)  # another process may have written it first: theirs counts
    cipher.generated = True
    return cipher


def token_cipher_from_environment(
    env: Mapping[str, str] | None = None, path: Path | None = None
) -> TokenCipher | None:
    """The cipher of ARTBOT_TOKEN_KEYS in `env` (default: the process's) or of an existing key
    file; None when neither is there. Never makes a key: `artbot db` and the migrations use it."""
    try:
        settings = load_from_environment(TokenKeySettings, env, prefix="", program="artbot")
    except SettingsError as error:  # it names the variable, never the value
        raise TokenKeyError(str(error)) from None
    return token_cipher(settings.artbot_token_keys, path)


def _read_key_file(path: Path) -> TokenCipher:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenKeyError(
            f"{path} may be read by others (mode {stat.S_IMODE(mode):o}): `chmod 600 {path}`"
        )
    try:
        keys = parse_token_keys(path.read_text(encoding="ascii"), separator="\n")
    except (ValueError, UnicodeError) as error:
        raise TokenKeyError(f"{path}: {error}") from None
    return TokenCipher(keys, str(path))


def _write_key_file(path: Path) -> None:
    """A new key in a new file at `path`, 0600, written whole: a file written aside is linked
    into place, so two processes starting at once end up with one key (the first's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, aside = tempfile.mkstemp(dir=path.parent, prefix=f".{KEY_FILE_NAME}-")  # 0600
    try:
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(KEY_FILE_HEADER + Fernet.generate_key().decode("ascii") + "\n")
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(aside, path)
    finally:
        os.unlink(aside)


# ---- the stored tokens ----------------------------------------------------------------------


@dataclass(frozen=True)
class StoredToken:
    """One token cell of an installation table, as stored (encrypted or not)."""

    table: str
    row_id: int
    column: str
    value: str


def stored_tokens(connection: Connection, tables: Sequence[Table]) -> Iterator[StoredToken]:
    """Every token cell that holds a value in `tables` (slack_sdk's installation tables)."""
    for table in tables:
        columns = [table.c[name] for name in TOKEN_COLUMNS if name in table.c]
        for row in connection.execute(select(table.c.id, *columns)).all():
            for column, value in zip(columns, row[1:], strict=True):
                if value is not None:
                    yield StoredToken(table.name, int(row[0]), column.name, str(value))


def rewrite_tokens(
    connection: Connection,
    tables: Sequence[Table],
    cipher: TokenCipher,
    *,
    only_plaintext: bool = False,
) -> int:
    """Every token in `tables` encrypted again with the cipher's first key (`only_plaintext`:
    only those not yet encrypted); the number of cells rewritten. TokenUnreadable when one
    cannot be decrypted: nothing is written then (the caller's transaction rolls back)."""
    by_name = {table.name: table for table in tables}
    rewritten = 0
    for token in list(stored_tokens(connection, tables)):
        if only_plaintext and looks_encrypted(token.value):
            continue
        table = by_name[token.table]
        connection.execute(
            update(table)
            .where(table.c.id == token.row_id)
            .values({token.column: cipher.rotate(token.value)})
        )
        rewritten += 1
    return rewritten
