"""The ``rag`` command (typer + rich): one CLI for users and operators.

    rag create-user NAME | create-token USER | list-tokens | revoke-token TOKEN | create-kb NAME --user USER
    rag upload FILE|FOLDER --kb ID      rag status DOC | --task ID | --kb ID
    rag search KB QUERY [--mode M]
    rag retry TASK                      rag reindex DOC | --kb ID
    rag kb rename ID NAME               rag kb delete ID [--yes]
    rag requeue-stuck                   rag dlq list | rag dlq replay ID
    rag ops JOB --once                  (relay, scanner, sweep, cache-evictor, metrics-sampler)
    rag worker                          rag api
    rag migrate [--target N]            rag build-model [--force]

User commands (upload, status, search, retry, reindex, kb) go through the HTTP API (``--api-url`` /
``RAG_API_URL``; the token from ``RAG_TOKEN``, ``--token-file`` or ``--token-stdin``: see
:mod:`rag_cli.safe`, which also keeps user text out of rich markup). Operator commands use the database and broker
from the settings (``.env`` / environment), like the services. ``python -m rag_cli``
is the same command. Exit codes: 0 done, 1 a refusal or a failed document, 2 bad arguments.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import asyncpg
import httpx
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rag_cli import admin
from rag_cli.client import ApiClient, ApiError, TooManyRequests, UploadRun, collect_files, split_supported
from rag_cli.safe import TokenFile, TokenSourceError, TokenStdin, plain, print_error, read_token, styled
from shared.domain.errors import TransientError
from shared.settings import KnowledgeSettings
from task_service.jobs.oneshot import OPS, Report

T = TypeVar("T")

HELP = ("One CLI for RAG users and operators.\n\n"
        "User commands (upload, status, search, retry, reindex) go through the HTTP API: --api-url / RAG_API_URL, "
        "the token from RAG_TOKEN, --token-file FILE or --token-stdin. Operator commands (users, tokens, KBs, "
        "requeue-stuck, dlq, ops) use the database and "
        "broker from the settings (.env / environment), like the services. worker and api start the services.\n\n"
        "Exit codes: 0 done, 1 a refusal or a failed document, 2 bad arguments.")
app = typer.Typer(name="rag", help=HELP, no_args_is_help=True, add_completion=False, rich_markup_mode="markdown",
                  context_settings={"help_option_names": ["-h", "--help"]})
dlq_app = typer.Typer(help="Dead letters: messages the scanner moved out of rag.index.dlq.", no_args_is_help=True)
app.add_typer(dlq_app, name="dlq")
ops_app = typer.Typer(help="The worker's periodic jobs, one pass now: `rag ops JOB --once` prints a JSON report. "
                           "Every worker also runs them on its own.", no_args_is_help=True)
app.add_typer(ops_app, name="ops")

out = Console()
err = Console(stderr=True)

ApiUrl = Annotated[str, typer.Option("--api-url", envvar="RAG_API_URL", help="base URL of knowledge_service")]
Token = Annotated[str, typer.Option(
    "--token", help="API token; '-' reads standard input. Visible in ps: prefer RAG_TOKEN, --token-file or "
    "--token-stdin", show_default=False)]
AsJson = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]
DEFAULT_API = "http://127.0.0.1:8000"


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run an operator use case; an unreachable database or broker is an error message, exit 1."""
    try:
        return asyncio.run(coro)
    except (OSError, asyncpg.PostgresError, TransientError) as exc:
        _fail(f"{type(exc).__name__}: {exc} (check DATABASE_URL / AMQP_URL in .env or the environment)")


def _run_sync(call: Callable[[], T]) -> T:
    """:func:`_run` for a call that runs its own event loop."""
    try:
        return call()
    except (OSError, asyncpg.PostgresError, TransientError) as exc:
        _fail(f"{type(exc).__name__}: {exc} (check DATABASE_URL in .env or the environment)")


def _print_json(value: Any) -> None:
    print(json.dumps(value, default=str, ensure_ascii=False))


