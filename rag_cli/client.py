"""The HTTP side of the ``rag`` CLI: a small API client that honours 429 ``Retry-After``, and the
folder upload that follows its tasks to the end.

Pure parts (``retry_after_seconds``, ``collect_files``, ``split_supported``, ``UploadRun``) are unit-tested; the
client takes an ``httpx.Client`` and a ``sleep`` so tests can drive it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx

from shared.domain.formats import skip_reason

TERMINAL = frozenset({"SUCCESS", "FAILED", "TIMEOUT"})
#: Longest wait honoured from one Retry-After, seconds (a wrong header must not hang the CLI).
MAX_RETRY_AFTER_S = 300.0
DEFAULT_RETRY_AFTER_S = 5.0


class ApiError(Exception):
    """A refusal from the API: ``status`` (HTTP code) and ``detail`` (its message)."""

    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class TooManyRequests(Exception):
    """429: try again after ``retry_after_s`` seconds."""

    retry_after_s: float


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date), clamped to
    0..MAX_RETRY_AFTER_S; DEFAULT_RETRY_AFTER_S when absent or unreadable."""
    if not value:
        return DEFAULT_RETRY_AFTER_S
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return DEFAULT_RETRY_AFTER_S
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds:  # NaN
        return DEFAULT_RETRY_AFTER_S
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def collect_files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else the regular files under it (recursively, sorted),
    skipping hidden files and folders (``.git``, ``.DS_Store``). Raises FileNotFoundError."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"no such file or folder: {path}")
    return sorted(
        p for p in path.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )


