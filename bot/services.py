"""The bot's services, built on the configured database: what the listeners (bot/slack/listeners),
the outbox worker and `artbot serve`'s loops call. The Bolt app that serves them: bot.app.
"""

from __future__ import annotations

import functools
import logging
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from assistant import Assistant
from bot.delivery.outbox import Outbox
from bot.delivery.worker import OutboxWorker
from bot.migrations import BOT_DATABASE
from bot.process.metrics import BotMetrics
from bot.process.shards import ALONE, Shard
from bot.process.work_slots import WorkSlots
from bot.runs.approval import ApprovalPolicy
from bot.runs.preflight_records import PreflightRecords
from bot.settings import BotSettings
from bot.slack.answer_feedback import AnswerFeedbackStore
from bot.slack.poster import ThreadPoster
from bot.slack.records import SlackRecords
from bot.wizard.agent_view import AgentView
from bot.wizard.command import WizardCommand
from bot.wizard.expiry import Expiry
from bot.wizard.home import HomeTab
from bot.wizard.opening import ThreadOpener
from bot.wizard.preflights import Preflights
from bot.wizard.proposals import Proposals
from bot.wizard.replies import Replies
from bot.wizard.result_buttons import ResultButtons
from bot.wizard.script_results import Dryrun, ScriptResults
from bot.wizard.turns import Turns
from bot.workspaces.clients import ClientFor
from bot.workspaces.installations import check_stored_tokens, schema_engine, stored_token_cipher
from bot.workspaces.store import Workspaces
from bot.workspaces.token_keys import TokenCipher
from checks.dryrun import dryrun_script
from checks.preflight.endpoint import PreflightEndpoint
from flows import FLOWS, TRAIN_RL, TRAIN_SFT
from isolation.sandbox import Sandbox
from storage import migrations
from storage.database import create_database_engine, data_dir
from storage.sessions import SessionStore

if TYPE_CHECKING:
    from bot.runs.compare import RunComparer
    from bot.runs.controls import RunControls
    from bot.runs.rerun import Reruns
    from bot.runs.service import RunService
    from bot.runs.trained_model.model_export import ModelExport
    from bot.runs.trained_model.tryit import ModelTrier

log = logging.getLogger(__name__)

LISTENER_SLOTS = 8
"""Of the listeners' threads (bot.app.LISTENER_WORKERS), how many compute at once (the rest wait
on Slack, or for a slot): more would fight over the GIL with the event loop that acks. With
several worker processes (`artbot serve --workers N`) they share these: LISTENER_SLOTS // N each
(at least MIN_SLOTS). At 200 users on 2 cores, 2 workers of 8 slots acked at p99 600 ms on
PostgreSQL, 2 of 4 at 250-270 ms, with more turns per second (benchmarks/bot_turns.py, two
paired runs): more threads computing than cores keep the event loops that ack waiting for a
core."""
MIN_SLOTS = 2


@dataclass(frozen=True)
class Services:
    """Every service of one bot process, on one database. The run services are None without a
    GPU runner (ARTBOT_RUNNER_URL)."""

    store: SessionStore
    records: SlackRecords
    poster: ThreadPoster
    outbox: Outbox
    results: ScriptResults
    workspaces: Workspaces
    slots: WorkSlots
    """The work slots of the listeners' threads (bot/process/work_slots.py)."""
    turns: Turns
    replies: Replies
    proposals: Proposals
    result_buttons: ResultButtons
    commands: dict[str, WizardCommand]
    """The slash commands by name: `/train-rl` and `/train-sft`."""
    agent_view: AgentView
    """Conversations begun by a message in the app's DM (Slack's agent view)."""
    answer_feedback: AnswerFeedbackStore
    """Helpful or not, said of the assistant's streamed answers."""
    home: HomeTab
    expiry: Expiry
    max_upload_bytes: int
    """The largest file a reply may attach."""
    assistant: Assistant | None = None
    """Reads typed replies first when a model is configured (None: the plain form)."""
    runs: RunService | None = None
    controls: RunControls | None = None
    reruns: Reruns | None = None
    comparer: RunComparer | None = None
    trier: ModelTrier | None = None
    model_export: ModelExport | None = None
    """A finished run's checkpoints, the choice of its model, export and download."""


