"""The fake Slack behaves like Slack for slack_sdk's WebClient and for Bolt."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from slack_bolt import Ack, App, Respond, Say
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web import SlackResponse

from tests.fakes import slack_requests as sr
from tests.fakes.slack_api import LOGIN_PAGE, FakeSlack
from tests.fakes.workspace import (
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    CHANNEL_ID,
    SIGNING_SECRET,
    TEAM_ID,
    USER_ID,
)


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def client(fake: FakeSlack) -> WebClient:
    return WebClient(token=fake.bot_token, base_url=fake.base_url)


def get(url: str, token: str | None = None) -> tuple[int, str, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(
        urllib.request.Request(url, headers=headers), timeout=5
    ) as response:
        return response.status, response.headers.get_content_type(), response.read()


def data(response: SlackResponse) -> dict[str, Any]:
    """The JSON answer, typed (SlackResponse's `[]` is typed as possibly None)."""
    assert isinstance(response.data, dict)
    return response.data


def post_parent(client: WebClient, text: str = "Let's set up RL training.") -> str:
    return str(client.chat_postMessage(channel=CHANNEL_ID, text=text)["ts"])


# --- Web API through slack_sdk ----------------------------------------------------------------


def test_auth_test_reports_the_fake_workspace(fake: FakeSlack, client: WebClient) -> None:
    answer = client.auth_test()
    assert (answer["team_id"], answer["user_id"], answer["bot_id"]) == (
        TEAM_ID,
        BOT_USER_ID,
        BOT_ID,
    )
    [call] = fake.calls("auth.test")
    assert call.token == BOT_TOKEN
    assert call.header("authorization") == f"Bearer {BOT_TOKEN}"


def test_a_thread_reads_back_what_was_posted_and_updated(
    fake: FakeSlack, client: WebClient
) -> None:
    parent = post_parent(client)
    reply = data(
        client.chat_postMessage(channel=CHANNEL_ID, thread_ts=parent, text="Single or multi?")
    )
    assert reply["message"]["thread_ts"] == parent
    assert reply["message"]["user"] == BOT_USER_ID
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*Multi-turn* chosen"}}]
    client.chat_update(channel=CHANNEL_ID, ts=reply["ts"], text="Multi-turn chosen", blocks=blocks)
    client.chat_postMessage(channel=CHANNEL_ID, text="unrelated")

    thread = fake.thread(CHANNEL_ID, parent)
    assert [m.text for m in thread] == ["Let's set up RL training.", "Multi-turn chosen"]
    assert thread[1].blocks == blocks
    assert (thread[0].edits, thread[1].edits) == (0, 1)
    assert thread[1].is_reply and not thread[0].is_reply
    assert len(fake.messages(CHANNEL_ID)) == 3
    # slack_sdk sends chat.* as JSON bodies, so blocks arrive as a list
    [update] = fake.calls("chat.update")
    assert update.header("content-type") == "application/json;charset=utf-8"
    assert update.params["blocks"] == blocks == update.json("blocks")


def test_form_bodies_work_too_and_json_strings_are_kept_as_sent(
    fake: FakeSlack, client: WebClient
) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "form"}}]
    parent = post_parent(client)
    client.api_call(
        "chat.postMessage",
        params={"channel": CHANNEL_ID, "thread_ts": parent, "blocks": json.dumps(blocks)},
    )
    [_, form] = fake.calls("chat.postMessage")
    assert form.header("content-type") == "application/x-www-form-urlencoded"
    assert isinstance(form.params["blocks"], str)
    assert form.json("blocks") == blocks == fake.thread(CHANNEL_ID, parent)[1].blocks


def test_updating_an_unknown_message_fails_like_slack(client: WebClient) -> None:
    with pytest.raises(SlackApiError) as raised:
        client.chat_update(channel=CHANNEL_ID, ts="1700000000.000100", text="nope")
    assert raised.value.response["error"] == "message_not_found"


def test_ephemeral_messages_are_kept_apart_and_cannot_be_updated(
    fake: FakeSlack, client: WebClient
) -> None:
    parent = post_parent(client)
    ephemeral = client.chat_postEphemeral(
        channel=CHANNEL_ID, user=USER_ID, text="only you", thread_ts=parent
    )
    ts = data(ephemeral)["message_ts"]
    assert [m.ephemeral_to for m in fake.ephemerals(CHANNEL_ID)] == [USER_ID]
    assert [m.ts for m in fake.thread(CHANNEL_ID, parent)] == [parent]
    with pytest.raises(SlackApiError, match="message_not_found"):
        client.chat_update(channel=CHANNEL_ID, ts=ts, text="edited")


def test_permalinks_point_into_the_thread(client: WebClient) -> None:
    parent = post_parent(client)
    reply = data(client.chat_postMessage(channel=CHANNEL_ID, thread_ts=parent, text="r"))["ts"]
    link = data(client.chat_getPermalink(channel=CHANNEL_ID, message_ts=reply))["permalink"]
    assert link.endswith(f"/p{reply.replace('.', '')}?thread_ts={parent}&cid={CHANNEL_ID}")


