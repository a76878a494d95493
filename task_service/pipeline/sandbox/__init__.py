"""Run ``extract`` (parse + chunk) in a resource-limited child process that survives from one
document to the next; a document that blows a limit fails with ``parse_limit`` and the worker
goes on.

Shape: one long-lived child per worker, a fresh interpreter started with ``subprocess``
(``python -c "from task_service.pipeline.sandbox.child import child_main; child_main()" FD``: nothing
of the worker's threads, event loop, sockets or pools is inherited, and unlike
``multiprocessing``'s spawn/forkserver it never re-imports the parent's ``__main__`` and starts
no resource-tracker process), serving requests over a socketpair wrapped in a
``multiprocessing.connection.Connection``. Importing unstructured + spaCy and warming them
takes ≈3-4 s, so the child does it once (``ensure_parsers_ready``, and the MiniLM tokenizer for
the chunker, built from the ``ChunkSettings`` sent with the limits) and then extracts any number
of documents. Chunking runs here too (it was a worker thread: a 2.9 MB Markdown table kept one
burning CPU after its task's TIMEOUT), so the limits below cover parsing and chunking together.
It is replaced only after a limit hit, a crash or memory growth. ``start()`` does not wait for
the warm-up: it overlaps the rest of the worker's start-up (tokenizer, model, migrations,
connections), and the first document waits for it (``start_timeout_s``) if needed.

Limits, all in the child only (the worker process itself is never limited):

- **Memory**: ``RLIMIT_AS`` = ``memory_bytes`` (default 2 GiB), set after the warm-up (the warm
  child maps ≈0.9 GiB of address space, 0.4 GiB resident). Python code gets ``MemoryError``;
  C code gets a failed allocation; PDFium then aborts the process (SIGABRT: a 1.5 MB PDF whose
  content stream inflates to 1.5 GiB does exactly that). ``RLIMIT_CORE`` = 0 so such a death
  never writes a 2 GiB core file.
- **CPU**: ``RLIMIT_CPU`` is cumulative over the process's life, and the child is long-lived.
  Choice: *per-request accounting by the kernel* — before each document the child re-arms the
  soft limit to ``ceil(CPU used so far) + cpu_s`` (the hard limit stays where it was, so the
  soft limit can move up again next time without privileges). A document that burns
  ``cpu_s`` CPU seconds (±1 s, the limit's granularity) gets SIGXCPU, whose default action
  kills the child; an idle child burns nothing, so the budget is exactly per document. This
  needs no recycling and no polling thread.
- **Wall clock**: the worker waits ``timeout_s`` (default 180 s) for the answer, then SIGKILLs
  the child (covers a parser blocked on I/O or starved of CPU on a busy machine).
- **Network**: the child needs none (models come from installed packages) and a Python audit
  hook makes any outbound socket / DNS call fail at once with ``PermissionError`` (defence in
  depth against a library that tries to download something; not a security boundary: code in
  C could still open sockets).

Outcomes, as the handler sees them (``self._parse(data, filename, token)`` in ``asyncio.to_thread``):

- the ``Extraction`` (chunks + warnings), or the ``IndexingError`` raised in the child, rebuilt from
  ``(class name, error_code, message)`` (exceptions are never pickled across);
- ``ParseLimitError`` (``parse_limit``, permanent) for a ``MemoryError`` in the child, a child
  killed by a signal (SIGXCPU → CPU limit; others, usually SIGABRT/SIGSEGV from a failed
  allocation in C → memory limit "or crashed"), or the wall-clock timeout; the child is then
  replaced at once (the new one warms while the task is being marked FAILED);
- ``ParserUnavailableError`` (``parser_unavailable``) when no child can be started;
- ``ExtractionCancelled`` after ``cancel(token)`` (the task timed out or was cancelled, the worker
  is shutting down): the child doing that request is SIGKILLed at once and replaced.

Threads: the handler may call the parser from several threads (prefetch > 1); requests are
serialized by a lock, one document at a time in the one child (PDFium is single-threaded
anyway and parsing is CPU-bound on a 2-core machine); a pool of children would multiply the
≈0.4 GiB resident per child.

Modules: ``limits.py`` (:class:`SandboxLimits`), ``parent.py`` (:class:`SandboxedParser`, the
worker's side), ``child.py`` (the child process), ``in_process.py`` (:class:`InProcessParser`
and :func:`build_parser` of a :class:`ParserConfig`, the choice between them).
"""

from __future__ import annotations

from task_service.pipeline.sandbox.in_process import InProcessParser, ParserConfig, build_parser
from task_service.pipeline.sandbox.limits import SandboxLimits
from task_service.pipeline.sandbox.parent import SandboxedParser

__all__ = ["InProcessParser", "ParserConfig", "SandboxLimits", "SandboxedParser", "build_parser"]
