"""Issue 19 item 3: the services on a three-node RabbitMQ cluster, ``AMQP_URL`` naming all three,
while its nodes fail one after the other (``tests/support/broker_faults.py``: kill -9 the queue's leader,
start it again, stop a follower, start it, restart the cluster node by node), with documents
uploaded throughout. CI size: 30 documents (``make bench`` runs 200: ``bench/cluster.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import broker_faults
from tests.support.rabbit_cluster import available

pytestmark = pytest.mark.skipif(available() is not None, reason=f"RabbitMQ cluster: {available()}")


def test_every_document_indexed_once_through_node_failures(services_env: dict[str, str], log_dir: Path) -> None:
    out = broker_faults.run(services_env, log_dir, documents=30, gap_s=5.0, burst=2)
    print(out.summary())
    print(out.table())
    assert out.documents >= 30 and out.indexed == out.documents and out.lost == 0, out.summary()
    assert out.committing_embedded_once, out.summary()  # an extra run is one that did not commit (cut)
    assert out.embedded_twice <= out.cut_runs, out.summary()
    assert out.queue_messages == 0 and out.outbox_unpublished == 0, out.summary()
    assert len(out.faults) == 10
    worst_recovery = max(f.recover_s for f in out.faults)
    assert out.worst_upload_outage_s <= worst_recovery, out.summary()  # no upload refused longer than a failover
