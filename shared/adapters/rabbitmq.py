"""RabbitMQ adapter: topology (declared idempotently by both services) and confirmed publish.

Topology (final; re-declaring a queue with other arguments fails, so change it only with a
new queue name)::

    rag.index.exchange (direct, durable) --rag.index.document--> rag.index.queue
        (quorum, x-delivery-limit 5, dead-letter → rag.index.dlx)
    rag.index.dlx (fanout, durable) --> rag.index.dlq (quorum)
    "" (default exchange) --rag.index.delay.<ms>ms--> rag.index.delay.<ms>ms
        (classic durable, x-message-ttl <ms>, dead-letter → rag.index.exchange / rag.index.document)

The delay queue carries deliveries whose document lock was held; its TTL is in its name so a
changed setting declares a new queue instead of failing on the old one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange, AbstractQueue
from yarl import URL

from shared.domain.errors import BrokerUnavailableError, ConfigurationError
from shared.domain.messages import (
    DELIVERY_LIMIT,
    DLQ,
    DLX,
    EXCHANGE,
    GENERATION_HEADER,
    QUEUE,
    ROUTING_KEY,
    IndexMessage,
    InvalidMessageError,
    delay_queue_name,
)

_BROKER_ERRORS: tuple[type[BaseException], ...] = (
    aio_pika.exceptions.AMQPError,
    aiormq.exceptions.AMQPError,
    ConnectionError,
    OSError,
    TimeoutError,
    RuntimeError,  # aiormq: "Connection closed" / channel closed while publishing
)
#: What a broker call may raise (for callers that only log and try again later).
BROKER_ERRORS = _BROKER_ERRORS


async def connect(url: str, *, name: str, heartbeat_s: int, robust: bool) -> AbstractConnection:
    """Open a connection named after its process (visible in the management console).

    Raises BrokerUnavailableError; ConfigurationError when ``url`` names no user (aio-pika would
    silently log in as guest, which this project never uses).
    """
    if not URL(url).user or URL(url).user == "guest":
        raise ConfigurationError("AMQP_URL must name the project's own broker user and password "
                                 "(`make env` generates them; guest is not used)")
    # aio-pika ignores ``client_properties=`` and ``heartbeat=`` when given a URL; aiormq reads
    # both from the URL's query string (``name``, ``heartbeat``).
    full = URL(url).update_query(name=name, heartbeat=str(heartbeat_s))
    try:
        factory = aio_pika.connect_robust if robust else aio_pika.connect
        return await factory(full, timeout=15)
    except _BROKER_ERRORS as exc:
        raise BrokerUnavailableError(f"broker unreachable: {exc}") from exc


async def declare_topology(channel: AbstractChannel, *, delay_ms: int) -> tuple[AbstractExchange, AbstractQueue]:
    """Declare exchanges and queues (idempotent); returns (main exchange, main queue).

    Raises BrokerUnavailableError (unreachable, access refused, or arguments that differ from
    an existing queue's: PRECONDITION_FAILED).
    """
    try:
        return await _declare(channel, delay_ms)
    except _BROKER_ERRORS as exc:
        raise BrokerUnavailableError(f"cannot declare topology: {type(exc).__name__}: {exc}") from exc


async def _declare(channel: AbstractChannel, delay_ms: int) -> tuple[AbstractExchange, AbstractQueue]:
    exchange = await channel.declare_exchange(EXCHANGE, aio_pika.ExchangeType.DIRECT, durable=True)
    dlx = await channel.declare_exchange(DLX, aio_pika.ExchangeType.FANOUT, durable=True)
    dlq = await channel.declare_queue(DLQ, durable=True, arguments={"x-queue-type": "quorum"})
    await dlq.bind(dlx)
    queue = await channel.declare_queue(
        QUEUE,
        durable=True,
        arguments={
            "x-queue-type": "quorum",
            "x-delivery-limit": DELIVERY_LIMIT,
            "x-dead-letter-exchange": DLX,
        },
    )
    await queue.bind(exchange, routing_key=ROUTING_KEY)
    await channel.declare_queue(
        delay_queue_name(delay_ms),
        durable=True,
        arguments={
            "x-message-ttl": delay_ms,
            "x-dead-letter-exchange": EXCHANGE,
            "x-dead-letter-routing-key": ROUTING_KEY,
        },
    )
    return exchange, queue


def index_properties(body: bytes) -> tuple[str | None, dict[str, Any]]:
    """``(correlation_id, headers)`` for a message body: the task id and the generation header
    when the body is an index message, ``(None, {})`` otherwise (pure)."""
    try:
        msg = IndexMessage.from_json(body)
    except InvalidMessageError:
        return None, {}
    return str(msg.task_id), {GENERATION_HEADER: msg.generation}


class Publisher:
    """Publishes persistent JSON messages with publisher confirms and ``mandatory=True``.

    Every message carries ``message_id`` (unique per publish), ``correlation_id`` = the task id,
    ``content_type`` ``application/json``, ``app_id`` (the publishing service), a ``timestamp``
    and the generation in the ``x-rag-generation`` header, so "Get messages" in the management
    console is readable. A broker nack, an unroutable return or a timeout raises
    BrokerUnavailableError: never silence. ``on_failure`` (e.g. a metrics counter's ``inc``) is
    called before it is raised.
    """

    def __init__(self, channel: AbstractChannel, timeout_s: float, app_id: str = "rag",
                 on_failure: Callable[[], object] | None = None) -> None:
        self._channel = channel
        self._timeout_s = timeout_s
        self._app_id = app_id
        self._on_failure = on_failure

    @classmethod
    async def open(cls, connection: AbstractConnection, timeout_s: float, *, app_id: str = "rag",
                   on_failure: Callable[[], object] | None = None) -> Publisher:
        """A confirming publisher on a new channel; ``app_id``: the service name shown on its messages."""
        try:
            channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        except _BROKER_ERRORS as exc:
            raise BrokerUnavailableError(f"cannot open publisher channel: {exc}") from exc
        return cls(channel, timeout_s, app_id, on_failure)

    async def publish(
        self,
        body: bytes,
        *,
        exchange: str = EXCHANGE,
        routing_key: str = ROUTING_KEY,
        message_id: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> None:
        """Publish and wait for the broker's confirm (seconds: the publisher's timeout)."""
        correlation_id, derived = index_properties(body)
        message = aio_pika.Message(
            body,
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=message_id or str(uuid.uuid4()),
            correlation_id=correlation_id,
            app_id=self._app_id,
            timestamp=datetime.now(UTC),
            headers={**(headers or {}), **derived},
        )
        try:
            target = (
                self._channel.default_exchange
                if exchange == ""
                else await self._channel.get_exchange(exchange, ensure=False)
            )
            await target.publish(message, routing_key=routing_key, mandatory=True, timeout=self._timeout_s)
        except _BROKER_ERRORS as exc:
            if self._on_failure is not None:
                self._on_failure()
            raise BrokerUnavailableError(f"publish not confirmed: {type(exc).__name__}: {exc}") from exc

    @property
    def is_open(self) -> bool:
        return not self._channel.is_closed

    async def close(self) -> None:
        if not self._channel.is_closed:
            await self._channel.close()
