from __future__ import annotations

import json

import pytest

from shared.domain.messages import IndexMessage, InvalidMessageError

GOOD = {"taskId": 1, "documentId": 2, "kbId": 3, "userId": 4, "generation": 5}


def test_round_trip_uses_wire_names() -> None:
    msg = IndexMessage.from_json(json.dumps(GOOD).encode())
    assert (msg.task_id, msg.document_id, msg.kb_id, msg.user_id, msg.generation) == (1, 2, 3, 4, 5)
    assert json.loads(msg.to_json()) == GOOD


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"",
        json.dumps({**GOOD, "extra": 1}).encode(),
        json.dumps({k: v for k, v in GOOD.items() if k != "generation"}).encode(),
        json.dumps({**GOOD, "taskId": "1"}).encode(),
        json.dumps({**GOOD, "generation": 0}).encode(),
        json.dumps({**GOOD, "kbId": -3}).encode(),
        json.dumps([GOOD]).encode(),
    ],
)
def test_invalid_bodies_are_rejected(body: bytes) -> None:
    with pytest.raises(InvalidMessageError):
        IndexMessage.from_json(body)


def test_a_document_message_has_no_part_key_and_the_same_bytes() -> None:
    msg = IndexMessage.from_json(json.dumps(GOOD).encode())
    assert msg.part is None
    assert msg.to_json() == b'{"taskId":1,"documentId":2,"kbId":3,"userId":4,"generation":5}'
    assert "part" not in msg.to_dict()


def test_a_part_message_round_trips_with_its_part() -> None:
    part = IndexMessage.from_json(json.dumps(GOOD).encode()).for_part(3)
    assert json.loads(part.to_json()) == {**GOOD, "part": 3}
    back = IndexMessage.from_json(part.to_json())
    assert back == part and back.part == 3
    assert back.document().to_json() == IndexMessage.from_json(json.dumps(GOOD).encode()).to_json()


def test_part_zero_is_kept_on_the_wire() -> None:
    assert json.loads(IndexMessage.from_json(json.dumps({**GOOD, "part": 0}).encode()).to_json())["part"] == 0


@pytest.mark.parametrize("part", [-1, "1", 1.5, True])
def test_bad_parts_are_rejected(part: object) -> None:
    with pytest.raises(InvalidMessageError):
        IndexMessage.from_json(json.dumps({**GOOD, "part": part}).encode())