def test_a_thread_reads_back_with_its_metadata_only_when_asked(client: WebClient) -> None:
    parent = str(data(client.chat_postMessage(channel=CHANNEL_ID, text="parent"))["ts"])
    tagged = {"event_type": "artbot_outbox", "event_payload": {"id": 7}}
    for n in range(3):
        client.chat_postMessage(
            channel=CHANNEL_ID, thread_ts=parent, text=f"reply {n}", metadata=tagged
        )
    plain = data(client.conversations_replies(channel=CHANNEL_ID, ts=parent))
    assert [m["text"] for m in plain["messages"]] == ["parent", "reply 0", "reply 1", "reply 2"]
    assert all("metadata" not in m for m in plain["messages"])

    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        page = data(
            client.conversations_replies(
                channel=CHANNEL_ID, ts=parent, include_all_metadata=True, limit=2, cursor=cursor
            )
        )
        pages.append(page["messages"])
        cursor = page["response_metadata"]["next_cursor"] or None
        if cursor is None:
            break
    assert [len(p) for p in pages] == [2, 2]
    assert [m.get("metadata") for p in pages for m in p][1:] == [tagged] * 3
    with pytest.raises(SlackApiError) as unknown:
        client.conversations_replies(channel=CHANNEL_ID, ts="1.000001")
    assert unknown.value.response["error"] == "thread_not_found"
    with pytest.raises(SlackApiError) as bad:
        client.chat_postMessage(channel=CHANNEL_ID, text="x", metadata={"event_type": "t"})
    assert bad.value.response["error"] == "invalid_metadata_schema"


def test_held_calls_wait_undone_until_released(fake: FakeSlack, client: WebClient) -> None:
    fake.hold("chat.postMessage")
    posting = threading.Thread(
        target=client.chat_postMessage, kwargs={"channel": CHANNEL_ID, "text": "held"}
    )
    posting.start()
    fake.wait_for(lambda f: f.holding("chat.postMessage") == 1)
    assert fake.messages(CHANNEL_ID) == [] and fake.calls("chat.postMessage") == []
    fake.release("chat.postMessage")
    posting.join(timeout=10)
    assert [m.text for m in fake.messages(CHANNEL_ID)] == ["held"]
    assert fake.holding("chat.postMessage") == 0


def test_block_kit_limits_are_enforced(client: WebClient) -> None:
    too_many = [{"type": "divider"}] * 51
    with pytest.raises(SlackApiError) as raised:
        client.chat_postMessage(channel=CHANNEL_ID, text="t", blocks=too_many)
    assert raised.value.response["error"] == "invalid_blocks"
    button = {
        "type": "button",
        "action_id": "pick",
        "text": {"type": "plain_text", "text": "x" * 76},
        "value": "v",
    }
    with pytest.raises(SlackApiError, match="invalid_blocks"):
        client.chat_postMessage(
            channel=CHANNEL_ID, text="t", blocks=[{"type": "actions", "elements": [button]}]
        )
    with pytest.raises(SlackApiError, match="no_text"), pytest.warns(UserWarning, match="`text`"):
        client.chat_postMessage(channel=CHANNEL_ID)


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        ([], "missing required field: options"),
        (
            [{"text": {"type": "plain_text", "text": f"{i}"}, "value": f"{i}"} for i in range(101)],
            "no more than 100 items allowed",
        ),
        ([{"text": {"type": "plain_text", "text": "a"}, "value": "v" * 151}], "/options/0/value"),
        ([{"text": {"type": "mrkdwn", "text": "a"}, "value": "v"}], "must be a plain_text object"),
        ([{"text": {"type": "plain_text", "text": "a" * 76}, "value": "v"}], "/options/0/text"),
    ],
)
def test_a_select_is_checked_as_block_kit_documents_it(
    client: WebClient, options: list[dict[str, Any]], complaint: str
) -> None:
    select = {"type": "static_select", "action_id": "pick", "options": options}
    with pytest.raises(SlackApiError) as refused:
        client.chat_postMessage(
            channel=CHANNEL_ID, text="t", blocks=[{"type": "actions", "elements": [select]}]
        )
    assert refused.value.response["error"] == "invalid_blocks"
    assert complaint in json.dumps(refused.value.response["response_metadata"])


def test_malformed_bodies_are_answered_not_dropped(fake: FakeSlack) -> None:
    request = urllib.request.Request(
        f"{fake.base_url}chat.postMessage",
        data=b"{not json",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {BOT_TOKEN}"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert json.loads(response.read()) == {"ok": False, "error": "invalid_json"}
    client = WebClient(token=fake.bot_token, base_url=fake.base_url)
    with pytest.raises(SlackApiError, match="invalid_blocks_format"):
        client.api_call("chat.postMessage", params={"channel": CHANNEL_ID, "blocks": "[oops"})


def test_home_tab_views_are_kept_per_user(fake: FakeSlack, client: WebClient) -> None:
    view = {
        "type": "home",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}],
    }
    client.views_publish(user_id=USER_ID, view=view)
    published = fake.home_view(USER_ID)
    assert published is not None and published["blocks"] == view["blocks"]
    with pytest.raises(SlackApiError, match="invalid_arguments"):
        client.views_publish(
            user_id=USER_ID, view={"type": "home", "blocks": [{"type": "divider"}] * 101}
        )


def test_files_upload_v2_lands_in_the_thread(fake: FakeSlack, client: WebClient) -> None:
    parent = post_parent(client)
    answer = client.files_upload_v2(
        channel=CHANNEL_ID,
        thread_ts=parent,
        content="print('hello')\n",
        filename="x.py",
        initial_comment="Your script",
    )
    assert [c.method for c in fake.calls()][1:] == [
        "files.getUploadURLExternal",
        "upload",
        "files.completeUploadExternal",
    ]
    file = data(answer)["file"]
    assert (file["name"], file["title"], file["filetype"]) == ("x.py", "x.py", "python")
    assert file["shares"] == {}  # sharing is asynchronous on Slack: no message ts to thread on

    [uploaded] = fake.uploaded_files()
    assert uploaded.content == b"print('hello')\n"
    assert (uploaded.name, uploaded.channel, uploaded.thread_ts) == ("x.py", CHANNEL_ID, parent)
    assert uploaded.initial_comment == "Your script"

    shared = fake.thread(CHANNEL_ID, parent)[-1]
    assert (shared.text, shared.subtype, shared.files[0]["id"]) == (
        "Your script",
        "file_share",
        file["id"],
    )
    info = data(client.files_info(file=file["id"]))["file"]
    assert info["shares"]["public"][CHANNEL_ID][0]["thread_ts"] == parent
    assert get(file["url_private"], BOT_TOKEN)[2] == b"print('hello')\n"


