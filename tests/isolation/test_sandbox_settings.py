"""The sandbox's own setting: ARTBOT_SANDBOX_UID_BASE, the first uid of the pool sandboxes run
as. A value that is not one refuses to run code with a clear reason, never a traceback."""

from __future__ import annotations

import pytest

from isolation.sandbox import UID_POOL_BASE, Sandbox, uid_pool_base


@pytest.mark.parametrize("value", ["abc", "-5", "12", "4294967290", "1e6", ""])
def test_a_misconfigured_uid_pool_runs_nothing_and_says_what_is_wrong(value: str) -> None:
    sandbox = Sandbox.for_host(allow_unconfined=True, environ={"ARTBOT_SANDBOX_UID_BASE": value})
    assert not sandbox.may_run and not sandbox.confined  # even where unconfined code is allowed
    assert "ARTBOT_SANDBOX_UID_BASE must be a whole number from 1000" in sandbox.reason
    assert "ARTBOT_SANDBOX_UID_BASE" in sandbox.refusal


def test_the_uid_pool_base_takes_a_whole_number_or_the_default() -> None:
    assert uid_pool_base({}) == UID_POOL_BASE
    assert uid_pool_base({"ARTBOT_SANDBOX_UID_BASE": " 700000 "}) == 700_000
