"""The consumer's ack / reject / delay policy and its header arithmetic, against a stub
delivery and a recording publisher (cf. dramatiq ``brokers/stub.py``): no broker."""

from __future__ import annotations

from typing import Any, cast

import pytest
from aio_pika.abc import AbstractIncomingMessage

from shared.adapters import rabbitmq
from shared.domain import messages
from shared.domain.errors import DeliveryLimitError
from shared.domain.messages import IndexMessage, InvalidMessageError
from shared.settings import WorkerSettings
from task_service.consumer import (
    CARRIED_HEADER,
    DEAD_REASON_HEADER,
    DELAY_BASE_HEADER,
    DELAY_HEADER,
    Consumer,
    ConsumerConfig,
    delay_attempts,
    failed_deliveries,
    log_fields,
)
from task_service.indexing.delivery import IndexHandler, Outcome
from task_service.metrics import WorkerMetrics
from tests.fakes import FakePublisher


class StubDelivery:
    """What the consumer reads from an aio-pika delivery, with its settle recorded."""

    def __init__(self, headers: dict[str, Any] | None = None, body: bytes = b"{}") -> None:
        self.headers = headers or {}
        self.body = body
        self.correlation_id = "7"
        self.settled: list[tuple[str, bool | None]] = []

    async def ack(self) -> None:
        self.settled.append(("ack", None))

    async def nack(self, requeue: bool = True) -> None:
        self.settled.append(("nack", requeue))

    async def reject(self, requeue: bool = False) -> None:
        self.settled.append(("reject", requeue))


class StubHandler:
    def __init__(self, outcome: Outcome | Exception) -> None:
        self.outcome = outcome
        self.calls: list[int] = []
        self.messages: list[IndexMessage | InvalidMessageError] = []
        self.metrics = WorkerMetrics.unregistered()

    async def handle(self, msg: IndexMessage | InvalidMessageError, *, delay_attempts: int) -> Outcome:
        self.calls.append(delay_attempts)
        self.messages.append(msg)
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


SETTINGS = WorkerSettings(_env_file=None, lock_retry_delay_s=2.0)  # type: ignore[call-arg]


async def process(outcome: Outcome | Exception, headers: dict[str, Any] | None = None,
                  publisher: FakePublisher | None = None) -> tuple[StubDelivery, FakePublisher, StubHandler]:
    delivery, pub, handler = StubDelivery(headers), publisher or FakePublisher(), StubHandler(outcome)
    consumer = Consumer(ConsumerConfig.from_settings(SETTINGS), cast(IndexHandler, handler), "test")
    await consumer._process(cast(AbstractIncomingMessage, delivery), cast(rabbitmq.Publisher, pub))
    return delivery, pub, handler


def m(headers: dict[str, Any]) -> AbstractIncomingMessage:
    return cast(AbstractIncomingMessage, StubDelivery(headers))


def test_failed_deliveries_add_the_carried_count_to_the_brokers() -> None:
    assert failed_deliveries(m({})) == 0
    assert failed_deliveries(m({"x-delivery-count": 2, CARRIED_HEADER: 3})) == 5
    assert failed_deliveries(m({"x-delivery-count": "junk", CARRIED_HEADER: -4})) == 0


def test_delay_attempts_restart_after_a_crash() -> None:
    assert delay_attempts(m({DELAY_HEADER: 4, DELAY_BASE_HEADER: 1, CARRIED_HEADER: 1})) == 4
    # a worker crashed on it since the last delay: the lock was a dead worker's
    assert delay_attempts(m({DELAY_HEADER: 4, DELAY_BASE_HEADER: 1, CARRIED_HEADER: 1, "x-delivery-count": 1})) == 0


async def test_ack_and_reject() -> None:
    assert (await process(Outcome.ACK))[0].settled == [("ack", None)]
    assert (await process(Outcome.REJECT))[0].settled == [("reject", False)]


