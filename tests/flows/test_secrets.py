"""Keys and tokens are recognised in replies and files; code that only names a key is not one."""

from __future__ import annotations

import pytest

from flows.conversation.secrets import REDACTED, looks_like_secret, redact_secrets

ART_E_CLIENT = """\
async def rollout(model: art.Model, scenario: Scenario) -> art.Trajectory:
    client = AsyncOpenAI(
        base_url=model.inference_base_url,
        api_key=model.inference_api_key,
    )
    token = settings.SLACK_BOT_TOKEN
    secret = load_secret_from_vault("judge")
"""


@pytest.mark.parametrize(
    "text",
    [
        "OPENAI_API_KEY=abcdefghijklmnop0123456789",
        'api_key = "Zq9vX2LmR7tP4wK8sN3bY6cH"',
        "TOKEN=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fw",
        "password: hunter2hunter2hunter2",
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789",
    ],
)
def test_keys_are_recognised_and_redacted(text: str) -> None:
    assert looks_like_secret(text) is not None
    assert REDACTED in redact_secrets(text)


def test_code_that_names_a_key_is_not_a_key() -> None:
    # ART's own examples pass the model's key by name: a user's agent file must not be refused.
    assert looks_like_secret(ART_E_CLIENT) is None
    assert redact_secrets(ART_E_CLIENT) == ART_E_CLIENT


@pytest.mark.parametrize(
    "reference",
    ['api_key=os.environ["OPENAI_API_KEY"]', 'token = os.getenv("SLACK_BOT_TOKEN")'],
)
def test_reading_a_key_from_the_environment_is_not_a_key(reference: str) -> None:
    assert looks_like_secret(reference) is None