def test_the_upload_url_also_takes_multipart(fake: FakeSlack, client: WebClient) -> None:
    target = data(client.files_getUploadURLExternal(filename="data.csv", length=4))
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="data.csv"\r\n'
        f"Content-Type: text/csv\r\n\r\na,b\n\r\n--{boundary}--\r\n"
    ).encode()
    request = urllib.request.Request(
        target["upload_url"],
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.read() == b"OK - 4"
    client.files_completeUploadExternal(files=[{"id": target["file_id"]}], channel_id=CHANNEL_ID)
    [uploaded] = fake.uploaded_files()
    assert (uploaded.content, uploaded.thread_ts) == (b"a,b\n", None)


def test_completing_an_upload_that_never_happened_fails(client: WebClient) -> None:
    target = data(client.files_getUploadURLExternal(filename="x.py", length=3))
    with pytest.raises(SlackApiError, match="file_not_found"):
        client.files_completeUploadExternal(
            files=[{"id": target["file_id"]}], channel_id=CHANNEL_ID
        )


def test_user_files_download_only_with_the_bot_token(fake: FakeSlack, client: WebClient) -> None:
    file = fake.add_user_file("tools.json", b'[{"type": "function"}]')
    assert (file["filetype"], file["size"], file["mimetype"]) == ("json", 22, "application/json")

    assert get(file["url_private"], BOT_TOKEN) == (
        200,
        "application/json",
        b'[{"type": "function"}]',
    )
    assert get(file["url_private_download"], BOT_TOKEN)[2] == b'[{"type": "function"}]'
    # Slack answers a missing or wrong token with its login page, status 200, not an error
    for token in (None, "xoxb-wrong"):
        status, content_type, body = get(file["url_private"], token)
        assert (status, content_type, body) == (200, "text/html", LOGIN_PAGE)
    assert data(client.files_info(file=file["id"]))["file"]["name"] == "tools.json"


def test_rate_limits_are_retried_by_the_rate_limit_handler(fake: FakeSlack) -> None:
    # slack_sdk sleeps int(Retry-After) + random() seconds: 0 keeps this under a second
    fake.rate_limit("chat.postMessage", times=1, retry_after=0)
    patient = WebClient(
        token=fake.bot_token,
        base_url=fake.base_url,
        retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=1)],
    )
    assert patient.chat_postMessage(channel=CHANNEL_ID, text="hi")["ok"]
    assert [c.status for c in fake.calls("chat.postMessage")] == [429, 200]
    assert len(fake.messages(CHANNEL_ID)) == 1


def test_rate_limits_fail_without_the_handler(fake: FakeSlack, client: WebClient) -> None:
    fake.rate_limit("chat.postMessage", times=1, retry_after=7)
    with pytest.raises(SlackApiError) as raised:
        client.chat_postMessage(channel=CHANNEL_ID, text="hi")
    response = raised.value.response
    assert (response.status_code, response["error"], response.headers["Retry-After"]) == (
        429,
        "ratelimited",
        "7",
    )
    assert client.chat_postMessage(channel=CHANNEL_ID, text="hi")["ok"]  # only once


def test_failures_and_delays_are_injected_per_method(fake: FakeSlack, client: WebClient) -> None:
    fake.fail("chat.update", "internal_error", times=2)
    fake.delay("chat.postMessage", 0.2)
    started = time.monotonic()
    ts = post_parent(client)
    assert time.monotonic() - started >= 0.2
    for _ in range(2):
        with pytest.raises(SlackApiError, match="internal_error"):
            client.chat_update(channel=CHANNEL_ID, ts=ts, text="x")
    assert client.chat_update(channel=CHANNEL_ID, ts=ts, text="x")["ok"]
    assert [c.ok for c in fake.calls("chat.update")] == [False, False, True]


def test_tokens_are_checked_like_slack(fake: FakeSlack) -> None:
    with pytest.raises(SlackApiError) as raised:
        WebClient(token="xoxb-wrong", base_url=fake.base_url).auth_test()
    assert raised.value.response["error"] == "invalid_auth"
    with pytest.raises(SlackApiError, match="not_authed"):
        WebClient(base_url=fake.base_url).chat_postMessage(channel=CHANNEL_ID, text="x")


def test_unknown_methods_are_refused(fake: FakeSlack, client: WebClient) -> None:
    with pytest.raises(SlackApiError) as raised:
        client.api_call("files.upload", data={"channels": CHANNEL_ID, "content": "x"})
    assert (raised.value.response.status_code, raised.value.response["error"]) == (
        404,
        "unknown_method",
    )
    assert fake.calls()[-1].method == "files.upload"


