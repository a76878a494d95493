"""The worker's indexing: one delivery of ``rag.index.queue`` to its outcome.

``delivery`` (decode, skip, lock, claim, run under the lease and the time limit, finish →
``Outcome``) → a claimed unit of work (``unit.ClaimedUnit``): ``document`` (download → extract
→ model turn → the one fenced commit). Beside them: ``retrying`` (the ports, each call retried
on transient failures), ``embedding`` (the model step in the worker's ``model_turn``),
``cache`` + ``embedding_cache`` (the embedding cache: I/O, pure plan), ``extraction`` (parse +
chunk off the loop, cancellable), ``lease`` (lock + heartbeat watchdog), ``progress`` (stages,
write throttle, pure), ``skips`` (batched ``delivery_skip`` rows), ``config``.
"""