def build_services(
    settings: BotSettings,
    *,
    executor: ThreadPoolExecutor | None = None,
    dryrun: Dryrun | str | None = "default",
    schema: str | None = None,
    assistant: Assistant | None = None,
    shard: Shard = ALONE,
    sandbox: Sandbox | None = None,
) -> Services:
    """The services on the configured database (SQLite by default), migrated first;
    `assistant` (assistant_from_environment) reads typed replies first when given; its share of
    the work slots is `shard`'s (one worker of several computes on fewer threads).

    The stored Slack tokens' cipher comes first (OAuth: ARTBOT_TOKEN_KEYS, or the key file,
    generated if need be), for the migrations to encrypt any plaintext token with.

    MigrationRefused (SchemaMismatch among them) or SQLAlchemyError when the database cannot be
    brought to the newest schema; TokenKeyError when the keys do not read the stored tokens.
    """
    engine = create_database_engine(settings.artbot_database_url)
    oauth = settings.multi_workspace
    cipher = stored_token_cipher(settings.artbot_token_keys, engine, schema, oauth=oauth)
    migrations.upgrade(
        BOT_DATABASE,
        settings.artbot_database_url,
        schema=schema,
        attributes={"token_cipher": cipher},
    )
    if oauth and cipher is not None:
        tokens = check_stored_tokens(schema_engine(engine, schema), cipher)
        _log_token_keys(cipher, tokens)
    store = SessionStore(engine, schema=schema)
    records = SlackRecords(engine, schema=schema)
    poster = ThreadPoster(records)
    scripts_dir = (
        Path(settings.artbot_scripts_dir) if settings.artbot_scripts_dir else data_dir() / "scripts"
    )
    sandbox = sandbox or Sandbox.for_host(allow_unconfined=settings.artbot_allow_unsandboxed_code)
    kwargs: dict[str, Any] = {"sandbox": sandbox}
    if not settings.artbot_dryrun:
        kwargs["dryrun"] = None
    elif dryrun != "default":
        kwargs["dryrun"] = dryrun
    elif not sandbox.may_run:
        kwargs["dryrun"] = None  # fail closed: the card says why
    else:
        kwargs["dryrun"] = functools.partial(dryrun_script, sandbox=sandbox)
    outbox = Outbox(engine, schema=schema)
    executor = executor or ThreadPoolExecutor(max_workers=2)
    preflight_records = PreflightRecords(engine, schema=schema)
    preflights = _preflights(settings, outbox, executor, sandbox, preflight_records)
    results = ScriptResults(
        outbox, scripts_dir, executor, preflight_offered=preflights is not None, **kwargs
    )
    workspaces = Workspaces(engine, schema=schema, token_cipher=cipher)
    slots = WorkSlots(max(MIN_SLOTS, LISTENER_SLOTS // shard.count))
    opener = ThreadOpener(store, outbox)
    runs = controls = reruns = comparer = trier = model_export = None
    if settings.artbot_runner_url and settings.artbot_runner_token:
        # Imported only with a runner: the plots need matplotlib, the client httpx.
        from bot.runs.compare import RunComparer
        from bot.runs.controls import RunControls
        from bot.runs.rerun import Reruns
        from bot.runs.service import RunService
        from bot.runs.store import RunStore
        from bot.runs.trained_model.model_export import ModelExport
        from bot.runs.trained_model.try_limits import TryLimits, TryPool
        from bot.runs.trained_model.tryit import ModelTrier
        from runner.client import RunnerClient

        runner_token = settings.artbot_runner_token.get_secret_value()
        runner = RunnerClient(settings.artbot_runner_url, runner_token)
        runs = RunService(
            RunStore(engine, schema=schema),
            records,
            poster,
            outbox,
            runner,
            results.load_script,
            store,
            policy=ApprovalPolicy.from_settings(settings),
            auto_resume_max=settings.artbot_auto_resume_max,
            preflights=preflight_records,
        )
        controls = RunControls(runs)
        reruns = Reruns(runs.runs, store, opener, poster, outbox)
        comparer = RunComparer(runs.runs, store, FLOWS, poster, outbox)
        wandb_key = settings.wandb_api_key.get_secret_value() if settings.wandb_api_key else None
        # Tries and exports share one bounded pool: both wait on the runner for minutes.
        pool = TryPool(settings.artbot_try_threads, settings.artbot_try_in_flight_per_workspace)
        trier = ModelTrier(
            runs.runs,
            store,
            poster,
            outbox,
            limits=TryLimits(
                settings.artbot_try_per_user,
                settings.artbot_try_per_workspace,
                settings.artbot_try_window_s,
            ),
            pool=pool,
            serverless_api_key=wandb_key,
            runner=runner,
            runner_token=runner_token,
            timeout_s=settings.artbot_try_timeout_s,
            start_timeout_s=settings.artbot_try_start_timeout_s,
        )
        model_export = ModelExport(runs.runs, poster, outbox, pool, runner)
    turns = Turns(store, records, outbox, poster, slots=slots, assistant=assistant)
    expiry = Expiry(store, records, outbox, workspaces)
    proposals = Proposals(turns, expiry)
    replies = Replies(turns, proposals, expiry, runs=runs, trier=trier)
    return Services(
        store=store,
        records=records,
        poster=poster,
        outbox=outbox,
        results=results,
        workspaces=workspaces,
        slots=slots,
        turns=turns,
        replies=replies,
        proposals=proposals,
        result_buttons=ResultButtons(turns, replies, results, runs=runs, preflights=preflights),
        commands={
            name: WizardCommand(name, flow, opener, store, runs=runs, comparer=comparer)
            for name, flow in (("/train-rl", TRAIN_RL), ("/train-sft", TRAIN_SFT))
        },
        agent_view=AgentView(opener, runs=runs),
        answer_feedback=AnswerFeedbackStore(engine, schema=schema),
        home=HomeTab(store, runs.runs if runs is not None else None),
        expiry=expiry,
        max_upload_bytes=settings.artbot_max_upload_bytes,
        assistant=assistant,
        runs=runs,
        controls=controls,
        reruns=reruns,
        comparer=comparer,
        trier=trier,
        model_export=model_export,
    )


def _log_token_keys(cipher: TokenCipher, tokens: int) -> None:
    if cipher.generated:
        log.warning(
            "generated the key for the Slack tokens at rest: %s (mode 0600). Back it up: without "
            "it the stored tokens cannot be read and every workspace must install the app again. "
            "Or set ARTBOT_TOKEN_KEYS (docs/slack.md: Tokens at rest)",
            cipher.source,
        )
    else:
        log.info(
            "Slack tokens at rest: %d stored, encrypted with %d key(s) from %s",
            tokens,
            cipher.key_count,
            cipher.source,
        )


def start_outbox(
    services: Services,
    client_for: ClientFor,
    metrics: BotMetrics | None = None,
    shard: Shard = ALONE,
) -> OutboxWorker:
    """Deliver the services' outbox, each thread through its team's client (`client_for`), from
    now on (what an earlier process left undelivered first), its depth and retries counted in
    `metrics`. One per database, or per shard of it: the serve process's."""
    worker = OutboxWorker(
        services.outbox,
        client_for,
        generate=services.result_buttons.generate,
        on_retry=metrics.outbox_retries.inc if metrics is not None else None,
        shard=shard,
    )
    if metrics is not None:
        metrics.watch_outbox(services.outbox.depth)
    return worker.start()


def _preflights(
    settings: BotSettings,
    outbox: Outbox,
    executor: Executor,
    sandbox: Sandbox,
    records: PreflightRecords,
) -> Preflights | None:
    """The result cards' *Preflight*, where an endpoint and its model are configured and this
    host may run users' code."""
    if not (settings.artbot_preflight_base_url and settings.artbot_preflight_model):
        return None
    if not sandbox.may_run:
        log.warning("ARTBOT_PREFLIGHT_BASE_URL is set, but this host cannot sandbox users' code")
        return None
    key = settings.artbot_preflight_api_key
    endpoint = PreflightEndpoint(
        settings.artbot_preflight_base_url,
        settings.artbot_preflight_model,
        key.get_secret_value() if key is not None else None,
    )
    return Preflights(endpoint, outbox, executor, sandbox, records)