def test_concurrent_posts_get_unique_timestamps(fake: FakeSlack, client: WebClient) -> None:
    def post_ten() -> None:
        for i in range(10):
            client.chat_postMessage(channel=CHANNEL_ID, text=str(i))

    threads = [threading.Thread(target=post_ten) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stamps = [m.ts for m in fake.messages(CHANNEL_ID)]
    assert len(stamps) == len(set(stamps)) == 80
    assert len(fake.calls("chat.postMessage")) == 80


def test_wait_for_wakes_on_the_call_and_times_out_otherwise(
    fake: FakeSlack, client: WebClient
) -> None:
    timer = threading.Timer(0.05, lambda: client.chat_postMessage(channel=CHANNEL_ID, text="late"))
    timer.start()
    fake.wait_for(lambda s: len(s.messages(CHANNEL_ID)) == 1, timeout=5)
    timer.join()
    with pytest.raises(TimeoutError, match=r"chat\.postMessage:200"):
        fake.wait_for(lambda s: len(s.messages(CHANNEL_ID)) == 2, timeout=0.1)
    fake.reset()
    assert fake.calls() == [] and fake.messages(CHANNEL_ID) == []


# --- Signed requests -------------------------------------------------------------------------

BUILDERS: dict[str, Callable[..., sr.SignedRequest]] = {
    "slash_command": lambda **kw: sr.slash_command("/train-rl", "math", **kw),
    "event_callback": lambda **kw: sr.event_callback(sr.message_event("hi"), **kw),
    "block_actions": lambda **kw: sr.block_actions("pick", "multi", message_ts="1.000001", **kw),
    "app_home_opened": lambda **kw: sr.app_home_opened(USER_ID, **kw),
    "url_verification": lambda **kw: sr.url_verification(**kw),
}


@pytest.mark.parametrize("name", BUILDERS)
def test_requests_are_signed_like_slack(name: str) -> None:
    verifier = SignatureVerifier(SIGNING_SECRET)
    build = BUILDERS[name]
    good = build()
    assert verifier.is_valid_request(good.body, good.headers)
    forged = build(signing_secret="not-the-secret")
    assert not verifier.is_valid_request(forged.body, forged.headers)
    stale = build(timestamp=int(time.time()) - 301)
    assert not verifier.is_valid_request(stale.body, stale.headers)


def test_retries_carry_slacks_headers_and_the_same_event_id() -> None:
    first = sr.event_callback(sr.message_event("hi"))
    again = sr.event_callback(
        sr.message_event("hi"), event_id=first.payload()["event_id"], retry_num=1
    )
    assert again.payload()["event_id"] == first.payload()["event_id"]
    assert (again.headers["X-Slack-Retry-Num"], again.headers["X-Slack-Retry-Reason"]) == (
        "1",
        "http_timeout",
    )
    assert "X-Slack-Retry-Num" not in first.headers


# --- Through Bolt ----------------------------------------------------------------------------


def bolt_app(fake: FakeSlack) -> App:
    return App(
        signing_secret=SIGNING_SECRET,
        client=WebClient(token=fake.bot_token, base_url=fake.base_url),
    )


def test_a_wizard_conversation_through_bolt(fake: FakeSlack) -> None:
    app = bolt_app(fake)

    @app.command("/train-rl")
    def start(ack: Ack, client: WebClient, command: dict[str, Any]) -> None:
        ack()
        client.chat_postMessage(channel=command["channel_id"], text="Let's set up RL training.")

    @app.event("message")
    def reply(event: dict[str, Any], say: Say) -> None:
        if event.get("thread_ts"):
            say(text=f"Got: {event['text']}", thread_ts=event["thread_ts"])

    response = app.dispatch(sr.slash_command("/train-rl").as_bolt_request())
    assert response.status == 200
    fake.wait_for(lambda s: len(s.messages(CHANNEL_ID)) == 1)
    parent = fake.messages(CHANNEL_ID)[0].ts

    event = fake.post_as_user(CHANNEL_ID, "multi-turn", thread_ts=parent)
    assert app.dispatch(sr.event_callback(event).as_bolt_request()).status == 200
    fake.wait_for(lambda s: len(s.thread(CHANNEL_ID, parent)) == 3)
    assert [(m.user, m.text) for m in fake.thread(CHANNEL_ID, parent)] == [
        (BOT_USER_ID, "Let's set up RL training."),
        (USER_ID, "multi-turn"),
        (BOT_USER_ID, "Got: multi-turn"),
    ]
    # A stale or forged request never reaches a listener
    stale = sr.slash_command("/train-rl", timestamp=int(time.time()) - 600)
    assert app.dispatch(stale.as_bolt_request()).status == 401
    forged = sr.slash_command("/train-rl", signing_secret="guess")
    assert app.dispatch(forged.as_bolt_request()).status == 401


def test_every_message_shape_reaches_bolt_and_our_own_echo_does_not(fake: FakeSlack) -> None:
    # process_before_response: dispatch returns after the listener ran, so nothing to wait for
    app = App(
        signing_secret=SIGNING_SECRET,
        client=WebClient(token=fake.bot_token, base_url=fake.base_url),
        process_before_response=True,
    )
    seen: list[str | None] = []

    @app.event("message")
    def record(event: dict[str, Any]) -> None:
        seen.append(event.get("subtype"))

    parent = "1700000000.000100"
    said = sr.message_event("hi", thread_ts=parent)
    file = fake.add_user_file("env.py", b"x = 1\n")
    events = [
        said,
        sr.thread_broadcast_event("also here", thread_ts=parent),
        sr.message_changed_event(said, "hi!"),
        sr.message_deleted_event(said),
        sr.bot_message_event("from a webhook"),
        sr.file_share_event([file], thread_ts=parent),
        sr.bot_message_event("our echo", bot_id=BOT_ID, bot_user_id=BOT_USER_ID, thread_ts=parent),
    ]
    for event in events:
        assert app.dispatch(sr.event_callback(event).as_bolt_request()).status == 200
    assert seen == [
        None,
        "thread_broadcast",
        "message_changed",
        "message_deleted",
        "bot_message",
        "file_share",
    ]


def test_button_clicks_reach_bolt_and_respond_reaches_the_fake(fake: FakeSlack) -> None:
    app = bolt_app(fake)
    clicked: list[dict[str, Any]] = []

    @app.action("turns")
    def on_turns(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        clicked.append(body)
        respond(text="Multi-turn it is", replace_original=False)

    client = WebClient(token=fake.bot_token, base_url=fake.base_url)
    parent = post_parent(client)
    button = {
        "type": "button",
        "action_id": "turns",
        "text": {"type": "plain_text", "text": "Multi-turn"},
        "value": "multi",
    }
    asked = client.chat_postMessage(
        channel=CHANNEL_ID,
        thread_ts=parent,
        text="Single or multi?",
        blocks=[{"type": "actions", "block_id": "q-turns", "elements": [button]}],
    )
    question = data(asked)["ts"]
    shown = fake.message(CHANNEL_ID, question)
    assert shown is not None
    request = sr.block_actions(
        "turns",
        "multi",
        message_ts=question,
        message=shown.to_slack(),
        response_url=fake.response_url(),
    )
    assert app.dispatch(request.as_bolt_request()).status == 200
    fake.wait_for(lambda s: len(s.responses()) == 1)
    [body] = clicked
    assert body["container"]["thread_ts"] == parent
    assert body["actions"][0]["block_id"] == "q-turns"
    assert body["actions"][0]["text"]["text"] == "Multi-turn"
    assert fake.responses()[0]["text"] == "Multi-turn it is"


def test_signed_requests_post_to_a_running_bolt_server(fake: FakeSlack) -> None:
    app = bolt_app(fake)

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server: WSGIServer = make_server("127.0.0.1", 0, SlackRequestHandler(app), handler_class=Quiet)
    serving = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    serving.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/slack/events"
        answer = sr.url_verification("abc123").post(url)
        assert (answer.status, answer.body) == (200, '{"challenge": "abc123"}')
        assert sr.url_verification(signing_secret="guess").post(url).status == 401
    finally:
        server.shutdown()
        server.server_close()


def test_people_s_text_arrives_escaped_and_linked_as_slack_delivers_it(fake: FakeSlack) -> None:
    typed = 'Q&A: is 3 < 5? see requests.get("https://x.org/a?b=1&c=2").'
    delivered = 'Q&amp;A: is 3 &lt; 5? see requests.get("<https://x.org/a?b=1&amp;c=2>").'
    assert sr.slack_text(typed) == delivered
    event = sr.message_event(typed, thread_ts="1700000000.000100")
    assert event["text"] == delivered
    rich = event["blocks"][0]["elements"][0]["elements"][0]
    assert rich == {"type": "text", "text": typed}  # rich_text blocks are not escaped
    # Slash commands (should_escape: false) are escaped but not linked.
    command = sr.slash_command(text="Q&A <fast> https://x.org").payload()
    assert command["text"] == "Q&amp;A &lt;fast&gt; https://x.org"
    edited = sr.message_changed_event(event, "a < b")
    assert edited["message"]["text"] == "a &lt; b"
    assert sr.file_share_event([], text="x & y")["text"] == "x &amp; y"
    assert sr.app_mention_event("a > b")["text"] == f"<@{BOT_USER_ID}> a &gt; b"
    # Already in Slack's format (a mention only Slack's client makes): sent as it is.
    assert sr.message_event("hi <@U0ALICE>", typed=False)["text"] == "hi <@U0ALICE>"
    assert sr.slash_command(text="&amp;", typed=False).payload()["text"] == "&amp;"
    # The channel keeps a person's message as Slack does: escaped; `shown` is what people see.
    posted = fake.post_as_user(CHANNEL_ID, "x < y & z")
    message = fake.message(CHANNEL_ID, posted["ts"])
    assert message is not None and message.text == "x &lt; y &amp; z"
    assert message.shown == "x < y & z"


def test_shown_is_what_slack_displays(fake: FakeSlack, client: WebClient) -> None:
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "A & B"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "<@U1> &lt;b&gt; &amp;amp;"}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "<https://x.org|docs>"}]},
        {"type": "section", "text": {"type": "mrkdwn", "text": "unescaped <b> vanishes"}},
    ]
    ts = data(client.chat_postMessage(channel=CHANNEL_ID, text="&lt;fallback&gt;", blocks=blocks))[
        "ts"
    ]
    message = fake.message(CHANNEL_ID, ts)
    assert message is not None
    assert message.shown.splitlines() == ["A & B", "@U1 <b> &amp;", "docs", "unescaped b vanishes"]
    plain = data(client.chat_postMessage(channel=CHANNEL_ID, text="<#C1|general> &lt;3"))["ts"]
    shown = fake.message(CHANNEL_ID, plain)
    assert shown is not None and shown.shown == "#general <3"