def split_supported(paths: Iterable[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
    """``(files to send, [(file, why it is skipped)])``: a file whose extension no accepted
    format has (``shared.domain.formats``) is skipped; one without an extension is sent (the
    API types it by content)."""
    send: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    for p in paths:
        reason = skip_reason(p.name)
        if reason is None:
            send.append(p)
        else:
            skipped.append((p, reason))
    return send, skipped


def _detail(r: httpx.Response) -> Any:
    try:
        body = r.json()
    except ValueError:
        return r.text[:500]
    return body.get("detail", body) if isinstance(body, dict) else body


class ApiClient:
    """The API as one user (``Authorization: Bearer <token>``)."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    @classmethod
    def connect(cls, url: str, token: str, timeout_s: float = 120.0) -> ApiClient:
        return cls(httpx.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"},
                                timeout=timeout_s))

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        """JSON of a 2xx answer; raises TooManyRequests on 429, ApiError otherwise."""
        r = self.http.request(method, path, **kw)
        if r.status_code == 429:
            raise TooManyRequests(retry_after_seconds(r.headers.get("Retry-After")))
        if r.status_code >= 400:
            raise ApiError(r.status_code, _detail(r))
        return r.json() if r.content else None

    def upload(self, kb_id: int, path: Path, allow_duplicate: bool = False) -> dict[str, Any]:
        """POST the file (streamed from disk); body ``{document_id, task_id, ...}`` (202), or the
        KB's document with the same bytes (200, ``duplicate_of``)."""
        with path.open("rb") as f:
            out: dict[str, Any] = self._call(
                "POST", f"/api/v1/knowledge-bases/{kb_id}/documents",
                params={"allow_duplicate": "true"} if allow_duplicate else None,
                files={"file": (path.name, f, "application/octet-stream")})
        return out

    def search(self, kb_id: int, query: str, mode: str = "hybrid", top_k: int = 5) -> list[dict[str, Any]]:
        """The hits of a search (``SearchHit``: content, score, ``also_in``...), best first."""
        body = {"query": query, "mode": mode, "top_k": top_k}
        out: dict[str, Any] = self._call("POST", f"/api/v1/knowledge-bases/{kb_id}/search", json=body)
        hits: list[dict[str, Any]] = out["results"]
        return hits

    def task(self, task_id: int) -> dict[str, Any]:
        out: dict[str, Any] = self._call("GET", f"/api/v1/tasks/{task_id}")
        return out

    def document(self, document_id: int) -> dict[str, Any]:
        out: dict[str, Any] = self._call("GET", f"/api/v1/documents/{document_id}")
        return out

    def documents(self, kb_id: int, status: str | None = None, page: int = 500) -> list[dict[str, Any]]:
        """Every document of the knowledge base (``status`` only), fetched ``page`` at a time."""
        items: list[dict[str, Any]] = []
        while True:
            params: dict[str, Any] = {"offset": len(items), "limit": page}
            if status is not None:
                params["status"] = status
            body = self._call("GET", f"/api/v1/knowledge-bases/{kb_id}/documents", params=params)
            items += body["items"]
            # no "total": an API from before paging, which answered every document at once
            if not body["items"] or len(items) >= body.get("total", len(items)):
                return items

    def rename_kb(self, kb_id: int, name: str) -> dict[str, Any]:
        out: dict[str, Any] = self._call("PATCH", f"/api/v1/knowledge-bases/{kb_id}", json={"name": name})
        return out

    def delete_kb(self, kb_id: int) -> None:
        """Delete the knowledge base with everything in it (ApiError 404: none of yours, or already gone)."""
        self._call("DELETE", f"/api/v1/knowledge-bases/{kb_id}")

    def retry(self, task_id: int, force: bool, generation: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"force": force}
        if generation is not None:
            body["generation"] = generation
        out: dict[str, Any] = self._call("POST", f"/api/v1/tasks/{task_id}/retry", json=body)
        return out

    def reindex(self, document_id: int, force: bool) -> dict[str, Any]:
        out: dict[str, Any] = self._call("POST", f"/api/v1/documents/{document_id}/reindex", json={"force": force})
        return out


@dataclass
class Item:
    """One file of an upload run: its task once accepted, its final status or refusal."""

    path: Path
    document_id: int | None = None
    task_id: int | None = None
    status: str = "PENDING"  # PENDING, then the task's status, or REFUSED
    error: str | None = None
    #: the KB already held these bytes (200 ``duplicate_of``): nothing new was created; the
    #: item follows that document's task
    duplicate_of: int | None = None

    @property
    def done(self) -> bool:
        return self.status in TERMINAL or self.status == "REFUSED"


Listener = Callable[[str, "UploadRun"], None]


@dataclass
class UploadRun:
    """Uploads files one by one and follows their tasks until every one is terminal.

    A 429 pauses the uploads for its ``Retry-After`` while the accepted tasks keep being
    followed (their completion is what frees the per-user in-flight slots). ``on_event(kind,
    run)`` is called with ``uploaded``, ``refused``, ``waiting`` (429), ``finished``.
    """

    client: ApiClient
    kb_id: int
    items: list[Item]
    poll_s: float = 1.0
    follow: bool = True
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    on_event: Listener = lambda kind, run: None
    waits: list[float] = field(default_factory=list)  # each 429's Retry-After, seconds
    allow_duplicate: bool = False  # a file the KB already holds makes a new document anyway

    @classmethod
    def of(cls, client: ApiClient, kb_id: int, paths: Iterable[Path], **kw: Any) -> UploadRun:
        return cls(client, kb_id, [Item(p) for p in paths], **kw)

    def run(self) -> list[Item]:
        pending = deque(self.items)
        not_before = 0.0
        while pending or (self.follow and self._active()):
            if pending and self.clock() >= not_before:
                not_before = self._upload_some(pending)
            if self.follow:
                self._poll()
            if pending or (self.follow and self._active()):
                self.sleep(self._pause(not_before, pending))
        return self.items

    def _pause(self, not_before: float, pending: deque[Item]) -> float:
        if pending and not (self.follow and self._active()):
            return max(0.0, not_before - self.clock())
        if pending:
            return max(0.0, min(self.poll_s, not_before - self.clock()))
        return self.poll_s

    def _active(self) -> list[Item]:
        return [i for i in self.items if i.task_id is not None and not i.done]

    def _upload_some(self, pending: deque[Item]) -> float:
        """Upload until a 429 (returns when to try again) or no file is left (returns 0)."""
        while pending:
            item = pending[0]
            try:
                accepted = self.client.upload(self.kb_id, item.path, self.allow_duplicate)
            except TooManyRequests as exc:
                self.waits.append(exc.retry_after_s)
                self.on_event("waiting", self)
                return self.clock() + exc.retry_after_s
            except (ApiError, OSError, httpx.HTTPError) as exc:
                pending.popleft()
                item.status, item.error = "REFUSED", str(exc)
                self.on_event("refused", self)
                continue
            pending.popleft()
            item.document_id, item.task_id = int(accepted["document_id"]), int(accepted["task_id"])
            item.status = str(accepted.get("task_status", "WAITING"))
            if accepted.get("duplicate_of") is not None:
                item.duplicate_of = int(accepted["duplicate_of"])
            self.on_event("uploaded", self)
        return 0.0

    def _poll(self) -> None:
        for item in self._active():
            assert item.task_id is not None
            try:
                task = self.client.task(item.task_id)
            except (ApiError, TooManyRequests, httpx.HTTPError):
                continue  # asked again next round
            item.status = str(task["status"])
            if item.done:
                if item.status != "SUCCESS":
                    item.error = f"{task.get('error_code')}: {task.get('error_message')}"
                self.on_event("finished", self)

    @property
    def uploaded(self) -> int:
        return sum(1 for i in self.items if i.task_id is not None)

    @property
    def finished(self) -> int:
        return sum(1 for i in self.items if i.done)