def _fail(message: str, code: int = 1) -> NoReturn:
    print_error(err, message)
    raise typer.Exit(code)


def _client(api_url: str, token: str, token_file: Path | None = None, token_stdin: bool = False) -> ApiClient:
    try:
        token = read_token(token, token_file, token_stdin, warn=err)
    except TokenSourceError as exc:
        _fail(str(exc), 2)
    if not token:
        _fail("no API token: set RAG_TOKEN, or pass --token-file FILE or --token-stdin", 2)
    return ApiClient.connect(api_url, token)


# ------------------------------------------------------------------ users, tokens, KBs (database)


@app.command("create-user")
def create_user(name: Annotated[str, typer.Argument(help="user name (an existing user gets another token)")]) -> None:
    """Create a user and a token; prints JSON {"user_id", "token"} (the token is shown once)."""
    _print_json(_run(admin.create_user(KnowledgeSettings(), name)))


@app.command("create-token")
def create_token(user: Annotated[str, typer.Argument(help="user name")]) -> None:
    """Give an existing user a new token; prints JSON {"user_id", "token_id", "token"}."""
    try:
        _print_json(_run(admin.create_token(KnowledgeSettings(), user)))
    except admin.NotFoundError as exc:
        _fail(str(exc))


@app.command("list-tokens")
def list_tokens(
    user: Annotated[str | None, typer.Option("--user", help="only this user's tokens")] = None,
    as_json: AsJson = False,
) -> None:
    """List tokens: id, user, fingerprint (first 8 hex digits of the SHA-256), created, revoked."""
    rows = _run(admin.list_tokens(KnowledgeSettings(), user))
    if as_json:
        for r in rows:
            _print_json(r)
        return
    table = Table("id", "user", "fingerprint", "created", "revoked")
    for r in rows:
        table.add_row(str(r["id"]), plain(r["user"]), r["fingerprint"], f"{r['create_time']:%Y-%m-%d %H:%M}",
                      "" if r["revoked_at"] is None else f"{r['revoked_at']:%Y-%m-%d %H:%M}")
    out.print(table)


@app.command("revoke-token")
def revoke_token(
    token: Annotated[str | None, typer.Argument(help="'-': read the token from standard input")] = None,
    token_file: TokenFile = None,
    token_stdin: TokenStdin = False,
    token_id: Annotated[int | None, typer.Option("--id", help="or its id (rag list-tokens)")] = None,
) -> None:
    """Revoke a token, read from standard input (``-`` or ``--token-stdin``) or a file
    (``--token-file``), or given by ``--id``; prints JSON {"revoked": bool}; exit 1 if unknown or
    already revoked. The token itself is never taken from the command line (visible in ps)."""
    if token not in (None, "-"):
        _fail("the token is not taken from the command line: pipe it ('rag revoke-token -') or use --token-file", 2)
    from_secret = token == "-" or token_stdin or token_file is not None
    if from_secret == (token_id is not None):
        _fail("give either the token (-, --token-stdin or --token-file) or --id", 2)
    if from_secret:
        try:
            token = read_token(token or "", token_file, token_stdin)
        except TokenSourceError as exc:
            _fail(str(exc), 2)
    ok = _run(admin.revoke_token(KnowledgeSettings(), token, token_id))
    _print_json({"revoked": ok})
    if not ok:
        raise typer.Exit(1)


@app.command("create-kb")
def create_kb(
    name: Annotated[str, typer.Argument(help="knowledge base name")],
    user: Annotated[str, typer.Option("--user", help="owner (user name)")],
) -> None:
    """Create a knowledge base for a user; prints JSON {"kb_id", "name", ...}."""
    if not name.strip():
        _fail("the name must not be blank", 2)
    try:
        _print_json(_run(admin.create_kb(KnowledgeSettings(), user, name)))
    except admin.NotFoundError as exc:
        _fail(str(exc))


# ------------------------------------------------------------------ documents (HTTP API)