# --- several workspaces and OAuth ------------------------------------------------------------


def test_each_workspace_has_its_own_token_and_channels() -> None:
    with FakeSlack() as fake:
        fake.add_workspace("T0OTHER", ["C0OTHER"], bot_token="xoxb-other")
        first = WebClient(token=fake.bot_token, base_url=fake.base_url)
        other = WebClient(token="xoxb-other", base_url=fake.base_url)

        assert other.auth_test()["team_id"] == "T0OTHER"
        posted = other.chat_postMessage(channel="C0OTHER", text="hi")
        assert posted["message"]["user"] == "UT0OTHERBOT"
        with pytest.raises(SlackApiError, match="channel_not_found"):
            first.chat_postMessage(channel="C0OTHER", text="not my workspace")
        with pytest.raises(SlackApiError, match="channel_not_found"):
            other.chat_postMessage(channel=CHANNEL_ID, text="not mine either")
        ts = str(first.chat_postMessage(channel=CHANNEL_ID, text="the first bot's")["ts"])
        fake.add_workspace(TEAM_ID, [], bot_token="xoxb-another-bot-in-the-team")
        another = WebClient(token="xoxb-another-bot-in-the-team", base_url=fake.base_url)
        with pytest.raises(SlackApiError, match="cant_update_message"):
            another.chat_update(channel=CHANNEL_ID, ts=ts, text="not its message")

        fake.uninstall("T0OTHER")
        with pytest.raises(SlackApiError, match="token_revoked"):
            other.chat_postMessage(channel="C0OTHER", text="after uninstall")
        assert next(c.token for c in fake.calls("chat.postMessage") if c.ok) == "xoxb-other"


