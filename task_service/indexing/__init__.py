"""The worker's indexing: one delivery of ``rag.index.queue`` to its outcome.

``delivery`` (decode, skip, lock, claim, run under the lease and the unit's budget, finish →
``Outcome``; the unit picked by ``message.part``) → a claimed unit of work
(``unit.ClaimedUnit``): ``document`` (download → extract → model turn → the one fenced commit,
or the split of a big document) or ``part`` (one part of a split: staged chunks → model turn →
stage commit, the last one swaps). Beside them: ``wiring`` (what the units run with, the part
publisher), ``retrying`` (the ports, each call retried on transient failures), ``embedding``
(the model step in the worker's ``model_turn``, with the stall timeout),
``cache`` + ``embedding_cache`` (the embedding cache: I/O, pure plan), ``extraction`` (parse +
chunk off the loop, cancellable), ``lease`` (lock + heartbeat watchdog), ``progress`` (stages,
write throttle, pure), ``skips`` (batched ``delivery_skip`` rows), ``config``.
"""
