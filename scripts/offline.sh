#!/usr/bin/env bash
# Run a command with the network cut: its own network namespace (unshare -rn) with only the
# loopback interface up, so nothing outside the process tree is reachable (PostgreSQL, RabbitMQ,
# Redis, S3 and the internet all refuse). Used by `make unit` to prove the unit tier is offline.
set -euo pipefail
if unshare -rn true 2>/dev/null; then
    exec unshare -rn sh -c 'ip link set lo up && exec "$@"' offline "$@"
fi
echo "offline.sh: unshare -rn is not permitted here; running WITH the network" >&2
exec "$@"
