"""The conversation of `artbot chat`: resume or start a session, then reply, save, show, repeat;
at the end, write, check and dry-run the script."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from artbot.exit_status import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PROBLEMS,
    EXIT_UNFINISHED,
    EXIT_USAGE,
)
from artbot.script_files import ScriptExists, script_path, write_script
from artbot.terminal.after_sft import (
    NotAFinishedSftRun,
    fork_note,
    rl_session_from_file,
    rl_session_from_store,
    rl_session_name,
    run_note,
    standin_note,
)
from artbot.terminal.io import EndOfInput, Terminal
from assistant import (
    Assistant,
    Proposal,
    SettingsError,
    assistant_from_environment,
    not_configured,
    read_confirmation,
)
from bot.migrations import BOT_DATABASE
from checks.preflight.endpoint import PreflightEndpoint
from checks.preflight.launch import preflight_script
from checks.preflight.numbers import PreflightNumbers
from checks.run_estimate import ESTIMATES, estimate_rl
from checks.script_check import check_script
from checks.script_format import formatted_script
from flows import (
    FLOWS,
    TRAIN_RL,
    Cancelled,
    Completed,
    Flow,
    Notice,
    RenderError,
    Reply,
    Session,
    Turn,
    advance,
    begin,
    start_of,
)
from isolation.sandbox import Sandbox
from storage import migrations
from storage.database import DatabaseUrlError, database_problem
from storage.sessions import (
    SessionKey,
    SessionStore,
    SessionStoreError,
    StaleSession,
    StoredSession,
)

TERMINAL_TEAM = "terminal"
DEFAULT_SESSION_NAME = "default"

BANNER = (
    "artbot: the {flow} wizard. Answer each question; `back`, `edit <question>`, `status`, "
    "`help` and `cancel` work at any point.\n"
    "Paste data or code as it is (an empty line sends a paste), or between ``` lines. Send a "
    "file with `/file PATH`. Stop with Ctrl-D or `/quit`: the session is saved and resumes next "
    "time."
)
ASSISTANT_BANNER = (
    "An assistant is on: ask it anything (`ask ...`, or a line ending in `?`), or answer in your "
    "own words; it says what it understood and nothing counts until you reply `yes`. At a code "
    "question or the tools, `draft` asks it to write them."
)
DRAFT_CHOICES = "Reply `y` to use it, `edit` to change it, or `again` for another draft."
EDIT_DRAFT = (
    "Here is the draft to edit: copy it, change it, and send it back as your answer between "
    "``` lines (or save it and send `/file PATH`). Nothing was stored."
)
DRAFT_AGAIN_WORDS = frozenset({"again", "draft again"})
EDIT_WORD = "edit"


def preflight_offer(script: Path) -> str:
    """What the chat says after an RL script without `--preflight`: how to see, before any GPU
    time, whether its reward can teach anything."""
    return (
        "Next, before any GPU time: `artbot preflight "
        f"{shlex.quote(str(script))} --base-url URL --model NAME` runs its rollouts and reward "
        "against a real model and says whether training can learn from them (or set "
        "ARTBOT_PREFLIGHT_BASE_URL and ARTBOT_PREFLIGHT_MODEL and chat with `--preflight`)."
    )


def run_chat_command(args: argparse.Namespace) -> int:
    """Run the wizard on stdin and stdout; the exit status says how it ended."""
    endpoint = PreflightEndpoint.from_environment(os.environ) if args.preflight else None
    if args.preflight and endpoint is None:
        print(
            "artbot chat: --preflight needs ARTBOT_PREFLIGHT_BASE_URL and ARTBOT_PREFLIGHT_MODEL "
            "(and ARTBOT_PREFLIGHT_API_KEY where the endpoint wants a key)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    after_sft = args.after_sft is not None or args.after_sft_session is not None
    if after_sft and (args.export is not None or args.flow == "train-sft"):
        other = "--export" if args.export is not None else "--flow train-sft"
        print(
            f"artbot chat: {other} cannot go with --after-sft: RL after SFT starts a new "
            "train-rl session",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        key = SessionKey(
            TERMINAL_TEAM,
            local_user(),
            args.session if args.session is not None else DEFAULT_SESSION_NAME,
        )
    except ValueError as error:
        print(f"artbot chat: --session: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        # Drafts are the model's code run on your machine: sandboxed where this host can.
        assistant = assistant_from_environment(os.environ, Sandbox.for_host(allow_unconfined=True))
    except SettingsError as error:
        print(f"artbot chat: {error}", file=sys.stderr)
        return EXIT_USAGE
    terminal = Terminal.standard()
    try:
        migrations.upgrade(BOT_DATABASE, args.database_url)  # before anything is read
        store = SessionStore.open(args.database_url)
    except DatabaseUrlError as error:
        print(f"artbot chat: --database-url: {error}", file=sys.stderr)
        return EXIT_USAGE
    except migrations.MigrationRefused as error:  # SchemaMismatch, or a token key missing
        print(f"artbot chat: {error}", file=sys.stderr)
        return EXIT_PROBLEMS
    except SQLAlchemyError as error:
        print(f"artbot chat: database error: {database_problem(error)}", file=sys.stderr)
        return EXIT_PROBLEMS
    if args.export is not None:
        try:
            return export_answers(store, key, args.export)
        finally:
            store.close()
    start: Session | None = None
    try:
        if after_sft:
            key, start = after_sft_session(store, key, args)
            flow = TRAIN_RL
        else:
            flow = chat_flow(store.get(key), args.flow, new=args.new)
    except NotAFinishedSftRun as error:
        store.close()
        option = "--after-sft" if args.after_sft is not None else "--after-sft-session"
        print(f"artbot chat: {option}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except SessionStoreError as error:
        store.close()
        print(f"artbot chat: {error}", file=sys.stderr)
        return EXIT_USAGE
    chat = Chat(
        store,
        key,
        terminal,
        out=args.out,
        dryrun=args.dryrun,
        flow=flow,
        assistant=assistant,
        start=start,
        preflight=endpoint,
    )
    try:
        return chat.run(new=args.new)
    except KeyboardInterrupt:
        terminal.say("")
        terminal.say(f"Stopped. Your answers are saved: {chat.resume_command()} carries on.")
        return EXIT_INTERRUPTED
    except SessionStoreError as error:
        print(f"artbot chat: {error}", file=sys.stderr)
        return EXIT_PROBLEMS
    except SQLAlchemyError as error:
        print(f"artbot chat: database error: {database_problem(error)}", file=sys.stderr)
        return EXIT_PROBLEMS
    finally:
        store.close()


def after_sft_session(
    store: SessionStore, key: SessionKey, args: argparse.Namespace
) -> tuple[SessionKey, Session]:
    """The key and the new train-rl session of `--after-sft FILE` or `--after-sft-session
    [NAME]`: under `--session`, else MODEL-rl. NotAFinishedSftRun when the source is no finished
    SFT run; SessionStoreError when the key holds a session that only `--new` may discard."""
    if args.after_sft is not None:
        start = rl_session_from_file(args.after_sft)
        source = None
    else:
        name = args.after_sft_session if isinstance(args.after_sft_session, str) else None
        source, start = rl_session_from_store(store, key.team, key.channel, name)
    if args.session is None:
        key = SessionKey(key.team, key.channel, rl_session_name(start.answers["start_from"]))
    if key == source:
        raise SessionStoreError(
            f"session “{key.thread}” is the SFT session the RL one starts from: give the RL "
            "session another name with `--session NAME`"
        )
    stored = store.get(key)
    if stored is not None and kept_session(stored) and not args.new:
        state = "finished" if stored.session.status == "complete" else stored.session.status
        raise SessionStoreError(
            f"there is already a session “{key.thread}” ({stored.session.flow}, {state}): "
            "`--session NAME` starts the RL one beside it, `--new` discards it"
        )
    return key, start


def chat_flow(stored: StoredSession | None, requested: str | None, *, new: bool) -> Flow:
    """The wizard a chat runs: `--flow`, else the stored session's own, else train-rl. A session
    of another wizard is never taken over: SessionStoreError says how to keep or discard it."""
    kept = stored is not None and kept_session(stored)
    if requested is None:
        return FLOWS.get(stored.session.flow, TRAIN_RL) if stored and kept and not new else TRAIN_RL
    if stored is not None and kept and stored.session.flow != requested and not new:
        raise SessionStoreError(
            f"session “{stored.key.thread}” is a {stored.session.flow} session: `--session NAME` "
            f"starts a {requested} one beside it, `--new` discards it"
        )
    return FLOWS[requested]


def kept_session(stored: StoredSession) -> bool:
    """Whether a stored session is one to go on with or change (not expired, not cancelled)."""
    return not stored.expired and stored.session.status != "cancelled"


def export_answers(store: SessionStore, key: SessionKey, target: Path) -> int:
    """Write the answers of the session `key` as `artbot render --answers` reads them: one JSON
    object, each question's id to its answer, those asked on the session's branch only."""
    stored = store.get(key)
    if stored is None or stored.session.flow not in FLOWS:
        print(f"artbot chat: --export: there is no session “{key.thread}”", file=sys.stderr)
        return EXIT_USAGE
    flow = FLOWS[stored.session.flow]
    answers = flow.active_answers(stored.session.answers)
    text = json.dumps(answers, indent=2, ensure_ascii=False) + "\n"
    try:
        if str(target) == "-":
            sys.stdout.write(text)
        else:
            target.write_text(text, encoding="utf-8")
    except OSError as error:
        print(f"artbot chat: --export: cannot write {target}: {error}", file=sys.stderr)
        return EXIT_PROBLEMS
    state = (
        "finished"
        if stored.session.status == "complete"
        else f"{stored.session.status}: `artbot render` names the first question still open"
    )
    print(
        f"Exported the {len(answers)} answers of session “{key.thread}” ({state}) to "
        f"{'stdout' if str(target) == '-' else target}. `artbot render --answers FILE` writes "
        "the script from them.",
        file=sys.stderr,
    )
    return EXIT_OK


def local_user() -> str:
    """The login name of whoever runs artbot (the terminal's 'channel')."""
    try:
        return getpass.getuser() or "user"
    except (KeyError, OSError):  # no passwd entry and no $USER, e.g. in some containers
        return "user"


@dataclass(frozen=True)
class Chat:
    """One terminal conversation: load or start the session, then reply, save, show, repeat."""

    store: SessionStore
    key: SessionKey
    terminal: Terminal
    _: KW_ONLY
    out: Path | None = None
    """Where to write the finished script (`--out`, resolved by `script_path`)."""
    dryrun: bool = True
    flow: Flow = TRAIN_RL
    assistant: Assistant | None = None
    """Answers questions and reads free text (ARTBOT_LLM_MODEL); None: the plain wizard."""
    start: Session | None = None
    """The new session to begin with in place of a blank one (RL after SFT, `--after-sft`):
    a kept session under the key is never resumed or replaced then, except with `new`."""
    preflight: PreflightEndpoint | None = None
    """`--preflight`: after the dry run, the RL script's first-step groups against this
    endpoint (checks.preflight); None: the chat only says how to run one."""

    def resume_command(self, *options: str) -> str:
        """The command that carries on with this session (with `options`), in backticks."""
        words = ["artbot", "chat"]
        if self.key.thread != DEFAULT_SESSION_NAME:
            words += ["--session", shlex.quote(self.key.thread)]
        return f"`{' '.join([*words, *options])}`"

    def run(self, *, new: bool = False) -> int:
        """The whole conversation; returns the exit status."""
        say = self.terminal.say
        say(BANNER.format(flow=self.flow.id))
        if self.assistant is not None:
            say(ASSISTANT_BANNER)
        session = self._open(new)
        if (start := start_of(session.answers)) is not None:
            say(fork_note(start))
        # A finished session reopens at the Edit menu: a changed answer asks again what it opens.
        reopened = session.status == "complete"
        turn = (
            advance(self.flow, session, Reply(text="edit"))
            if reopened
            else begin(self.flow, session)
        )
        saved = self._save(session, turn.session)
        if saved is None:
            return EXIT_PROBLEMS
        if saved is turn.session:
            self.terminal.show(turn.messages)
        session = saved
        pending: Proposal | None = None
        while True:
            try:
                reply = self.terminal.read_reply()
            except EndOfInput as end:
                if session.status == "complete":
                    say("Nothing changed: the session stays finished, its script as it was.")
                    return EXIT_OK
                ended = "Stopped" if str(end) == "quit" else "Input ended before the last question"
                say(
                    f"{ended}. Your answers are saved: {self.resume_command()} carries on "
                    "where you left off."
                )
                return EXIT_UNFINISHED
            turn, pending = self._respond(session, reply, pending)
            saved = self._save(session, turn.session)
            if saved is None:
                return EXIT_PROBLEMS
            session = saved
            if saved is not turn.session:
                pending = None
                continue  # lost a race: what is stored now was shown instead of this turn
            self.terminal.show(turn.messages, turn.effects)
            if pending is not None and pending.is_draft:
                self.terminal.tell(f"{pending.text} {DRAFT_CHOICES}")
            elif pending is not None:
                self.terminal.tell(
                    f"{pending.text} Reply `yes` to use it, or `no` to answer again."
                )
            for effect in turn.effects:
                if isinstance(effect, Completed):
                    return self._finish(effect)
                if isinstance(effect, Cancelled):
                    return EXIT_OK

    def _respond(
        self, session: Session, reply: Reply, pending: Proposal | None
    ) -> tuple[Turn, Proposal | None]:
        """The turn for `reply`, and a proposal of the assistant that now waits for yes or no.
        A yes sends the proposal through the engine as if typed; anything else but no is a new
        reply."""
        if pending is not None and reply.value is None and not reply.attachments:
            decision = read_confirmation(reply.text)
            if decision is True:
                return advance(self.flow, session, pending.as_reply()), None
            if decision is False:
                again = begin(self.flow, session)
                return Turn(again.session, (Notice("Not used."), *again.messages)), None
            word = reply.text.strip().lower()
            if pending.is_draft and word == EDIT_WORD:
                code = f"```\n{pending.reply_text.rstrip()}\n```"
                return Turn(session, (Notice(f"{EDIT_DRAFT}\n{code}"),)), None
            if pending.is_draft and word in DRAFT_AGAIN_WORDS:
                reply = Reply(text="draft")
        if self.assistant is None:
            unassisted = not_configured(self.flow, session, reply)
            return unassisted or advance(self.flow, session, reply), None
        assisted = self.assistant.respond(self.flow, session, reply, self.key.channel)
        return assisted.turn, assisted.proposal

    def _open(self, new: bool) -> Session:
        say = self.terminal.say
        stored = self.store.get(self.key)
        name = self.key.thread
        if (
            stored is not None
            and (stored.session.flow != self.flow.id or self.start is not None)
            and kept_session(stored)
            and not new
        ):
            raise SessionStoreError(
                f"session {name} belongs to another flow ({stored.session.flow})"
                if self.start is None
                else f"session “{name}” was started elsewhere meanwhile: `--session NAME` starts "
                "the RL one beside it"
            )
        if stored is not None and stored.resumable and not new:
            answered = len(self.flow.active_answers(stored.session.answers))
            say(
                f"Resuming your session “{name}” ({answered} answers so far, last reply "
                f"{stored.updated_at:%Y-%m-%d %H:%M} UTC). `status` lists them; "
                f"{self.resume_command('--new')} starts over."
            )
            return stored.session
        finished = stored is not None and stored.session.status == "complete"
        if stored is not None and finished and not stored.expired and not new:
            return self._reopened(stored)
        if stored is not None:
            was = "expired" if stored.expired else stored.session.status
            if new:
                say(f"Starting over: the previous session “{name}” ({was}) is discarded.")
            else:
                say(f"Your previous session “{name}” was {was}; starting a new one.")
            self.store.delete(self.key)
        session = self.start or Session.start(self.flow.id)
        if self.start is not None:
            say(
                f"Started the train-rl session “{name}”: {self.resume_command()} carries on "
                "with it."
            )
        self.store.create(self.key, self.key.channel, session)
        return session

    def _reopened(self, stored: StoredSession) -> Session:
        """A finished session, kept to change an answer from the Edit menu."""
        name = self.key.thread
        answered = len(self.flow.active_answers(stored.session.answers))
        self.terminal.say(
            f"Your session “{name}” is finished: its script was written from {answered} "
            "answers. Pick one to change: I ask it again, then what the new answer opens, "
            f"and write the script again. `/quit` leaves it as it is; "
            f"{self.resume_command('--new')} starts over; "
            f"{self.resume_command('--export', 'answers.json')} saves its answers."
        )
        return stored.session

    def _save(self, before: Session, after: Session) -> Session | None:
        """Save `after` over `before` and return it. On a lost race, show and return what is
        stored instead; None when the session cannot go on."""
        if after.revision == before.revision:
            return after  # the engine bumps the revision on every change: nothing to write
        try:
            self.store.save(self.key, after, expected_revision=before.revision)
            return after
        except StaleSession:
            stored = self.store.get(self.key)
            if stored is None or not stored.resumable:
                self.terminal.problem("This session was finished or discarded elsewhere meanwhile.")
                return None
            self.terminal.problem(
                "This session was changed elsewhere meanwhile, so your last reply was not applied. "
                "Here is where it stands now:"
            )
            turn = begin(self.flow, stored.session)
            self.terminal.show(turn.messages)
            return stored.session
        except SessionStoreError as error:
            self.terminal.problem(f"{error}. Start again with {self.resume_command('--new')}.")
            return None

    def _finish(self, completed: Completed) -> int:
        """Render, write and check the script (and dry-run it); 0 only if all of that passed."""
        say = self.terminal.say
        answers = completed.answers
        path = script_path(self.out, str(answers["run_name"]))
        try:
            # Its docstring says to run that file.
            script = formatted_script(answers, path.name, self.flow)
        except RenderError as error:
            self.terminal.problem(f"The script cannot be generated: {error}")
            return EXIT_PROBLEMS
        try:
            written = write_script(path, script, fallback=True)
        except (OSError, ScriptExists) as error:
            self.terminal.problem(f"The script was not written: {error}")
            return EXIT_PROBLEMS
        say(f"Wrote {written.path}." + (f" {written.note}" if written.note else ""))
        start = start_of(answers)
        if start is not None:
            say(run_note(start, written.path.name))
        report = check_script(written.path)
        say(report.format())
        say(ESTIMATES[self.flow.id](answers).text())
        if report.errors:
            say(
                "The checks found errors, not matters of style, so the dry run was skipped. Fix "
                f"them in the script, then run `artbot check {written.path}`."
            )
            return EXIT_PROBLEMS
        if not report.ok:
            # Style in the template's code: our bug to report, not a reason to skip the run.
            say("Those are matters of style in artbot's own code (a bug of ours), not errors.")
        checked = EXIT_OK if report.ok else EXIT_PROBLEMS
        if self.dryrun:
            # Here the terminal's machine is the runner host: the files the script reads.
            files = [Path(path) for path in self.flow.runner_paths(answers)]
            dry_run = self._dry_run(written.path, files, start)
            if dry_run is not None and dry_run != EXIT_OK:
                return dry_run
        if self.flow is not TRAIN_RL:
            return checked
        if self.preflight is None:
            say(preflight_offer(written.path))
            return checked
        preflight = self._preflight(written.path, self.preflight, answers)
        return checked if preflight == EXIT_OK else preflight

    def _preflight(
        self, path: Path, endpoint: PreflightEndpoint, answers: Mapping[str, Any]
    ) -> int:
        """`artbot preflight` of the script against the configured endpoint, then the run's
        estimate from what it measured: its exit status."""
        self.terminal.say(
            f"Preflight: the script's first-step groups against `{endpoint.model}`..."
        )
        try:
            report = preflight_script(
                path,
                base_url=endpoint.base_url,
                model=endpoint.model,
                api_key=endpoint.api_key,
                sandbox=Sandbox.for_host(allow_unconfined=True),
            )
        except (OSError, ValueError) as error:
            self.terminal.problem(f"The preflight could not start: {error}")
            return EXIT_PROBLEMS
        self.terminal.say(report.format())
        numbers = PreflightNumbers.of(report)
        if numbers is not None:
            self.terminal.say(estimate_rl(answers, measured=numbers).text())
        return report.exit_status

    def _dry_run(
        self, path: Path, data_files: list[Path], start: Mapping[str, str] | None = None
    ) -> int | None:
        """The exit status `artbot dryrun` would give (EXIT_OK, EXIT_PROBLEMS, or
        EXIT_INCONCLUSIVE when the stand-in could not play the game); None when it is not
        available. A script that starts from an SFT model forks a stand-in of it: the real one
        is in the SFT run's art path (or W&B), which the dry run never touches."""
        try:
            # Imported late: the dry run is optional.
            from checks.dryrun import dryrun_script
            from checks.dryrun.command import verdict_exit_status
        except ImportError as error:
            self.terminal.say(f"Dry run unavailable ({error}); the script was not dry-run.")
            return None
        if start is not None:
            self.terminal.say(standin_note(start))
        self.terminal.say("Dry run: running the script on this CPU with a stand-in model...")
        try:
            # Your own code on your own machine: sandboxed where this host can, else not.
            report = dryrun_script(
                path,
                sandbox=Sandbox.for_host(allow_unconfined=True),
                data_files=data_files,
                forks_from=start,
            )
        except (OSError, ValueError) as error:
            self.terminal.problem(f"The dry run could not start: {error}")
            return EXIT_PROBLEMS
        self.terminal.say(report.format())
        return verdict_exit_status(report)
