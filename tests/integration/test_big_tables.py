"""A 100,000-row table is read row by row within its limits (seconds of CPU: kept out of the unit tier)."""

from __future__ import annotations

from task_service.pipeline.limits import DEFAULT_LIMITS
from task_service.pipeline.readers.plain import csv


def test_a_100000_row_csv_is_read_row_by_row() -> None:
    data = b"Item,Count\n" + b"".join(b"gasket %d,%d\n" % (i, i) for i in range(100_000))
    blocks = csv.read(data, DEFAULT_LIMITS).blocks
    assert len(blocks) == 100_000
    assert blocks[-1].text == "Item: gasket 99999 | Count: 99999"