@app.command()
def upload(
    path: Annotated[Path, typer.Argument(help="a file, or a folder (its files, recursively; hidden ones skipped)")],
    kb: Annotated[int, typer.Option("--kb", help="knowledge base id", min=1)],
    api_url: ApiUrl = DEFAULT_API,
    token: Token = "",
    token_file: TokenFile = None,
    token_stdin: TokenStdin = False,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="follow the tasks until they end")] = True,
    poll: Annotated[float, typer.Option("--poll", help="seconds between status checks", min=0.1)] = 1.0,
    allow_duplicate: Annotated[bool, typer.Option(
        "--allow-duplicate", help="index a file even when the KB already holds the same bytes")] = False,
) -> None:
    """Upload files with a progress bar, following their tasks to the end.

    A file whose bytes the KB already holds is not indexed again: its row names that document
    ("duplicate of document N"); ``--allow-duplicate`` makes a new document anyway.

    A 429 (per-user in-flight cap) pauses for its Retry-After and continues. Exit 1 if a file
    was refused or a document did not index.
    """
    try:
        files = collect_files(path)
    except FileNotFoundError as exc:
        _fail(str(exc), 2)
    if path.is_dir():  # a file named on its own is sent as it is: the API answers for it
        files, skipped = split_supported(files)
        for p, reason in skipped:
            err.print(f"skipped {p}: {reason}", highlight=False, markup=False, soft_wrap=True)
    if not files:
        _fail(f"no files under {path}", 2)
    client = _client(api_url, token, token_file, token_stdin)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=False) as progress:
        sent = progress.add_task("uploaded", total=len(files))
        done = progress.add_task("indexed ", total=len(files), visible=wait)

        def on_event(kind: str, run: UploadRun) -> None:
            progress.update(sent, completed=run.uploaded + sum(1 for i in run.items if i.status == "REFUSED"),
                            description="uploaded")
            progress.update(done, completed=run.finished)
            if kind == "waiting":
                progress.update(sent, description=f"uploaded (429: waiting {run.waits[-1]:g} s)")
                err.print(f"429 too many tasks in flight: waiting {run.waits[-1]:g} s (Retry-After)", highlight=False)

        items = UploadRun.of(client, kb, files, poll_s=poll, follow=wait, on_event=on_event,
                             allow_duplicate=allow_duplicate).run()
    table = Table("file", "document", "task", "status", "error / note")
    for i in items:
        style = "green" if i.status == "SUCCESS" else ("red" if i.done else "")
        note = i.error or (f"duplicate of document {i.duplicate_of}: same bytes already in this KB, nothing new "
                           "indexed (--allow-duplicate to index it again)" if i.duplicate_of is not None else "")
        table.add_row(plain(i.path), str(i.document_id or ""), str(i.task_id or ""), styled(i.status, style),
                      plain(note))
    out.print(table)
    bad = [i for i in items if i.status == "REFUSED" or (wait and i.status != "SUCCESS")]
    if bad:
        raise typer.Exit(1)


@app.command()
def status(
    document: Annotated[int | None, typer.Argument(help="document id")] = None,
    task: Annotated[int | None, typer.Option("--task", help="a task id instead")] = None,
    kb: Annotated[int | None, typer.Option("--kb", help="every document of a knowledge base")] = None,
    api_url: ApiUrl = DEFAULT_API,
    token: Token = "",
    token_file: TokenFile = None,
    token_stdin: TokenStdin = False,
    as_json: AsJson = False,
) -> None:
    """Status of a document, a task, or every document of a knowledge base."""
    if sum(x is not None for x in (document, task, kb)) != 1:
        _fail("give exactly one of DOCUMENT, --task or --kb", 2)
    client = _client(api_url, token, token_file, token_stdin)
    try:
        tasks = [client.task(task)] if task is not None else []
        docs = client.documents(kb) if kb is not None else []
        if document is not None:
            docs = [client.document(document)]
    except (ApiError, TooManyRequests, httpx.HTTPError) as exc:
        _fail(str(exc))
    if as_json:
        for x in docs or tasks:
            _print_json(x)
        return
    table = Table("document", "file", "status", "task", "task status", "attempt", "chunks", "error")
    for d in docs:
        t = d.get("task") or {}
        table.add_row(str(d["document_id"]), plain(file_label(d)), plain(d["status"]), str(t.get("task_id", "")),
                      plain(t.get("status", "")), str(t.get("attempt", "")), str(d["chunk_count"]),
                      plain(f"{t.get('error_code') or ''} {d.get('error_message') or ''}".strip()))
    for t in tasks:
        table.add_row(str(t["document_id"]), "", "", str(t["task_id"]), plain(t["status"]), str(t["attempt"]), "",
                      plain(f"{t.get('error_code') or ''} {t.get('error_message') or ''}".strip()))
    out.print(table)


