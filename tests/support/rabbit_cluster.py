"""A throw-away RabbitMQ cluster of ``size`` nodes on this host, for the broker-failover tests.

Each node has its own node name (``rag<tag>n<i>@localhost``), AMQP and distribution ports (free
ports, kept across its restarts), config file, mnesia and log directories under a temporary
directory owned by the ``rabbitmq`` user (Debian's ``rabbitmq-server`` runs as that user), and
its own (empty) plugins file: no management plugin, the CLI (``rabbitmqctl -n``) does the rest.
The nodes share the host's Erlang cookie (``/var/lib/rabbitmq/.erlang.cookie``) and form the
cluster at boot (``cluster_formation.classic_config``). The node the machine started
(``rabbit@localhost``) is never touched.

:meth:`RabbitCluster.start_node` runs ``rabbitmq-server`` in the foreground as a child of the test
(``setpriv`` to the rabbitmq user, no fork); :meth:`stop_node` is a graceful stop (SIGTERM: the
server script runs ``rabbitmqctl stop``), :meth:`kill_node` a crash (SIGKILL to the node's Erlang
VM, by the pid the node wrote). Needs root and Debian's ``rabbitmq-server`` package
(``scripts/services.sh up`` installs it).
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tests.support import Proc, free_port, poll

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/sbin/rabbitmqctl"
COOKIE_HOME = "/var/lib/rabbitmq"


@dataclass
class Node:
    name: str
    amqp_port: int
    dist_port: int
    home: Path
    proc: Proc | None = None

    @property
    def pid_file(self) -> Path:
        return self.home / "pid"


def available() -> str | None:
    """Why a cluster cannot be started here (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (rabbitmq-server drops to the rabbitmq user)"
    if not (Path(SERVER).exists() and Path(CTL).exists() and shutil.which("setpriv")):
        return "needs Debian's rabbitmq-server and setpriv"
    try:
        pwd.getpwnam("rabbitmq")
    except KeyError:
        return "no rabbitmq user"
    return None


class RabbitCluster:
    """``size`` nodes clustered at boot; see the module docstring."""

    def __init__(self, size: int, tag: str, log_dir: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"rag-rmq-{tag}-"))
        self.log_dir = log_dir
        self.nodes = [Node(f"rag{tag}n{i}@localhost", free_port(), free_port(), self.dir / f"n{i}")
                      for i in range(size)]
        user = pwd.getpwnam("rabbitmq")
        os.chmod(self.dir, 0o755)
        peers = "\n".join(f"cluster_formation.classic_config.nodes.{i + 1} = {n.name}"
                          for i, n in enumerate(self.nodes))
        for n in self.nodes:
            (n.home / "mnesia").mkdir(parents=True)
            (n.home / "log").mkdir()
            (n.home / "rabbitmq.conf").write_text(
                f"listeners.tcp.1 = 127.0.0.1:{n.amqp_port}\n"
                "cluster_formation.peer_discovery_backend = classic_config\n"
                f"{peers}\n")
            (n.home / "enabled_plugins").write_text("[].\n")
            for path in [n.home, *n.home.rglob("*")]:
                os.chown(path, user.pw_uid, user.pw_gid)

    # ---------------------------------------------------------------- nodes

    def start(self, user: str, password: str, vhost: str, timeout_s: float = 180) -> None:
        """Boot every node at once, wait until all run as one cluster, then add ``user`` (administrator,
        all permissions on ``vhost``, created)."""
        for i in range(len(self.nodes)):
            self.start_node(i, wait=False)
        for i in range(len(self.nodes)):
            self.wait_running(i, timeout_s)
        self.ctl(0, "add_vhost", vhost)
        self.ctl(0, "add_user", user, password)
        self.ctl(0, "set_user_tags", user, "administrator")
        self.ctl(0, "set_permissions", "-p", vhost, user, ".*", ".*", ".*")

    def start_node(self, i: int, wait: bool = True, timeout_s: float = 180) -> None:
        n = self.nodes[i]
        assert n.proc is None or not n.proc.alive(), f"{n.name} is running"
        env = {**os.environ, "HOME": COOKIE_HOME, "RABBITMQ_NODENAME": n.name,
               "RABBITMQ_NODE_PORT": str(n.amqp_port), "RABBITMQ_DIST_PORT": str(n.dist_port),
               "RABBITMQ_CONFIG_FILE": str(n.home / "rabbitmq.conf"),
               "RABBITMQ_ADVANCED_CONFIG_FILE": str(n.home / "advanced.config"),
               "RABBITMQ_ENABLED_PLUGINS_FILE": str(n.home / "enabled_plugins"),
               "RABBITMQ_MNESIA_BASE": str(n.home / "mnesia"), "RABBITMQ_LOG_BASE": str(n.home / "log"),
               "RABBITMQ_PID_FILE": str(n.pid_file)}
        n.pid_file.unlink(missing_ok=True)
        log = self.log_dir / f"{n.name}.log"
        fh = open(log, "ab")
        popen = subprocess.Popen(["setpriv", "--reuid=rabbitmq", "--regid=rabbitmq", "--init-groups", SERVER],
                                 cwd=COOKIE_HOME, env=env, stdout=fh, stderr=subprocess.STDOUT)
        n.proc = Proc(n.name, popen, log)
        if wait:
            self.wait_running(i, timeout_s)

    def wait_running(self, i: int, timeout_s: float = 180) -> None:
        """Until the node has booted (``rabbitmqctl await_startup``) and its AMQP port answers."""
        n = self.nodes[i]

        def up() -> bool:
            assert n.proc is not None and n.proc.alive(), f"{n.name} exited:\n{n.proc and n.proc.tail()}"
            return self.ctl_ok(i, "await_startup", "--timeout", "20")

        poll(up, timeout=timeout_s, interval=1, what=f"{n.name} running")

    def stop_node(self, i: int, timeout_s: float = 90) -> None:
        """Graceful stop (SIGTERM to the server script: ``rabbitmqctl stop``); returns once it exited."""
        n = self.nodes[i]
        assert n.proc is not None
        n.proc.popen.terminate()
        n.proc.popen.wait(timeout_s)

    def kill_node(self, i: int, timeout_s: float = 30) -> None:
        """A crash: SIGKILL to the node's Erlang VM (pid from its pid file); returns once it is gone."""
        n = self.nodes[i]
        assert n.proc is not None
        pid = int(n.pid_file.read_text().strip())
        os.kill(pid, signal.SIGKILL)
        n.proc.popen.wait(timeout_s)

    def close(self) -> None:
        """Stop every node still running (SIGTERM, then SIGKILL to its VM) and remove the directory."""
        for i, n in enumerate(self.nodes):
            if n.proc is not None and n.proc.alive():
                try:
                    self.stop_node(i, timeout_s=30)
                except subprocess.TimeoutExpired:
                    if n.pid_file.exists():
                        os.kill(int(n.pid_file.read_text().strip()), signal.SIGKILL)
                    n.proc.popen.kill()
                    n.proc.popen.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---------------------------------------------------------------- CLI

    def ctl(self, i: int, *args: str, timeout_s: float = 60) -> str:
        """``rabbitmqctl -q -n <node i> ARGS``; its stdout. CalledProcessError on failure."""
        return subprocess.run([CTL, "-q", "-n", self.nodes[i].name, *args], check=True, capture_output=True,
                              text=True, timeout=timeout_s).stdout

    def ctl_ok(self, i: int, *args: str) -> bool:
        try:
            self.ctl(i, *args)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return False
        return True

    def running(self) -> list[int]:
        return [i for i, n in enumerate(self.nodes) if n.proc is not None and n.proc.alive()]

    def queue_info(self, vhost: str, queue: str) -> dict[str, str]:
        """``type, leader, members, online, messages, consumers`` of ``queue``, asked of a running node."""
        fields = ["name", "type", "leader", "members", "online", "messages", "consumers"]
        for i in self.running():
            try:
                out = self.ctl(i, "list_queues", "-p", vhost, "--no-table-headers", *fields, timeout_s=30)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                continue
            for line in out.splitlines():
                parts = line.split("\t")
                if parts and parts[0] == queue:
                    return dict(zip(fields, parts, strict=False))
        return {}

    def index_of(self, node_name: str) -> int:
        return next(i for i, n in enumerate(self.nodes) if n.name == node_name)

    def leader(self, vhost: str, queue: str) -> int:
        """Index of the node leading ``queue`` (polls until one is elected)."""
        info = poll(lambda: (lambda q: q if q.get("leader", "") in {n.name for n in self.nodes} else None)(
            self.queue_info(vhost, queue)), timeout=60, interval=0.5, what=f"a leader of {queue}")
        return self.index_of(info["leader"])

    def wait_online(self, vhost: str, queue: str, members: int, timeout_s: float = 120) -> dict[str, str]:
        """Until ``members`` replicas of ``queue`` are online (a restarted node's replica rejoined)."""
        def online() -> dict[str, str] | None:
            q = self.queue_info(vhost, queue)
            return q if q and q.get("online", "").count("@") >= members else None

        return poll(online, timeout=timeout_s, interval=1, what=f"{members} replicas of {queue} online")

    def url(self, user: str, password: str, vhost: str) -> str:
        """``AMQP_URL`` naming every node: ``amqp://user:pass@127.0.0.1:p1,127.0.0.1:p2,.../vhost``."""
        hosts = ",".join(f"127.0.0.1:{n.amqp_port}" for n in self.nodes)
        return f"amqp://{quote(user, safe='')}:{quote(password, safe='')}@{hosts}/{quote(vhost, safe='')}"