async def test_the_body_is_parsed_once_and_handed_to_the_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    msg = IndexMessage(task_id=1, document_id=2, kb_id=3, user_id=4, generation=5)
    parses: list[bytes] = []
    real = IndexMessage.from_json.__func__  # type: ignore[attr-defined]

    def counting(cls: type[IndexMessage], body: bytes) -> IndexMessage:
        parses.append(body)
        return real(cls, body)  # type: ignore[no-any-return]

    monkeypatch.setattr(IndexMessage, "from_json", classmethod(counting))
    handler = StubHandler(Outcome.ACK)
    consumer = Consumer(ConsumerConfig.from_settings(SETTINGS), cast(IndexHandler, handler), "test")
    delivery = StubDelivery(body=msg.to_json())
    await consumer._process(cast(AbstractIncomingMessage, delivery), cast(rabbitmq.Publisher, FakePublisher()))
    assert handler.messages == [msg] and parses == [msg.to_json()]
    _, _, handler = await process(Outcome.REJECT)  # body b"{}": not a message
    assert [type(m) for m in handler.messages] == [InvalidMessageError]


async def test_a_crashing_handler_returns_the_delivery_to_the_queue() -> None:
    assert (await process(RuntimeError("bug")))[0].settled == [("nack", True)]


async def test_delay_republishes_with_counts_then_acks() -> None:
    headers = {DELAY_HEADER: 2, DELAY_BASE_HEADER: 1, CARRIED_HEADER: 1, "x-delivery-count": 0, "other": "kept"}
    delivery, pub, handler = await process(Outcome.DELAY, headers)
    assert handler.calls == [2]
    assert delivery.settled == [("ack", None)]
    [(_, exchange, routing_key, sent)] = pub.sent
    assert (exchange, routing_key) == ("", messages.delay_queue_name(2000))
    assert sent == {DELAY_HEADER: 3, DELAY_BASE_HEADER: 1, CARRIED_HEADER: 1, "other": "kept"}
    assert pub.correlation_ids == [delivery.correlation_id]  # the delivery's own, not re-derived from the body


async def test_delay_carries_the_brokers_delivery_count_across_the_republish() -> None:
    _, pub, _ = await process(Outcome.DELAY, {"x-delivery-count": 2})
    [(_, _, _, sent)] = pub.sent
    assert sent == {DELAY_HEADER: 1, DELAY_BASE_HEADER: 2, CARRIED_HEADER: 2}


async def test_delay_with_the_broker_down_requeues() -> None:
    delivery, _, _ = await process(Outcome.DELAY, publisher=FakePublisher(fail=True))
    assert delivery.settled == [("nack", True)]


async def test_past_the_delivery_limit_it_is_dead_lettered_without_running() -> None:
    headers = {CARRIED_HEADER: messages.DELIVERY_LIMIT, "x-delivery-count": 1}
    delivery, pub, handler = await process(Outcome.ACK, headers)
    assert handler.calls == []
    [(_, exchange, _, sent)] = pub.sent
    assert exchange == messages.DLX and sent[DEAD_REASON_HEADER] == DeliveryLimitError.error_code
    assert sent[CARRIED_HEADER] == messages.DELIVERY_LIMIT + 1
    assert delivery.settled == [("ack", None)]


async def test_at_the_delivery_limit_it_still_runs() -> None:
    _, _, handler = await process(Outcome.ACK, {CARRIED_HEADER: messages.DELIVERY_LIMIT})
    assert handler.calls == [0]


async def test_dead_lettering_with_the_broker_down_rejects_to_the_brokers_dlx() -> None:
    headers = {CARRIED_HEADER: messages.DELIVERY_LIMIT + 3}
    delivery, _, _ = await process(Outcome.ACK, headers, FakePublisher(fail=True))
    assert delivery.settled == [("reject", False)]


def test_the_log_fields_are_the_messages_ids_and_its_part() -> None:
    """Bound once per delivery by the consumer: a part message's lines also carry its part."""
    msg = IndexMessage(task_id=1, document_id=2, kb_id=3, user_id=4, generation=5)
    assert log_fields(msg) == {"task_id": 1, "document_id": 2, "generation": 5}
    assert log_fields(msg.for_part(7)) == {"task_id": 1, "document_id": 2, "generation": 5, "part": 7}
    assert log_fields(InvalidMessageError("not a message")) == {}