def file_label(d: dict[str, Any]) -> str:
    """A document's file name, with the archive it came from or how many members it became."""
    origin = d.get("origin")
    if origin:
        return f"{d['filename']} (from {origin['filename']}, document {origin['document_id']})"
    members = d.get("members") or 0
    return f"{d['filename']} (archive: {members} member documents)" if members else str(d["filename"])


@app.command()
def search(
    kb: Annotated[int, typer.Argument(help="knowledge base id", min=1)],
    query: Annotated[str, typer.Argument(help="what to look for")],
    mode: Annotated[str, typer.Option("--mode", help="hybrid, vector or keyword")] = "hybrid",
    top_k: Annotated[int, typer.Option("--top-k", help="hits to show", min=1)] = 5,
    api_url: ApiUrl = DEFAULT_API,
    token: Token = "",
    token_file: TokenFile = None,
    token_stdin: TokenStdin = False,
    as_json: AsJson = False,
) -> None:
    """Search a knowledge base. Search shows one hit per text; "also in" names every other document and
    chunk holding the same text."""
    client = _client(api_url, token, token_file, token_stdin)
    try:
        hits = client.search(kb, query, mode, top_k)
    except (ApiError, TooManyRequests, httpx.HTTPError) as exc:
        _fail(str(exc))
    if as_json:
        _print_json(hits)
        return
    table = Table("score", "document", "file", "chunk", "where", "text", "also in")
    for h in hits:
        where = " · ".join(str(x) for x in (f"p. {h['page']}" if h.get("page") else "", h.get("section") or "") if x)
        table.add_row(f"{h['score']:.4f}", str(h["document_id"]), plain(h["filename"]), str(h["chunk_index"]),
                      plain(where), plain(_excerpt(h["content"])), plain(also_in_text(h)))
    out.print(table)