def test_oauth_v2_access_trades_each_code_once_for_the_workspaces_bot_token() -> None:
    with FakeSlack() as fake:
        fake.oauth_app("1.2", "secret")
        client = WebClient(base_url=fake.base_url)
        code = fake.authorize(
            "T0NEW",
            scopes=["chat:write", "commands"],
            enterprise_id="E0ORG",
            enterprise_name="Org",
            redirect_uri="https://host/slack/oauth_redirect",
        )

        with pytest.raises(SlackApiError, match="bad_redirect_uri"):
            client.oauth_v2_access(client_id="1.2", client_secret="secret", code=code)
        answer = client.oauth_v2_access(
            client_id="1.2",
            client_secret="secret",
            code=code,
            redirect_uri="https://host/slack/oauth_redirect",
        )
        with pytest.raises(SlackApiError, match="code_already_used"):
            client.oauth_v2_access(
                client_id="1.2",
                client_secret="secret",
                code=code,
                redirect_uri="https://host/slack/oauth_redirect",
            )
        with pytest.raises(SlackApiError, match="invalid_code"):
            client.oauth_v2_access(client_id="1.2", client_secret="secret", code="made-up")

        assert answer["token_type"] == "bot" and answer["scope"] == "chat:write,commands"
        assert answer["team"] == {"name": "Workspace T0NEW", "id": "T0NEW"}
        assert answer["enterprise"] == {"name": "Org", "id": "E0ORG"}
        assert answer["authed_user"] == {"id": USER_ID}
        token = answer["access_token"]
        assert WebClient(token=token, base_url=fake.base_url).auth_test()["team_id"] == "T0NEW"
        again = fake.authorize("T0NEW", scopes=["chat:write"])
        reinstall = client.oauth_v2_access(client_id="1.2", client_secret="secret", code=again)
        assert reinstall["access_token"] == token  # the same bot keeps its token


def test_users_info_says_who_is_an_admin_with_users_read_in_the_workspace_only() -> None:
    with FakeSlack() as fake:
        fake.add_user("U0ADMIN", is_admin=True)
        fake.add_user("U0GUEST", is_restricted=True)
        fake.add_user("U0FAR", team_id="T0OTHER", is_owner=True)
        client = WebClient(token=fake.bot_token, base_url=fake.base_url)

        admin = client.users_info(user="U0ADMIN")["user"]
        guest = client.users_info(user="U0GUEST")["user"]
        assert (admin["team_id"], admin["is_admin"], admin["is_owner"]) == (TEAM_ID, True, False)
        assert (guest["is_admin"], guest["is_restricted"]) == (False, True)
        with pytest.raises(SlackApiError, match="user_not_found"):
            client.users_info(user="U0FAR")  # another workspace's member: not visible here
        with pytest.raises(SlackApiError, match="user_not_found"):
            client.users_info(user="U0NOBODY")

        fake.oauth_app("1.2", "secret")
        code = fake.authorize("T0OTHER", scopes=["chat:write", "commands"])
        token = client.oauth_v2_access(client_id="1.2", client_secret="secret", code=code)
        other = WebClient(token=token["access_token"], base_url=fake.base_url)
        with pytest.raises(SlackApiError) as refused:
            other.users_info(user="U0FAR")
        assert refused.value.response["error"] == "missing_scope"
        assert refused.value.response["needed"] == "users:read"
        code = fake.authorize("T0OTHER", scopes=["chat:write", "commands", "users:read"])
        client.oauth_v2_access(client_id="1.2", client_secret="secret", code=code)
        assert other.users_info(user="U0FAR")["user"]["is_owner"] is True


PROMPT_MODAL: dict[str, Any] = {
    "type": "modal",
    "callback_id": "ask",
    "private_metadata": "7",
    "title": {"type": "plain_text", "text": "Ask"},
    "submit": {"type": "plain_text", "text": "Send"},
    "blocks": [
        {
            "type": "input",
            "block_id": "prompt",
            "label": {"type": "plain_text", "text": "Prompt"},
            "element": {"type": "plain_text_input", "action_id": "text", "max_length": 3000},
        }
    ],
}


