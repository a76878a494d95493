"""AMQP consumer: turns handler outcomes into ack / reject / delayed re-publish, and reconnects.

Uses a plain (non-robust) connection and owns the reconnect loop: when the broker closes the
channel or connection (restart, consumer_timeout, closed from the management console) the loop
declares the topology and subscribes again, so the process never lives on with zero consumers
(aio-pika #231, #334). Unacked deliveries of the old channel are requeued by the broker; acking
them on the dead channel raises and is ignored (the fence makes the redelivery harmless).

Stopping (SIGTERM/SIGINT sets ``stop``): the consumer is cancelled and in-flight work is
abandoned, not drained — a document can take minutes, longer than any orchestrator waits. The
handler tasks are cancelled (their sandbox children killed, their document locks released), the
connection closes, and the broker requeues the unacked deliveries for the next worker, whose
claim (attempt + 1) fences out anything the abandoned run could still do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from shared.adapters import rabbitmq
from shared.domain import messages
from shared.domain.errors import BrokerUnavailableError, DeliveryLimitError
from shared.domain.messages import IndexMessage, InvalidMessageError
from shared.log import bind
from shared.settings import WorkerSettings
from task_service import APP_ID
from task_service.indexing.delivery import IndexHandler, Outcome, decode

log = logging.getLogger(__name__)

DELAY_HEADER = "x-rag-delay-attempts"
CARRIED_HEADER = messages.CARRIED_HEADER
DEAD_REASON_HEADER = messages.DEAD_REASON_HEADER

OnConnected = Callable[[AbstractConnection], Awaitable[None]]


def _int_header(message: AbstractIncomingMessage, name: str) -> int:
    raw = (message.headers or {}).get(name, 0)
    try:
        return max(0, int(raw))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0


DELAY_BASE_HEADER = "x-rag-delay-base"


def delay_attempts(message: AbstractIncomingMessage) -> int:
    """Consecutive lock-held round trips. A failed delivery since the last one (a worker crashed
    holding the lock) starts the count again: the lock was held by a dead worker, not a live one."""
    if _int_header(message, DELAY_BASE_HEADER) != failed_deliveries(message):
        return 0
    return _int_header(message, DELAY_HEADER)


def failed_deliveries(message: AbstractIncomingMessage) -> int:
    """Deliveries of this request that ended without a settle (worker crash), across re-publishes."""
    return _int_header(message, CARRIED_HEADER) + _int_header(message, "x-delivery-count")


@dataclass(frozen=True)
class ConsumerConfig:
    """The consumer's settings: the broker's (shared with every publisher) and the prefetch;
    built once by the composition root."""

    broker: rabbitmq.BrokerConfig
    prefetch: int

    @classmethod
    def from_settings(cls, s: WorkerSettings) -> ConsumerConfig:
        return cls(broker=rabbitmq.BrokerConfig.from_settings(s), prefetch=s.prefetch)


class Consumer:
    """Consumes ``rag.index.queue`` with manual ack and ``config.prefetch``."""

    def __init__(self, config: ConsumerConfig, handler: IndexHandler, name: str) -> None:
        self._s = config
        self._handler = handler
        self._metrics = handler.metrics
        self._name = name
        self._delay_ms = config.broker.delay_ms
        self._in_flight: set[asyncio.Task[None]] = set()
        self.connected = asyncio.Event()

    async def run(self, stop: asyncio.Event, on_connected: OnConnected | None = None) -> None:
        """Consume until ``stop`` is set, reconnecting with backoff after any broker failure.

        Each reconnect tries every node ``AMQP_URL`` names (:func:`rabbitmq.connect`); the backoff
        (1 s doubling to 30 s) grows only while no node can be reached: a session that was
        consuming when it ended (its node stopped) reconnects after 1 s."""
        backoff = 1.0
        while not stop.is_set():
            try:
                await self._session(stop, on_connected)
            except (BrokerUnavailableError, ConnectionError, OSError, RuntimeError) as exc:
                log.warning("broker session ended, reconnecting", extra={"error": str(exc), "backoff_s": backoff})
            except Exception as exc:  # aio-pika raises a zoo of types on a dying connection
                log.warning("broker session failed, reconnecting", extra={"error": f"{type(exc).__name__}: {exc}"})
            if self.connected.is_set():
                backoff = 1.0
            self.connected.clear()
            if stop.is_set():
                break
            try:
                await asyncio.wait_for(stop.wait(), timeout=backoff)
            except TimeoutError:
                pass
            backoff = min(backoff * 2, 30.0)

    async def _session(self, stop: asyncio.Event, on_connected: OnConnected | None) -> None:
        conn = await rabbitmq.open_connection(self._s.broker, name=self._name)
        closed = asyncio.Event()
        conn.close_callbacks.add(lambda *_: closed.set())
        try:
            channel = await conn.channel()
            channel.close_callbacks.add(lambda *_: closed.set())
            await channel.set_qos(prefetch_count=self._s.prefetch)
            _, queue = await rabbitmq.declare_topology(channel, delay_ms=self._delay_ms)
            publisher = await rabbitmq.open_publisher(self._s.broker, conn, app_id=APP_ID,
                                                      on_failure=self._metrics.publish_failures.labels("consumer").inc)
            self._handler.attach_publisher(publisher)  # a split publishes its parts on this session

            async def on_message(message: AbstractIncomingMessage) -> None:
                # Our own task, not aio-pika's callback task: aio-pika cancels callbacks when the
                # channel closes, which would cut a handler off mid-write. The handler finishes;
                # only its ack is lost, and the redelivery is fenced.
                task = asyncio.create_task(self._process(message, publisher))
                self._in_flight.add(task)
                task.add_done_callback(self._in_flight.discard)

            tag = await queue.consume(on_message, no_ack=False)
            if on_connected is not None:
                await on_connected(conn)
            self.connected.set()
            log.info("consuming", extra={"queue": messages.QUEUE, "prefetch": self._s.prefetch})
            stopper = asyncio.ensure_future(stop.wait())
            closer = asyncio.ensure_future(closed.wait())
            try:
                while not (stop.is_set() or closed.is_set()):
                    await asyncio.wait({stopper, closer}, timeout=5, return_when=asyncio.FIRST_COMPLETED)
                    if not closed.is_set() and not await _still_subscribed(channel, tag):
                        # server-sent basic.cancel (queue deleted, node failover): the channel
                        # lives on with zero consumers unless we notice (aio-pika #231, #334)
                        raise BrokerUnavailableError("consumer cancelled by the broker")
            finally:
                stopper.cancel()
                closer.cancel()
            if stop.is_set() and not closed.is_set():
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(queue.cancel(tag), timeout=2)
                await self.abandon()
            else:
                raise BrokerUnavailableError("channel or connection closed by the broker")
        finally:
            if not conn.is_closed:
                await conn.close()

    async def abandon(self, timeout_s: float = 5.0) -> None:
        """Cancel the in-flight handler tasks and wait up to ``timeout_s`` seconds for them to
        unwind (kill their sandbox children, release their locks); their deliveries stay unacked."""
        tasks = set(self._in_flight)
        for task in tasks:
            task.cancel()
        if tasks:
            log.warning("abandoning in-flight deliveries", extra={"count": len(tasks)})
            await asyncio.wait(tasks, timeout=timeout_s)

    async def _process(self, message: AbstractIncomingMessage, publisher: rabbitmq.Publisher) -> None:
        """Settle one delivery; its log lines carry the message's task_id, document_id, generation."""
        msg = decode(message.body)
        with bind(**log_fields(msg)):
            await self._process_bound(message, msg, publisher)

    async def _process_bound(self, message: AbstractIncomingMessage, msg: IndexMessage | InvalidMessageError,
                             publisher: rabbitmq.Publisher) -> None:
        attempts = delay_attempts(message)
        if failed_deliveries(message) > messages.DELIVERY_LIMIT:
            self._metrics.deliveries.labels("dead_letter").inc()
            await self._dead_letter(message, publisher, DeliveryLimitError.error_code)
            return
        try:
            outcome = await self._handler.handle(msg, delay_attempts=attempts)
        except Exception:
            log.exception("handler crashed; delivery returned to the queue")
            self._metrics.deliveries.labels("requeue").inc()
            await _settle(message.nack(requeue=True))
            return
        self._metrics.deliveries.labels(outcome.value).inc()
        if outcome is Outcome.ACK:
            await _settle(message.ack())
        elif outcome is Outcome.REJECT:
            await _settle(message.reject(requeue=False))
        else:
            await self._delay(message, publisher, attempts)

    async def _dead_letter(self, message: AbstractIncomingMessage, publisher: rabbitmq.Publisher, reason: str) -> None:
        """Our own dead-lettering, for limits the broker cannot see (counts carried in headers)."""
        log.error("delivery limit reached across re-publishes; dead-lettering",
                  extra={"failed_deliveries": failed_deliveries(message)})
        if await _dead_letter_copy(message, publisher, reason):
            await _settle(message.ack())
        else:
            await _settle(message.reject(requeue=False))  # the broker dead-letters it (reason: rejected)

    async def _delay(self, message: AbstractIncomingMessage, publisher: rabbitmq.Publisher, attempts: int) -> None:
        headers: dict[str, Any] = dict(message.headers or {})
        headers[DELAY_HEADER] = attempts + 1
        headers[CARRIED_HEADER] = failed_deliveries(message)
        headers[DELAY_BASE_HEADER] = failed_deliveries(message)
        headers.pop("x-delivery-count", None)
        try:
            await publisher.publish(  # the delivery's body and properties as they came: nothing re-parsed
                message.body, exchange="", routing_key=messages.delay_queue_name(self._delay_ms),
                correlation_id=message.correlation_id, headers=headers,
            )
        except BrokerUnavailableError:
            log.warning("delay re-publish failed; returning delivery to the queue")
            await _settle(message.nack(requeue=True))
            return
        await _settle(message.ack())


