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