def test_views_open_takes_an_interactions_trigger_once_and_in_time(
    fake: FakeSlack, client: WebClient
) -> None:
    trigger = fake.issue_trigger(USER_ID)

    view = data(client.views_open(trigger_id=trigger, view=PROMPT_MODAL))["view"]

    assert view["type"] == "modal" and view["private_metadata"] == "7"
    assert [m["id"] for m in fake.modals(USER_ID)] == [view["id"]]
    with pytest.raises(SlackApiError, match="exchanged_trigger_id"):
        client.views_open(trigger_id=trigger, view=PROMPT_MODAL)
    with pytest.raises(SlackApiError, match="invalid_trigger_id"):
        client.views_open(trigger_id=sr.new_trigger_id(), view=PROMPT_MODAL)
    late = fake.issue_trigger(USER_ID)
    fake.expire_trigger(late)
    with pytest.raises(SlackApiError, match="expired_trigger_id"):
        client.views_open(trigger_id=late, view=PROMPT_MODAL)
    assert len(fake.modals()) == 1


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"title": {"type": "plain_text", "text": "A title far over the limit"}}, "/view/title"),
        ({"submit": None}, "needs submit"),
        ({"private_metadata": "x" * 3001}, "/view/private_metadata"),
        ({"type": "home"}, "view.type must be modal"),
        (
            {
                "blocks": [
                    {
                        **PROMPT_MODAL["blocks"][0],
                        "element": {
                            "type": "plain_text_input",
                            "action_id": "t",
                            "max_length": 4000,
                        },
                    }
                ]
            },
            "max_length",
        ),
    ],
)
def test_views_open_refuses_a_modal_slack_refuses(
    fake: FakeSlack, client: WebClient, change: dict[str, Any], complaint: str
) -> None:
    view = {key: value for key, value in {**PROMPT_MODAL, **change}.items() if value is not None}

    with pytest.raises(SlackApiError) as refused:
        client.views_open(trigger_id=fake.issue_trigger(), view=view)

    assert refused.value.response["error"] == "invalid_arguments"
    assert complaint in json.dumps(refused.value.response["response_metadata"])
    assert fake.modals() == []


def test_views_open_refuses_a_view_too_large(fake: FakeSlack, client: WebClient) -> None:
    sections = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "x" * 2999}} for _ in range(90)
    ]
    with pytest.raises(SlackApiError, match="view_too_large"):
        client.views_open(
            trigger_id=fake.issue_trigger(), view={**PROMPT_MODAL, "blocks": sections}
        )


def test_a_view_submission_carries_the_opened_view_and_what_was_typed(
    fake: FakeSlack, client: WebClient
) -> None:
    view = data(client.views_open(trigger_id=fake.issue_trigger(), view=PROMPT_MODAL))["view"]

    payload = sr.view_submission(view, {"prompt": {"text": "hello"}}).payload()

    assert payload["type"] == "view_submission"
    assert payload["view"]["id"] == view["id"] and payload["view"]["callback_id"] == "ask"
    assert payload["view"]["state"]["values"] == {
        "prompt": {"text": {"type": "plain_text_input", "value": "hello"}}
    }


def test_a_view_submission_sends_the_ticked_checkboxes_as_selected_options(
    fake: FakeSlack, client: WebClient
) -> None:
    public = {"text": {"type": "plain_text", "text": "Public"}, "value": "public"}
    box = {
        "type": "input",
        "block_id": "visibility",
        "optional": True,
        "label": {"type": "plain_text", "text": "Visibility"},
        "element": {"type": "checkboxes", "action_id": "ticked", "options": [public]},
    }
    modal = {**PROMPT_MODAL, "blocks": [*PROMPT_MODAL["blocks"], box]}
    view = data(client.views_open(trigger_id=fake.issue_trigger(), view=modal))["view"]

    ticked = sr.view_submission(view, {"visibility": {"ticked": ["public"]}}).payload()
    unticked = sr.view_submission(view, {}).payload()

    assert ticked["view"]["state"]["values"]["visibility"] == {
        "ticked": {"type": "checkboxes", "selected_options": [public]}
    }
    assert unticked["view"]["state"]["values"]["visibility"] == {
        "ticked": {"type": "checkboxes", "selected_options": []}
    }


DM_ID = "D0ARTBOTDM"


def test_a_status_is_set_in_any_thread_cleared_by_the_apps_reply_and_checked_as_slack_does(
    fake: FakeSlack,
) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=fake.base_url)
    root = fake.post_as_user(CHANNEL_ID, "train something")["ts"]

    client.assistant_threads_setStatus(channel_id=CHANNEL_ID, thread_ts=root, status="is thinking…")
    assert fake.status(CHANNEL_ID, root) == "is thinking…"
    client.chat_postMessage(channel=CHANNEL_ID, thread_ts=root, text="an answer")
    assert fake.statuses(CHANNEL_ID, root) == ["is thinking…", ""]  # the reply cleared it

    def refused(**arguments: Any) -> str:
        with pytest.raises(SlackApiError) as error:
            client.api_call("assistant.threads.setStatus", json=arguments)
        return str(error.value.response["error"])

    assert refused(channel_id=CHANNEL_ID, thread_ts="1.000000", status="x") == "invalid_thread_ts"
    assert refused(channel_id=CHANNEL_ID, thread_ts=root) == "invalid_arguments"  # no status
    assert refused(thread_ts=root, status="x") == "channel_not_found"
    too_many = [f"step {n}" for n in range(11)]
    assert (
        refused(channel_id=CHANNEL_ID, thread_ts=root, status="x", loading_messages=too_many)
        == "invalid_arguments"
    )


def test_titles_and_suggested_prompts_belong_to_the_apps_dms(fake: FakeSlack) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=fake.base_url)
    dm_root = fake.post_as_user(DM_ID, "Train an agent with RL", channel_type="im")["ts"]
    channel_root = fake.post_as_user(CHANNEL_ID, "hello")["ts"]
    prompts = [{"title": "RL", "message": "Train an agent with RL"}]

    client.assistant_threads_setTitle(channel_id=DM_ID, thread_ts=dm_root, title="RL: 2048")
    client.assistant_threads_setSuggestedPrompts(
        channel_id=DM_ID, thread_ts=dm_root, prompts=prompts, title="Try"
    )
    assert fake.title(DM_ID, dm_root) == "RL: 2048"
    assert fake.suggested_prompts(DM_ID, dm_root) == {"title": "Try", "prompts": prompts}

    with pytest.raises(SlackApiError, match="method_not_supported_for_channel_type"):
        client.assistant_threads_setTitle(channel_id=CHANNEL_ID, thread_ts=channel_root, title="t")
    with pytest.raises(SlackApiError, match="invalid_arguments"):
        client.assistant_threads_setSuggestedPrompts(
            channel_id=DM_ID, thread_ts=dm_root, prompts=prompts * 5
        )
    with pytest.raises(SlackApiError, match="invalid_arguments"):
        client.assistant_threads_setTitle(channel_id=DM_ID, thread_ts=dm_root, title=" ")


