"""RabbitMQ adapter: topology (declared idempotently by both services) and confirmed publish.

Topology (final; re-declaring a queue with other arguments fails, so change it only with a
new queue name)::

    rag.index.exchange (direct, durable) --rag.index.document--> rag.index.queue
        (quorum, x-delivery-limit 5, dead-letter → rag.index.dlx)
    rag.index.dlx (fanout, durable) --> rag.index.dlq (quorum)
    "" (default exchange) --rag.index.delay.quorum.<ms>ms--> rag.index.delay.quorum.<ms>ms
        (quorum, x-message-ttl <ms>, dead-letter at-least-once → rag.index.exchange / rag.index.document)

The delay queue carries deliveries whose document lock was held; its TTL is in its name so a
changed setting declares a new queue instead of failing on the old one. It is a quorum queue
(message TTL needs RabbitMQ >= 3.10): a classic queue lives on one node, and while that node is
down re-declaring it fails (``NOT_FOUND - home node ... is down``), which stopped every worker's
session in a cluster (tests/e2e/test_broker_cluster.py). Earlier versions' classic
``rag.index.delay.<ms>ms`` queues are left alone: their messages still expire into the main queue.

Several brokers (a cluster): ``AMQP_URL`` may name several nodes, either as several hosts in one
URL (``amqp://user:pass@h1:5672,h2:5672,h3:5672/vhost``: credentials, vhost and query once) or as
comma-separated full URLs. :func:`connect` tries them in turn, from a random one (clients spread
over the nodes), and returns the first that answers; :class:`FailoverPublisher` reconnects the
same way after its connection dies. aio-pika's ``connect_robust`` takes one URL, so every
reconnect loop of this project (the worker's consumer, the API's publisher) goes through
:func:`connect` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

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
    QUEUE,
    ROUTING_KEY,
    delay_queue_name,
)

if TYPE_CHECKING:
    from shared.settings import CommonSettings

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


@dataclass(frozen=True)
class BrokerConfig:
    """What every broker client of this project shares (the worker's consumer, the API's and the
    jobs' publishers, the CLI): ``AMQP_URL`` (one or several nodes), the heartbeat asked of the
    broker (s), the publish-confirm timeout (s) and the delay queue's TTL (ms)."""

    url: str = field(repr=False)
    heartbeat_s: int
    publish_timeout_s: float
    delay_ms: int

    @classmethod
    def from_settings(cls, s: CommonSettings) -> BrokerConfig:
        return cls(url=s.amqp_url.get_secret_value(), heartbeat_s=s.amqp_heartbeat_s,
                   publish_timeout_s=s.amqp_publish_timeout_s, delay_ms=s.delay_ms)


async def open_connection(config: BrokerConfig, *, name: str, timeout_s: float = 15.0) -> AbstractConnection:
    """:func:`connect` (not robust) with ``config``'s URL and heartbeat; same errors."""
    return await connect(config.url, name=name, heartbeat_s=config.heartbeat_s, robust=False, timeout_s=timeout_s)


async def open_publisher(config: BrokerConfig, connection: AbstractConnection, *, app_id: str,
                         on_failure: Callable[[], object] | None = None) -> Publisher:
    """:meth:`Publisher.open` with ``config``'s publish-confirm timeout; raises BrokerUnavailableError."""
    return await Publisher.open(connection, config.publish_timeout_s, app_id=app_id, on_failure=on_failure)


_MULTI_URL = re.compile(r",\s*(?=amqps?://)", re.IGNORECASE)
_URL_PARTS = re.compile(r"^(?P<scheme>amqps?://)(?:(?P<userinfo>[^@/?#]*)@)?(?P<hosts>[^/?#]*)(?P<rest>.*)$",
                        re.IGNORECASE)


def broker_urls(url: str) -> list[str]:
    """The node URLs ``AMQP_URL`` names, in order (pure).

    ``amqp://u:p@h1:5672,h2:5673/vh`` → ``["amqp://u:p@h1:5672/vh", "amqp://u:p@h2:5673/vh"]``;
    comma-separated full URLs are returned as given; one URL → ``[url]``. Raises
    ConfigurationError for an empty value, another scheme, or an empty host in the list.
    """
    url = url.strip()
    if not url:
        raise ConfigurationError("AMQP_URL is empty (`make env` writes it)")
    pieces = [p.strip() for p in _MULTI_URL.split(url)]
    out: list[str] = []
    for piece in pieces:
        m = _URL_PARTS.match(piece)
        if m is None:
            raise ConfigurationError("AMQP_URL must be amqp:// or amqps:// URL(s)")
        userinfo = f"{m['userinfo']}@" if m["userinfo"] is not None else ""
        hosts = [h.strip() for h in m["hosts"].split(",")]
        if not all(hosts):
            raise ConfigurationError("AMQP_URL names an empty host in its list of brokers")
        out.extend(f"{m['scheme']}{userinfo}{host}{m['rest']}" for host in hosts)
    return out


def _where(url: str) -> str:
    """``host:port`` of a broker URL, for messages (never the password)."""
    u = URL(url)
    return f"{u.host}:{u.port}"


async def connect(url: str, *, name: str, heartbeat_s: int, robust: bool,
                  timeout_s: float = 15.0) -> AbstractConnection:
    """Open a connection named after its process (visible in the management console) to the first
    node of ``url`` (one or several brokers, :func:`broker_urls`) that answers, trying each in turn
    from a random one, each for up to ``timeout_s`` seconds. ``robust``: aio-pika's
    ``connect_robust`` (it reconnects to that same node only).

    Raises BrokerUnavailableError (no node answered: each node's error is in the message);
    ConfigurationError when a URL names no user (aio-pika would silently log in as guest, which
    this project never uses).
    """
    urls = broker_urls(url)
    for candidate in urls:
        if not URL(candidate).user or URL(candidate).user == "guest":
            raise ConfigurationError("AMQP_URL must name the project's own broker user and password "
                                     "(`make env` generates them; guest is not used)")
    start = random.randrange(len(urls))
    errors: list[str] = []
    for candidate in urls[start:] + urls[:start]:
        try:
            return await _connect_one(candidate, name=name, heartbeat_s=heartbeat_s, robust=robust,
                                      timeout_s=timeout_s)
        except BrokerUnavailableError as exc:
            errors.append(f"{_where(candidate)}: {exc}")
    raise BrokerUnavailableError("broker unreachable: " + "; ".join(errors))


async def _connect_one(url: str, *, name: str, heartbeat_s: int, robust: bool, timeout_s: float) -> AbstractConnection:
    # aio-pika ignores ``client_properties=`` and ``heartbeat=`` when given a URL; aiormq reads
    # both from the URL's query string (``name``, ``heartbeat``).
    full = URL(url).update_query(name=name, heartbeat=str(heartbeat_s))
    try:
        factory = aio_pika.connect_robust if robust else aio_pika.connect
        return await factory(full, timeout=timeout_s)
    except _BROKER_ERRORS as exc:
        raise BrokerUnavailableError(f"{type(exc).__name__}: {exc}") from exc


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
            "x-queue-type": "quorum",
            "x-message-ttl": delay_ms,
            "x-dead-letter-exchange": EXCHANGE,
            "x-dead-letter-routing-key": ROUTING_KEY,
            # at-least-once dead-lettering (3.10+) needs reject-publish: no expiry is dropped in transit
            "x-dead-letter-strategy": "at-least-once",
            "x-overflow": "reject-publish",
        },
    )
    return exchange, queue