def _excerpt(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def also_in_text(hit: dict[str, Any]) -> str:
    """The other chunks holding a hit's text: "minutes.docx #3 (doc 12); notes.txt #0 (doc 14) and 5 more"."""
    copies = hit.get("also_in") or []
    listed = "; ".join(f"{c['filename']} #{c['chunk_index']} (doc {c['document_id']})" for c in copies)
    more = int(hit.get("also_in_total") or 0) - len(copies)
    return f"{listed} and {more:,} more" if more > 0 else listed


@app.command()
def retry(
    task: Annotated[int, typer.Argument(help="task id (FAILED or TIMEOUT)", min=1)],
    force: Annotated[bool, typer.Option("--force", help="past max_retry_count")] = False,
    generation: Annotated[int | None, typer.Option(
        "--generation", help="the generation you saw: refused (409) if the task was re-armed since", min=1)] = None,
    api_url: ApiUrl = DEFAULT_API,
    token: Token = "",
    token_file: TokenFile = None,
    token_stdin: TokenStdin = False,
) -> None:
    """Retry a FAILED or TIMEOUT task (a new generation); prints the task as JSON."""
    try:
        _print_json(_client(api_url, token, token_file, token_stdin).retry(task, force, generation))
    except TooManyRequests as exc:
        _fail(f"too many tasks in flight; try again in {exc.retry_after_s:g} s")
    except (ApiError, httpx.HTTPError) as exc:
        _fail(str(exc))


@app.command()
def reindex(
    document: Annotated[int | None, typer.Argument(help="document id")] = None,
    kb: Annotated[int | None, typer.Option("--kb", help="every document of a knowledge base")] = None,
    force: Annotated[bool, typer.Option("--force", help="even if indexed or in flight")] = False,
    api_url: ApiUrl = DEFAULT_API,
    token: Token = "",
    token_file: TokenFile = None,
    token_stdin: TokenStdin = False,
) -> None:
    """Re-index a document or a whole knowledge base; prints one JSON line per document
    ({"document_id", "action", "reason"}). A 429 waits for its Retry-After."""
    if (document is None) == (kb is None):
        _fail("give either DOCUMENT or --kb", 2)
    client = _client(api_url, token, token_file, token_stdin)
    try:
        if document is not None:
            ids = [document]
        else:
            assert kb is not None  # checked above: exactly one of the two
            ids = [int(d["document_id"]) for d in client.documents(kb)]
        for doc_id in ids:
            _print_json(_reindex_one(client, doc_id, force))
    except (ApiError, httpx.HTTPError) as exc:
        _fail(str(exc))


def _reindex_one(client: ApiClient, document_id: int, force: bool) -> dict[str, Any]:
    while True:
        try:
            r = client.reindex(document_id, force)
        except TooManyRequests as exc:
            err.print(f"429 too many tasks in flight: waiting {exc.retry_after_s:g} s (Retry-After)")
            time.sleep(exc.retry_after_s)
            continue
        return {"document_id": document_id, "action": r["action"], "reason": r["reason"]}


# ------------------------------------------------------------------ knowledge-base lifecycle (HTTP API)

kb_app = typer.Typer(help="Knowledge bases through the API: rename, delete.", no_args_is_help=True)
app.add_typer(kb_app, name="kb")


@kb_app.command("rename")
def kb_rename(
    kb: Annotated[int, typer.Argument(help="knowledge base id", min=1)],
    name: Annotated[str, typer.Argument(help="the new name")],
    api_url: ApiUrl = DEFAULT_API,
    token: Token = "",
    token_file: TokenFile = None,
    token_stdin: TokenStdin = False,
) -> None:
    """Rename a knowledge base; prints it as JSON."""
    client = _client(api_url, token, token_file, token_stdin)
    try:
        _print_json(client.rename_kb(kb, name))
    except (ApiError, TooManyRequests, httpx.HTTPError) as exc:
        _fail(str(exc))


@kb_app.command("delete")
def kb_delete(
    kb: Annotated[int, typer.Argument(help="knowledge base id", min=1)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    api_url: ApiUrl = DEFAULT_API,
    token: Token = "",
    token_file: TokenFile = None,
    token_stdin: TokenStdin = False,
) -> None:
    """Delete a knowledge base with all its documents, chunks, vectors and stored files, also
    while documents are indexing. Asks first unless --yes; a knowledge base already deleted (or
    not yours) is an error (404)."""
    if (token_stdin or token == "-") and not yes:
        _fail("the token comes from standard input: confirm with --yes", 2)
    client = _client(api_url, token, token_file, token_stdin)
    if not yes and not typer.confirm(f"Delete knowledge base {kb} and every document in it?", default=False):
        _fail("not deleted", 1)
    try:
        client.delete_kb(kb)
    except (ApiError, TooManyRequests, httpx.HTTPError) as exc:
        _fail(str(exc))
    _print_json({"kb_id": kb, "deleted": True})


# ------------------------------------------------------------------ recovery (database + broker)


@app.command("requeue-stuck")
def requeue_stuck(
    waiting_after: Annotated[float | None, typer.Option(
        "--waiting-after", help="re-publish WAITING/RETRYING tasks untouched this many seconds "
        "(default REQUEUE_AFTER_S)", min=0)] = None,
    running_after: Annotated[float | None, typer.Option(
        "--running-after", help="time out RUNNING tasks without heartbeat this many seconds "
        "(default RUNNING_HEARTBEAT_TIMEOUT_S)", min=0)] = None,
) -> None:
    """One recovery pass now: stuck RUNNING → TIMEOUT (then `rag retry`), forgotten WAITING →
    re-published, rag.index.dlq → dead letters. Prints JSON."""
    _print_json(_run(admin.requeue_stuck(waiting_after, running_after)))


@dlq_app.command("list")
def dlq_list(
    include_replayed: Annotated[bool, typer.Option("--all", help="include replayed ones")] = False,
    as_json: AsJson = False,
) -> None:
    """Dead letters not yet replayed: id, task, document, generation, reason, time."""
    rows = _run(admin.dlq_list(include_replayed))
    if as_json:
        for r in rows:
            _print_json(r)
        return
    table = Table("id", "task", "document", "generation", "reason", "created", "replayed")
    for r in rows:
        table.add_row(*(plain(r[k]) for k in
                        ("id", "task_id", "document_id", "generation", "reason", "create_time", "replayed_at")))
    out.print(table)


@dlq_app.command("replay")
def dlq_replay(dead_letter_id: Annotated[int, typer.Argument(help="dead letter id (rag dlq list)", min=1)]) -> None:
    """Re-run a dead letter's task after a fix: a forced retry (new generation, new message)."""
    result = _run(admin.dlq_replay(dead_letter_id))
    _print_json(result)
    if not result["replayed"]:
        raise typer.Exit(1)


Once = Annotated[bool, typer.Option("--once", help="run one pass now and exit (required: the worker runs the "
                                                    "job periodically)")]


def _ops_command(run: Callable[[], Coroutine[Any, Any, Report]]) -> Callable[[bool], None]:
    def command(once: Once = False) -> None:
        if not once:
            _fail("give --once (the worker runs this job periodically by itself)", 2)
        _print_json(_run(run()))

    command.__doc__ = run.__doc__
    return command


for _name, _run_job in OPS.items():
    ops_app.command(_name)(_ops_command(_run_job))


# ------------------------------------------------------------------ install steps


@app.command()
def migrate(
    target: Annotated[int | None, typer.Option("--target", help="apply migrations up to this version only",
                                               min=1)] = None,
) -> None:
    """Create the database if missing and apply the pending sql/ migrations (forward-only); refuses,
    exit 1, when an applied migration's file was edited since (checksums)."""
    from shared.adapters.postgres.migrate import run
    from shared.domain.errors import ConfigurationError

    try:
        applied = _run_sync(lambda: run(target))
    except ConfigurationError as exc:
        _fail(str(exc))
    print(f"migrations applied: {applied or 'none (up to date)'}")


@app.command(name="build-model", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def build_model(ctx: typer.Context) -> None:
    """Build the embedding model's fused ONNX graph unless a current one exists (EMBEDDING_RUNTIME=onnx;
    needs torch: the build step). Its options pass to the builder: --force rebuilds."""
    from shared.adapters.embedding import onnx_graph

    raise typer.Exit(onnx_graph.main(list(ctx.args)))


# ------------------------------------------------------------------ services


@app.command()
def worker(
    metrics_port: Annotated[int | None, typer.Option(
        "--metrics-port", help="serve /metrics on this port (WORKER_METRICS_PORT; 0: off)", min=0, max=65535)] = None,
) -> None:
    """Start one indexing worker (task_service); SIGTERM stops it within 10 s."""
    from task_service.__main__ import worker as start  # lazy: the worker's imports are heavy

    start(metrics_port)


@app.command()
def api(
    host: Annotated[str | None, typer.Option("--host", help="listen address (KS_HOST)")] = None,
    port: Annotated[int | None, typer.Option("--port", help="listen port (KS_PORT)", min=1, max=65535)] = None,
) -> None:
    """Start the HTTP API (knowledge_service); /metrics, /docs, /api/v1."""
    from knowledge_service.__main__ import api as start

    start(host, port)


def main() -> None:
    """Entry point of ``rag`` and ``python -m rag_cli``."""
    app(prog_name="rag")
