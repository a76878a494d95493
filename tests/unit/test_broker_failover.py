"""Several broker nodes in AMQP_URL: parsing, connect trying each node in turn, and the API's
publisher reconnecting after its node is lost. aio-pika is replaced by fakes: no broker."""

from __future__ import annotations

from typing import Any

import pytest

from shared.adapters import rabbitmq
from shared.domain.errors import BrokerUnavailableError, ConfigurationError


@pytest.mark.parametrize(("url", "expected"), [
    ("amqp://u:p@h1:5672/vh", ["amqp://u:p@h1:5672/vh"]),
    ("amqp://u:p@h1:5672,h2:5673,h3/vh?heartbeat=5",
     ["amqp://u:p@h1:5672/vh?heartbeat=5", "amqp://u:p@h2:5673/vh?heartbeat=5", "amqp://u:p@h3/vh?heartbeat=5"]),
    ("amqp://u:p@h1:5672/a, amqps://v:q@h2:5671/b", ["amqp://u:p@h1:5672/a", "amqps://v:q@h2:5671/b"]),
    ("amqp://u:p%2C@h1,h2", ["amqp://u:p%2C@h1", "amqp://u:p%2C@h2"]),
])
def test_broker_urls(url: str, expected: list[str]) -> None:
    assert rabbitmq.broker_urls(url) == expected


@pytest.mark.parametrize("url", ["", "http://u:p@h1/", "amqp://u:p@h1,,h2/vh", "amqp://u:p@h1,/vh"])
def test_broker_urls_rejects(url: str) -> None:
    with pytest.raises(ConfigurationError):
        rabbitmq.broker_urls(url)


class FakeConnection:
    def __init__(self, host: str) -> None:
        self.host = host
        self.is_closed = False

    async def close(self) -> None:
        self.is_closed = True


@pytest.fixture
def brokers(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """aio-pika's connect replaced: hosts in ``state["down"]`` refuse; every attempt is recorded."""
    state: dict[str, Any] = {"down": set(), "tried": []}

    async def fake_connect(url: Any, **_: Any) -> FakeConnection:
        state["tried"].append(url.host)
        if url.host in state["down"]:
            raise ConnectionRefusedError(111, "refused")
        assert url.query["name"] == "t" and url.password == "p"
        return FakeConnection(url.host)

    monkeypatch.setattr("aio_pika.connect", fake_connect)
    return state


@pytest.mark.parametrize("start", [0, 1, 2])
async def test_connect_tries_each_node_in_turn(brokers: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                               start: int) -> None:
    monkeypatch.setattr("random.randrange", lambda n: start)
    brokers["down"] = {"a", "b"}
    conn = await rabbitmq.connect("amqp://u:p@a:1,b:2,c:3/vh", name="t", heartbeat_s=5, robust=False)
    assert conn.host == "c"  # type: ignore[attr-defined]
    assert brokers["tried"] == ["a", "b", "c"][start:]  # from the random start, up to the first that answers


async def test_connect_names_every_node_when_none_answers(brokers: dict[str, Any]) -> None:
    brokers["down"] = {"a", "b"}
    with pytest.raises(BrokerUnavailableError) as err:
        await rabbitmq.connect("amqp://u:secret@a:1,b:2/vh", name="t", heartbeat_s=5, robust=False)
    assert "a:1" in str(err.value) and "b:2" in str(err.value) and "secret" not in str(err.value)


async def test_connect_refuses_guest_on_any_node(brokers: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        await rabbitmq.connect("amqp://u:p@a:1/vh, amqp://guest:guest@b:2/vh", name="t", heartbeat_s=5, robust=False)
    assert brokers["tried"] == []


class FakeInner:
    """The per-connection Publisher: records publishes; ``is_open`` follows its connection."""

    def __init__(self, conn: FakeConnection, sent: list[tuple[str, bytes]]) -> None:
        self.conn = conn
        self.sent = sent

    @property
    def is_open(self) -> bool:
        return not self.conn.is_closed

    async def publish(self, body: bytes, **_: Any) -> None:
        if self.conn.is_closed:
            raise BrokerUnavailableError("channel closed")
        self.sent.append((self.conn.host, body))


@pytest.fixture
def failover(brokers: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[rabbitmq.FailoverPublisher,
                                                                                list[tuple[str, bytes]]]:
    sent: list[tuple[str, bytes]] = []

    async def declare(channel: Any, *, delay_ms: int) -> None:
        return None

    class Chan:
        async def close(self) -> None:
            return None

    async def channel(self: FakeConnection) -> Chan:
        return Chan()

    async def open_publisher(conn: FakeConnection, timeout_s: float, **_: Any) -> FakeInner:
        return FakeInner(conn, sent)

    monkeypatch.setattr(FakeConnection, "channel", channel, raising=False)
    monkeypatch.setattr(rabbitmq, "declare_topology", declare)
    monkeypatch.setattr(rabbitmq.Publisher, "open", open_publisher)
    monkeypatch.setattr("random.randrange", lambda n: 0)
    pub = rabbitmq.FailoverPublisher(rabbitmq.BrokerConfig("amqp://u:p@a:1,b:2/vh", heartbeat_s=5, publish_timeout_s=1,
                                                           delay_ms=10), name="t", retry_after_s=60)
    return pub, sent


async def test_publisher_moves_to_another_node_when_its_node_is_lost(
        failover: tuple[rabbitmq.FailoverPublisher, list[tuple[str, bytes]]], brokers: dict[str, Any]) -> None:
    pub, sent = failover
    await pub.publish(b"1")
    assert pub.is_open
    first = pub._connection
    assert isinstance(first, FakeConnection)
    first.is_closed = True  # node a stopped: the broker closed the connection
    brokers["down"] = {"a"}
    assert not pub.is_open
    await pub.publish(b"2")
    assert sent == [("a", b"1"), ("b", b"2")]


async def test_publisher_fails_fast_while_no_node_answers(
        failover: tuple[rabbitmq.FailoverPublisher, list[tuple[str, bytes]]], brokers: dict[str, Any]) -> None:
    pub, sent = failover
    brokers["down"] = {"a", "b"}
    with pytest.raises(BrokerUnavailableError):
        await pub.publish(b"1")
    brokers["down"] = set()
    tried = len(brokers["tried"])
    with pytest.raises(BrokerUnavailableError):  # within retry_after_s: no new attempt
        await pub.publish(b"2")
    assert len(brokers["tried"]) == tried and not await pub.ensure_open()
    pub._failed_at = -1e9  # retry_after_s has passed
    assert await pub.ensure_open()
    await pub.publish(b"3")
    assert sent == [("a", b"3")]
    await pub.close()
    assert not pub.is_open