class Publisher:
    """Publishes persistent JSON messages with publisher confirms and ``mandatory=True``.

    Every message carries ``message_id`` (unique per publish), ``content_type``
    ``application/json``, ``app_id`` (the publishing service) and a ``timestamp``; the caller
    gives ``correlation_id`` (the task id) and the headers (the generation in
    ``x-rag-generation``: :attr:`shared.domain.records.OutboxRow.headers`), so "Get messages" in
    the management console is readable. The body is sent as given, never parsed here. A broker
    nack, an unroutable return or a timeout raises BrokerUnavailableError: never silence.
    ``on_failure`` (e.g. a metrics counter's ``inc``) is called before it is raised.
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
        correlation_id: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> None:
        """Publish and wait for the broker's confirm (seconds: the publisher's timeout)."""
        message = aio_pika.Message(
            body,
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=message_id or str(uuid.uuid4()),
            correlation_id=correlation_id,
            app_id=self._app_id,
            timestamp=datetime.now(UTC),
            headers=dict(headers or {}),
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


class FailoverPublisher:
    """A confirming :class:`Publisher` that survives the loss of its broker node (the API's).

    It connects lazily (:func:`connect`: each node of ``url`` in turn), declares the topology on
    every new connection, and publishes through a :class:`Publisher` on it. When a publish fails
    and the channel is gone, the connection is dropped and the next publish reconnects — to any
    node that answers. A failed reconnect is not retried for ``retry_after_s`` seconds: during an
    outage each publish fails at once (BrokerUnavailableError; the caller's outbox row stays for
    the relay) instead of every upload waiting for every node's connect timeout.
    """

    def __init__(self, config: BrokerConfig, *, name: str, app_id: str = "rag",
                 on_failure: Callable[[], object] | None = None,
                 retry_after_s: float = 1.0, connect_timeout_s: float = 5.0) -> None:
        broker_urls(config.url)  # ConfigurationError now, not at the first publish
        self._config = config
        self._name = name
        self._app_id = app_id
        self._on_failure = on_failure
        self._retry_after_s = retry_after_s
        self._connect_timeout_s = connect_timeout_s
        self._lock = asyncio.Lock()
        self._connection: AbstractConnection | None = None
        self._publisher: Publisher | None = None
        self._failed_at: float | None = None

    @property
    def is_open(self) -> bool:
        """True while the current connection and channel are open."""
        return self._publisher is not None and self._publisher.is_open

    async def ensure_open(self) -> bool:
        """Connect now if not connected (readiness probes); True when a publisher is open."""
        try:
            await self._current()
        except BrokerUnavailableError:
            return False
        return True

    async def _current(self) -> Publisher:
        async with self._lock:
            if self._publisher is not None and self._publisher.is_open:
                return self._publisher
            await self._drop()
            if self._failed_at is not None and time.monotonic() - self._failed_at < self._retry_after_s:
                raise BrokerUnavailableError("broker unreachable (last reconnect attempt failed moments ago)")
            try:
                self._publisher = await self._open()
            except BrokerUnavailableError:
                self._failed_at = time.monotonic()
                raise
            self._failed_at = None
            return self._publisher

    async def _open(self) -> Publisher:
        conn = await open_connection(self._config, name=self._name, timeout_s=self._connect_timeout_s)
        self._connection = conn
        try:
            channel = await conn.channel()
            await declare_topology(channel, delay_ms=self._config.delay_ms)
            await channel.close()
        except _BROKER_ERRORS as exc:
            await self._drop()
            raise BrokerUnavailableError(f"cannot declare topology: {type(exc).__name__}: {exc}") from exc
        except BrokerUnavailableError:
            await self._drop()
            raise
        return await Publisher.open(conn, self._config.publish_timeout_s, app_id=self._app_id,
                                    on_failure=self._on_failure)

    async def _drop(self) -> None:
        conn, self._connection, self._publisher = self._connection, None, None
        if conn is not None and not conn.is_closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), timeout=2)

    async def publish(
        self,
        body: bytes,
        *,
        exchange: str = EXCHANGE,
        routing_key: str = ROUTING_KEY,
        message_id: str | None = None,
        correlation_id: str | None = None,
        headers: Mapping[str, Any] | None = None,
    ) -> None:
        """:meth:`Publisher.publish` on the current connection (reconnecting first if it died).
        Raises BrokerUnavailableError."""
        try:
            publisher = await self._current()
        except BrokerUnavailableError:
            if self._on_failure is not None:
                self._on_failure()
            raise
        await publisher.publish(body, exchange=exchange, routing_key=routing_key, message_id=message_id,
                                correlation_id=correlation_id, headers=headers)

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
