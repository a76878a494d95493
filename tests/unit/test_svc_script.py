"""``scripts/svc.py`` (the Python half of ``scripts/services.sh``): URL parts, the SeaweedFS
identities JSON, the polling loop, the TCP probe and closed ports, and the command line. The
probes that speak to a service (S3, Redis, PostgreSQL) are tested against the real ones in
``tests/integration/test_svc_probes.py``."""

from __future__ import annotations

import importlib.util
import io
import json
import socket
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import ROOT


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("svc", ROOT / "scripts" / "svc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


svc = _load()


@pytest.mark.parametrize(("url", "field", "default", "expected"), [
    ("postgresql://rag:s3cret@127.0.0.1:5433/rag", "user", "postgres", "rag"),
    ("postgresql://rag:s3cret@127.0.0.1:5433/rag", "password", "", "s3cret"),
    ("postgresql://rag:s3cret@127.0.0.1:5433/rag", "port", "5432", "5433"),
    ("postgresql://rag:s3cret@127.0.0.1:5433/rag", "host", "", "127.0.0.1"),
    ("postgresql://postgres@127.0.0.1/rag", "port", "5432", "5432"),  # default when absent
    ("postgresql://postgres@127.0.0.1/rag", "password", "", ""),
    ("amqp://u:p:with:colons@h:5672/v?heartbeat=30", "password", "", "p:with:colons"),  # after the first colon
    ("amqp://u:p@h:5672/v?heartbeat=30", "port", "", "5672"),
    ("redis://:pw@127.0.0.1:6380/1", "password", "", "pw"),
    ("redis://:pw@127.0.0.1:6380/1", "user", "x", "x"),  # empty user: the default
    ("redis://127.0.0.1:6379?db=2", "port", "", "6379"),  # query without a path
    ("u:p%40x@h:1", "password", "", "p%40x"),  # no scheme; no percent-decoding
    ("127.0.0.1:9000", "host", "127.0.0.1", "127.0.0.1"),  # S3_ENDPOINT form
    ("http://minio.local:9100/", "port", "9000", "9100"),
    ("minio.local", "port", "9000", "9000"),
    ("amqp://u:p@h:5672/", "vhost", "/", "/"),
    ("amqp://u:p@h:5672", "vhost", "/", "/"),
    ("amqp://u:p@h:5672/other", "vhost", "/", "other"),
    ("amqp://u:p@h:5672/%2Fdev%2fx?heartbeat=30", "vhost", "/", "/dev/x"),
])
def test_url_part(url: str, field: str, default: str, expected: str) -> None:
    assert svc.url_part(url, field, default) == expected


def test_unknown_url_field_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown URL field"):
        svc.url_part("http://h", "path")


def test_identities_json_keeps_any_key_exactly(tmp_path: Path) -> None:
    access, secret = 'a"k\\1', "s\n\u00e9'"
    path = tmp_path / "ids.json"
    path.write_text("old")
    svc.write_private(str(path), svc.s3_identities(access, secret))
    doc = json.loads(path.read_text())
    assert doc["identities"][0]["credentials"] == [{"accessKey": access, "secretKey": secret}]
    assert {"Admin", "Read", "List", "Write"} <= set(doc["identities"][0]["actions"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["ids.json"]  # no temporary file left


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds


def test_wait_returns_when_the_probe_succeeds() -> None:
    answers = iter([False, False, True])
    fake = FakeClock()
    assert svc.wait(lambda: next(answers), 10, clock=fake.clock, sleep=fake.sleep) is None
    assert fake.sleeps == 2


def test_wait_times_out_after_the_deadline() -> None:
    fake = FakeClock()
    assert svc.wait(lambda: False, 1.0, clock=fake.clock, sleep=fake.sleep) == "timeout"
    assert fake.now >= 1.0 and fake.sleeps <= 1.0 / svc.POLL_S + 1


def test_wait_stops_when_the_watched_process_exits() -> None:
    fake = FakeClock()
    alive = iter([True, False])
    assert svc.wait(lambda: False, 60, alive=lambda: next(alive), clock=fake.clock, sleep=fake.sleep) == "exited"
    assert fake.sleeps == 1


def test_tcp_probe_and_closed_ports() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert svc.probe_tcp("127.0.0.1", str(port)) is True
    assert svc.probe_tcp("127.0.0.1", str(port)) is False
    assert svc.probe_redis("127.0.0.1", str(port)) is False
    assert svc.http_status(f"http://127.0.0.1:{port}/") is None


def test_command_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("amqp://u:secret@h:5673/v\n"))
    assert svc.main(["url", "port", "5672"]) == 0
    assert capsys.readouterr().out == "5673\n"
    assert svc.main(["probe", "run", "true"]) == 0
    assert svc.main(["probe", "run", "false"]) == 1
    assert svc.main(["probe", "run", "/no/such/command"]) == 1
    assert svc.main(["wait", "false", "0", "run", "false"]) == 1
    assert "timed out after 0s waiting for false" in capsys.readouterr().err
    assert svc.main(["probe", "nope"]) == 64
    assert svc.main(["bogus"]) == 64
    assert svc.main([]) == 64


def _python(code: str, *words: str) -> subprocess.Popen[str]:
    """A Python child running ``code`` with ``words`` as extra arguments; it prints ``ready`` first."""
    child = subprocess.Popen([sys.executable, "-c", f"import signal, sys, time\n{code}\nprint('ready', flush=True)\n"
                              "time.sleep(300)", *words], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    return child


def test_our_pid_is_the_pid_file_s_process_when_its_command_line_matches(tmp_path: Path) -> None:
    child = _python("", "svc-test-marker", "-dir=/x ")
    try:
        pid_file = tmp_path / "p.pid"
        pid_file.write_text(f"{child.pid}\n")
        assert svc.our_pid(str(pid_file), ["svc-test-marker", "-dir=/x "]) == child.pid
        assert svc.our_pid(str(pid_file), ["svc-test-marker", "other-word"]) is None  # a reused pid
        assert svc.our_pid(str(tmp_path / "missing.pid"), []) is None
        pid_file.write_text("not a pid")
        assert svc.our_pid(str(pid_file), []) is None
    finally:
        child.kill()
        child.wait()
    pid_file.write_text(str(child.pid))
    assert svc.our_pid(str(pid_file), []) is None  # exited


def test_stop_terminates_then_kills_what_ignores_sigterm(capsys: pytest.CaptureFixture[str]) -> None:
    polite = _python("")
    assert svc.stop("polite", polite.pid, grace_s=30) == "stopped"
    assert polite.wait(timeout=10) == -15
    stubborn = _python("signal.signal(signal.SIGTERM, signal.SIG_IGN)")
    assert svc.stop("stubborn", stubborn.pid, grace_s=0.3) == "killed"
    assert stubborn.wait(timeout=10) == -9
    assert "stubborn (pid" in capsys.readouterr().err
    assert svc.stop("gone", stubborn.pid) == "gone"


def test_pg_version_prefers_a_configured_cluster(tmp_path: Path) -> None:
    lib, etc = tmp_path / "lib", tmp_path / "etc"
    assert svc.pg_version(str(lib), str(etc)) == ""
    for version in ("13", "15", "17", "beta"):
        binary = lib / version / "bin" / "postgres"
        binary.parent.mkdir(parents=True)
        binary.write_text("#!/bin/sh\n")
        binary.chmod(0o755)
    (lib / "16" / "bin").mkdir(parents=True)
    (lib / "16" / "bin" / "postgres").write_text("not executable")
    assert svc.pg_version(str(lib), str(etc)) == "17"  # the highest; 16 has no server binary, beta no number
    (etc / "15").mkdir(parents=True)
    assert svc.pg_version(str(lib), str(etc)) == "15"  # the one with a cluster config wins


@pytest.mark.parametrize(("files", "expected"), [
    ({}, "http://deb.debian.org/debian"),
    ({"sources.list": "deb [signed-by=/k.gpg arch=amd64] http://mirror.local/debian/ trixie main\n"},
     "http://mirror.local/debian"),
    ({"sources.list": "deb http://security.debian.org/debian-security trixie-security main\n",
      "sources.list.d/debian.sources": "Types: deb\n# http://ignored/debian\nURIs: https://proxy:3142/debian\n"
                                       "Suites: trixie\n"}, "https://proxy:3142/debian"),
    ({"sources.list.d/a.list": "deb-src http://src.example/debian trixie main\n"}, "http://src.example/debian"),
])
def test_debian_mirror_is_the_one_apt_uses(tmp_path: Path, files: dict[str, str], expected: str) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert svc.debian_mirror(str(tmp_path)) == expected


def test_set_env_replaces_the_line_or_appends_and_writes_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "main.env"
    real.write_text("A=1\nREDIS_URL=redis://127.0.0.1:6379/0\n# REDIS_URL=comment\n")
    link = tmp_path / ".env"
    link.symlink_to(real)
    value = "redis://:p|w&x\\1@127.0.0.1:6379/0"  # what sed's s||| would have mangled
    svc.set_env_value(str(link), "REDIS_URL", value)
    assert link.is_symlink()  # the worktree's link kept, the file behind it written
    assert real.read_text() == f"A=1\nREDIS_URL={value}\n# REDIS_URL=comment\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    svc.set_env_value(str(link), "NEW", "v")
    assert real.read_text().endswith("NEW=v\n")
