#!/usr/bin/env python3
"""The parts of ``scripts/services.sh`` that are not apt or starting system services: URL parts,
the SeaweedFS identities file (JSON), readiness probes and the polling loop.

It runs with the project's virtualenv (``make services`` installs it first: SeaweedFS's ``weed``
comes from it too), so each readiness probe speaks to its service through the client the project
uses: the MinIO SDK for S3, redis-py for Redis, asyncpg for PostgreSQL (no hand-written
signatures or protocols). Secrets never travel on a command line: URLs come on stdin, keys and
passwords in the environment (``S3_ACCESS_KEY``/``S3_SECRET_KEY``, ``SVC_USER``/``SVC_PASSWORD``,
``REDISCLI_AUTH``, ``PGPASSWORD``).

    svc.py url FIELD [DEFAULT] < URL      user, password, host, port or vhost of scheme://user:pass@host:port/path
    svc.py s3-identities FILE             write the identities JSON (mode 600) from S3_ACCESS_KEY/S3_SECRET_KEY
    svc.py set-env FILE KEY < VALUE       set KEY=VALUE in the env file FILE (its line replaced, else appended)
    svc.py probe PROBE...                 exit 0 if the probe succeeds now, else 1
    svc.py ours PIDFILE WORD...           print the pid in PIDFILE if that process runs with every WORD in its
                                          command line (one services.sh started, not a reused pid), else exit 1
    svc.py stop NAME PID                  SIGTERM, then SIGKILL (with a warning) if still running after 30 s
    svc.py pg-version                     the highest PostgreSQL major version with a server binary (one with a
                                          cluster config in /etc/postgresql first); empty when none
    svc.py debian-mirror                  the Debian mirror apt already uses (else http://deb.debian.org/debian)
    svc.py wait WHAT SECONDS [--while-pid PID] PROBE...
                                          poll PROBE every 0.2 s; exit 1 (with a message) after SECONDS,
                                          or at once when process PID has exited

PROBE is one of
    tcp HOST PORT                         something accepts TCP connections
    http URL [CODE...]                    an HTTP answer (with one of CODEs, if given; SVC_USER/SVC_PASSWORD:
                                          basic auth)
    s3 URL                                the MinIO client with S3_ACCESS_KEY/S3_SECRET_KEY lists the buckets
                                          (URL http://host:port/), or finds bucket BUCKET (.../BUCKET)
    redis HOST PORT                       redis-py's PING answers (with the password REDISCLI_AUTH, if set)
    pg HOST PORT USER                     asyncpg logs in as USER to database postgres (PGPASSWORD) and runs SELECT 1
    run COMMAND...                        COMMAND exits 0 (its output discarded)
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence

# Other modules are imported where used: `url` (called about ten times per run of services.sh)
# starts in a fraction of the time without them.

POLL_S = 0.2
PROBE_TIMEOUT_S = 5.0


# ------------------------------------------------------------------ URLs and JSON (pure)


def url_part(url: str, field: str, default: str = "") -> str:
    """``field`` of ``scheme://user:password@host:port/path?query`` (scheme optional), else
    ``default``. No percent-decoding (as the URL's consumers read it), except the vhost:
    the path after the first ``/`` (``%2F`` → ``/``), ``/`` when there is none."""
    rest = url.split("://", 1)[1] if "://" in url else url
    if field == "vhost":
        path = rest.split("/", 1)[1] if "/" in rest else ""
        return path.split("?", 1)[0].replace("%2F", "/").replace("%2f", "/") or default or "/"
    hostport = rest.split("/", 1)[0].split("?", 1)[0]
    userinfo = ""
    if "@" in hostport:
        userinfo, hostport = hostport.rsplit("@", 1)
    values = {
        "user": userinfo.split(":", 1)[0],
        "password": userinfo.split(":", 1)[1] if ":" in userinfo else "",
        "host": hostport.rsplit(":", 1)[0] if ":" in hostport else hostport,
        "port": hostport.rsplit(":", 1)[1] if ":" in hostport else "",
    }
    if field not in values:
        raise ValueError(f"unknown URL field {field!r} (user, password, host, port, vhost)")
    return values[field] or default


def s3_identities(access_key: str, secret_key: str) -> str:
    """SeaweedFS's ``-s3.config`` JSON: one identity with these keys and every action."""
    import json

    identity = {"name": "rag", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"]}
    return json.dumps({"identities": [identity]}, indent=2) + "\n"


def set_env_value(path: str, key: str, value: str) -> None:
    """Set ``KEY=value`` in the env file ``path``: its ``KEY=`` line replaced (the first; the
    value written as given, no ``sed`` escaping to get wrong), else one appended. The file behind
    a symlink is written (a worktree's ``.env`` may link to another's), atomically, mode 600."""
    target = os.path.realpath(path)
    with open(target, encoding="utf-8") as f:
        lines = f.read().splitlines()
    prefix = f"{key}="
    at = next((i for i, line in enumerate(lines) if line.startswith(prefix)), None)
    if at is None:
        lines.append(prefix + value)
    else:
        lines[at] = prefix + value
    write_private(target, "\n".join(lines) + "\n")


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically, readable by its owner only (mode 600)."""
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".svc-")  # mkstemp: mode 600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ------------------------------------------------------------------ S3 SigV4 and RESP (pure)


# ------------------------------------------------------------------ probes (I/O)


def probe_tcp(host: str, port: str) -> bool:
    import socket

    try:
        with socket.create_connection((host, int(port)), timeout=2):
            return True
    except OSError:
        return False


def http_status(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> int | None:
    """The HTTP status of a request to ``url``, or None when nothing answered HTTP."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, ValueError):
        return None


def probe_http(url: str, *codes: str) -> bool:
    import base64

    headers = {}
    user, password = os.environ.get("SVC_USER"), os.environ.get("SVC_PASSWORD")
    if user:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()
    status = http_status(url, headers=headers)
    return status is not None and (not codes or str(status) in codes)


def probe_s3(url: str) -> bool:
    """The MinIO client (``S3_ACCESS_KEY``/``S3_SECRET_KEY``, one try, ``PROBE_TIMEOUT_S``) lists the
    buckets of ``http(s)://host:port/``, or finds the bucket of ``.../BUCKET``; False on any refusal
    (wrong keys, no such bucket) or when nothing answers."""
    from urllib.parse import urlsplit

    import urllib3
    from minio import Minio
    from minio.error import MinioException

    parts = urlsplit(url)
    http = urllib3.PoolManager(timeout=urllib3.Timeout(PROBE_TIMEOUT_S), retries=False)
    client = Minio(parts.netloc, access_key=os.environ.get("S3_ACCESS_KEY", ""),
                   secret_key=os.environ.get("S3_SECRET_KEY", ""), secure=parts.scheme == "https", http_client=http)
    bucket = parts.path.strip("/")
    try:
        return client.bucket_exists(bucket) if bucket else isinstance(client.list_buckets(), list)
    except (MinioException, OSError, urllib3.exceptions.HTTPError, ValueError):
        return False
    finally:
        http.clear()


def probe_redis(host: str, port: str) -> bool:
    """redis-py's PING answers, with the password ``REDISCLI_AUTH`` if set. Like ``redis-cli``,
    a Redis without a password that refuses the AUTH still counts when it answers the PING."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    password = os.environ.get("REDISCLI_AUTH") or None
    for auth in ((password, None) if password else (None,)):
        client = redis.Redis(host=host, port=int(port), password=auth, socket_timeout=3, socket_connect_timeout=3,
                             retry=Retry(NoBackoff(), 0))  # a probe: one try, the caller polls
        try:
            return bool(client.ping())
        except redis.AuthenticationError:
            continue  # AUTH refused: try the PING alone (a Redis without password)
        except redis.RedisError:
            return False
        finally:
            client.close()
    return False


def probe_pg(host: str, port: str, user: str) -> bool:
    """asyncpg logs in as ``user`` (password ``PGPASSWORD``, if any) to database ``postgres`` on
    ``host:port`` and gets ``SELECT 1``; False on a refusal or when nothing answers."""
    import asyncio

    import asyncpg

    async def login() -> bool:
        conn = await asyncpg.connect(host=host, port=int(port), user=user, database="postgres",
                                     password=os.environ.get("PGPASSWORD") or None, timeout=PROBE_TIMEOUT_S)
        try:
            return bool(await conn.fetchval("SELECT 1") == 1)
        finally:
            await conn.close()

    try:
        return asyncio.run(login())
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return False


def probe_run(*command: str) -> bool:
    import subprocess

    try:
        return subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              check=False).returncode == 0
    except OSError:
        return False


PROBES: dict[str, Callable[..., bool]] = {
    "tcp": probe_tcp, "http": probe_http, "s3": probe_s3, "redis": probe_redis, "pg": probe_pg, "run": probe_run,
}


def make_probe(argv: Sequence[str]) -> Callable[[], bool]:
    """The probe ``argv`` names (``tcp HOST PORT``, ...); ValueError if there is none such."""
    if not argv or argv[0] not in PROBES:
        raise ValueError(f"unknown probe {' '.join(argv)!r} (one of {', '.join(PROBES)})")
    fn, args = PROBES[argv[0]], argv[1:]
    return lambda: fn(*args)


def pid_alive(pid: int) -> bool:
    """``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def pg_version(lib: str = "/usr/lib/postgresql", etc: str = "/etc/postgresql") -> str:
    """The highest major version ``N`` with an executable ``lib/N/bin/postgres``, preferring the
    versions that have a cluster config directory ``etc/N``; ``""`` when there is none."""
    import glob

    versions = []
    for path in glob.glob(os.path.join(lib, "*", "bin", "postgres")):
        version = os.path.basename(os.path.dirname(os.path.dirname(path)))
        if version.isdigit() and os.access(path, os.X_OK):
            versions.append(int(version))
    configured = [v for v in versions if os.path.isdir(os.path.join(etc, str(v)))]
    best = max(configured or versions, default=None)
    return "" if best is None else str(best)


DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian"


def debian_mirror(apt_dir: str = "/etc/apt") -> str:
    """The first ``http(s)://.../debian`` URI of apt's sources (``sources.list``, then
    ``sources.list.d/*.list`` and ``*.sources``: ``deb``/``deb-src`` lines with or without
    ``[options]``, deb822 ``URIs:`` fields), without its trailing ``/``; else
    :data:`DEFAULT_DEBIAN_MIRROR`."""
    import glob
    import re

    line = re.compile(r"^(?:URIs:\s*|deb(?:-src)?\s+(?:\[[^]]*\]\s+)?)((?:https?://\S+\s*)+)", re.MULTILINE)
    parts = os.path.join(apt_dir, "sources.list.d")
    files = [os.path.join(apt_dir, "sources.list"), *sorted(glob.glob(os.path.join(parts, "*.list"))),
             *sorted(glob.glob(os.path.join(parts, "*.sources")))]
    for path in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for match in line.finditer(text):
            for uri in match.group(1).split():
                if re.search(r"/debian/?$", uri):
                    return uri.rstrip("/")
    return DEFAULT_DEBIAN_MIRROR


def our_pid(pid_file: str, words: Sequence[str]) -> int | None:
    """The pid ``pid_file`` holds, if that process is alive and its command line (arguments
    joined by spaces, one after the last) contains every one of ``words``; else None."""
    try:
        with open(pid_file, encoding="utf-8") as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) and all(w in command for w in words) else None


def stop(name: str, pid: int, *, grace_s: float = 30.0, clock: Callable[[], float] = time.monotonic,
         sleep: Callable[[float], None] = time.sleep) -> str:
    """SIGTERM ``pid``, wait up to ``grace_s`` seconds, then SIGKILL: ``"gone"`` (not running),
    ``"stopped"`` or ``"killed"``."""
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    deadline = clock() + grace_s
    while pid_alive(pid):
        if clock() >= deadline:
            print(f"[services] WARNING: {name} (pid {pid}) ignored SIGTERM for {grace_s:g}s, sending SIGKILL",
                  file=sys.stderr)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return "killed"
        sleep(POLL_S)
    return "stopped"


def wait(probe: Callable[[], bool], seconds: float, *, alive: Callable[[], bool] = lambda: True,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Poll ``probe`` every :data:`POLL_S` until it succeeds (None) or ``seconds`` pass
    (``"timeout"``) or ``alive()`` turns false (``"exited"``)."""
    deadline = clock() + seconds
    while not probe():
        if not alive():
            return "exited"
        if clock() >= deadline:
            return "timeout"
        sleep(POLL_S)
    return None


# ------------------------------------------------------------------ command line


def _wait_command(args: list[str]) -> int:
    what, seconds, rest = args[0], float(args[1]), args[2:]
    pid = int(rest[1]) if rest[:1] == ["--while-pid"] else None
    if pid is not None:
        rest = rest[2:]
    outcome = wait(make_probe(rest), seconds, alive=lambda: pid is None or pid_alive(pid))
    if outcome == "timeout":
        print(f"[services] timed out after {args[1]}s waiting for {what}", file=sys.stderr)
    elif outcome == "exited":
        print(f"[services] process {pid} exited while waiting for {what}", file=sys.stderr)
    return 0 if outcome is None else 1


def _url(args: list[str]) -> int:
    print(url_part(sys.stdin.read().strip(), args[0], args[1] if len(args) > 1 else ""))
    return 0


def _s3_identities(args: list[str]) -> int:
    write_private(args[0], s3_identities(os.environ["S3_ACCESS_KEY"], os.environ["S3_SECRET_KEY"]))
    return 0


def _set_env(args: list[str]) -> int:
    set_env_value(args[0], args[1], sys.stdin.read().strip())
    return 0


def _ours(args: list[str]) -> int:
    pid = our_pid(args[0], args[1:])
    if pid is not None:
        print(pid)
    return 0 if pid is not None else 1


def _stop(args: list[str]) -> int:
    stop(args[0], int(args[1]))
    return 0


def _printed(fn: Callable[[], str]) -> Callable[[list[str]], int]:
    def command(args: list[str]) -> int:
        print(fn())
        return 0

    return command


#: command name → its function of the remaining arguments (exit status)
COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "url": _url, "s3-identities": _s3_identities, "probe": lambda args: 0 if make_probe(args)() else 1,
    "wait": _wait_command, "set-env": _set_env, "ours": _ours, "stop": _stop, "pg-version": _printed(pg_version),
    "debian-mirror": _printed(debian_mirror),
}


def main(argv: list[str]) -> int:
    """Exit status: 0 done / probe ok, 1 probe failed or timed out, 64 usage."""
    try:
        command = COMMANDS.get(argv[0]) if argv else None
        if command is not None:
            return command(argv[1:])
    except (IndexError, KeyError, ValueError) as exc:
        print(f"svc.py: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