def log_fields(msg: IndexMessage | InvalidMessageError) -> dict[str, int]:
    """``task_id``, ``document_id``, ``generation`` (and ``part``, for a part message) of an
    index message; {} if the body was not one. Bound once per delivery, here."""
    if isinstance(msg, InvalidMessageError):
        return {}
    fields = {"task_id": msg.task_id, "document_id": msg.document_id, "generation": msg.generation}
    return fields if msg.part is None else {**fields, "part": msg.part}


async def _dead_letter_copy(message: AbstractIncomingMessage, publisher: rabbitmq.Publisher, reason: str) -> bool:
    headers: dict[str, Any] = {**(message.headers or {}), DEAD_REASON_HEADER: reason,
                               CARRIED_HEADER: failed_deliveries(message)}
    try:
        await publisher.publish(message.body, exchange=messages.DLX, routing_key=messages.ROUTING_KEY,
                                correlation_id=message.correlation_id, headers=headers)
    except BrokerUnavailableError:
        return False
    return True


async def _still_subscribed(channel: AbstractChannel, tag: str) -> bool:
    """True while aiormq still knows our consumer tag (it drops it on a server basic.cancel)."""
    try:
        underlying = await channel.get_underlay_channel()
    except Exception:
        return False
    return tag in getattr(underlying, "consumers", {})


async def _settle(op: Awaitable[Any]) -> None:
    """Ack/nack/reject; on a dead channel the broker has requeued the delivery already."""
    try:
        await op
    except Exception as exc:
        log.warning("could not settle delivery (channel gone; it will be redelivered)", extra={"error": str(exc)})