def test_a_streamed_message_grows_in_its_thread_until_it_is_stopped(fake: FakeSlack) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=fake.base_url)
    root = fake.post_as_user(CHANNEL_ID, "what is RULER?")["ts"]
    client.assistant_threads_setStatus(channel_id=CHANNEL_ID, thread_ts=root, status="is thinking…")

    started = client.chat_startStream(
        channel=CHANNEL_ID,
        thread_ts=root,
        recipient_user_id=USER_ID,
        recipient_team_id=TEAM_ID,
        markdown_text="RULER ",
    )
    ts = str(started["ts"])
    client.chat_appendStream(channel=CHANNEL_ID, ts=ts, markdown_text="ranks a group ")
    shown = fake.message(CHANNEL_ID, ts)
    assert shown is not None and shown.streaming and shown.text == "RULER ranks a group "
    assert shown in fake.thread(CHANNEL_ID, root)  # visible while it grows
    assert fake.status(CHANNEL_ID, root) == ""  # the app's reply cleared the status
    client.chat_stopStream(channel=CHANNEL_ID, ts=ts, markdown_text="of rollouts.")

    stopped = fake.message(CHANNEL_ID, ts)
    assert stopped is not None and not stopped.streaming
    assert stopped.text == "RULER ranks a group of rollouts."
    assert fake.stream_chunks(CHANNEL_ID, ts) == ["RULER ", "ranks a group ", "of rollouts."]
    with pytest.raises(SlackApiError, match="message_not_in_streaming_state"):
        client.chat_appendStream(channel=CHANNEL_ID, ts=ts, markdown_text="more")
    with pytest.raises(SlackApiError, match="message_not_in_streaming_state"):
        client.chat_stopStream(channel=CHANNEL_ID, ts=ts)


def test_streaming_is_checked_as_slack_does(fake: FakeSlack) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=fake.base_url)
    root = fake.post_as_user(CHANNEL_ID, "hello")["ts"]
    dm_root = fake.post_as_user(DM_ID, "hello", channel_type="im")["ts"]

    def refused(method: str, **arguments: Any) -> str:
        with pytest.raises(SlackApiError) as error:
            client.api_call(method, json=arguments)
        return str(error.value.response["error"])

    recipient = {"recipient_user_id": USER_ID, "recipient_team_id": TEAM_ID}
    # Outside a DM the stream is for someone: both recipient fields are required.
    assert refused("chat.startStream", channel=CHANNEL_ID, thread_ts=root) == (
        "missing_recipient_user_id"
    )
    assert (
        refused("chat.startStream", channel=CHANNEL_ID, thread_ts=root, recipient_user_id=USER_ID)
        == "missing_recipient_team_id"
    )
    assert refused("chat.startStream", channel=CHANNEL_ID, **recipient) == "invalid_arguments"
    assert (
        refused("chat.startStream", channel=CHANNEL_ID, thread_ts="1.000000", **recipient)
        == "invalid_thread_ts"
    )
    assert (
        refused(
            "chat.startStream",
            channel=CHANNEL_ID,
            thread_ts=root,
            markdown_text="x" * 12_001,
            **recipient,
        )
        == "msg_too_long"
    )
    in_dm = str(client.chat_startStream(channel=DM_ID, thread_ts=dm_root)["ts"])  # no recipient
    assert refused("chat.appendStream", channel=DM_ID, ts=in_dm) == "invalid_arguments"  # no text
    assert (
        refused("chat.appendStream", channel=DM_ID, ts=in_dm, markdown_text="y" * 12_001)
        == "msg_too_long"
    )
    posted = str(client.chat_postMessage(channel=CHANNEL_ID, thread_ts=root, text="plain")["ts"])
    assert (
        refused("chat.appendStream", channel=CHANNEL_ID, ts=posted, markdown_text="more")
        == "message_not_in_streaming_state"
    )
    assert (
        refused("chat.appendStream", channel=CHANNEL_ID, ts="9.000000", markdown_text="more")
        == "message_not_found"
    )
    # slack_sdk's ChatStream sends markdown_text chunks: taken the same way.
    streamer = client.chat_stream(channel=DM_ID, thread_ts=dm_root, buffer_size=4)
    streamer.append(markdown_text="one ")
    streamer.append(markdown_text="two")
    streamer.stop()
    assert streamer.ts is not None
    assert fake.stream_chunks(DM_ID, streamer.ts) == ["one ", "two"]


def test_feedback_buttons_are_checked_as_block_kit_documents_them(fake: FakeSlack) -> None:
    client = WebClient(token=BOT_TOKEN, base_url=fake.base_url)
    button = {"text": {"type": "plain_text", "text": "Helpful"}, "value": "helpful"}
    good = {"type": "feedback_buttons", "positive_button": button, "negative_button": button}
    client.chat_postMessage(
        channel=CHANNEL_ID, text="x", blocks=[{"type": "context_actions", "elements": [good]}]
    )

    one_sided = {"type": "feedback_buttons", "positive_button": button}
    for elements in ([good] * 6, [one_sided], [{"type": "button", "text": "x"}], []):
        with pytest.raises(SlackApiError, match="invalid_blocks"):
            client.chat_postMessage(
                channel=CHANNEL_ID,
                text="x",
                blocks=[{"type": "context_actions", "elements": elements}],
            )
