"""A Ray cluster of several nodes on one machine, on loopback only: for the executor's tests and benchmark.

Every node is on 127.0.0.1, because that is the one address for which Ray 2.60's servers (the GCS, the raylets,
the agents) listen on loopback only: for any other node address, 127.0.0.2 included, they listen on the wildcard
address (``0.0.0.0`` / ``::``), reachable from the network. Two obstacles, each met here:

- Ray rewrites ``127.0.0.1`` and ``localhost`` to the machine's network address (``resolve_ip_for_localhost``,
  shared/SETUP-NOTES.md, "Ray"). A node is therefore started by this module's ``main`` (``python -m
  handleit.harness.ray_loopback start ...``): Ray's own ``ray start`` with that one function made to keep a
  loopback address as given.
- A driver keeps 127.0.0.1 when ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` is in its environment (Ray then takes
  the machine for a cluster of its own and uses the loopback address as its node address): see
  :meth:`LoopbackCluster.driver_env`. A driver that lacks it reaches for the network address instead.

Every port Ray would otherwise pick by default (the GCS, the client server, the agents', the workers') is chosen
free, so that two clusters on one machine do not clash. Each node is a ``ray start --block`` process in a session
of its own, with its own ``--temp-dir``: :meth:`LoopbackCluster.kill_node` kills one node and everything it
started (a lost machine), :meth:`LoopbackCluster.stop` every node, even when a test failed. Not ``ray stop``: that
stops every Ray node of the machine, other people's too.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HEAD_IP = "127.0.0.1"
# Set in a driver's environment before Ray is imported: the driver keeps 127.0.0.1 as its own address.
SINGLE_MACHINE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
# A lost node is declared dead after period x threshold (Ray's defaults: 3 s x 5); shorter for tests.
FAST_FAILURE_DETECTION = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
_PORTS_PER_NODE = 8  # GCS or node manager, object manager, client server, metrics, 3 agents' ports, spare
_WORKER_PORTS = 60  # worker processes' ports per node


def _free(port: int, host: str = HEAD_IP) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class LoopbackCluster:
    """``nodes`` Ray nodes of ``cpus_per_node`` CPUs each, all on 127.0.0.1; a context manager."""

    nodes: int = 2
    cpus_per_node: int = 1
    env: dict[str, str] = field(default_factory=lambda: dict(FAST_FAILURE_DETECTION))
    start_timeout_s: float = 120.0
    procs: list[subprocess.Popen] = field(default_factory=list, init=False)

    def __post_init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="rl", dir="/tmp"))  # short: Ray's unix socket paths are limited
        self.base_port = self._pick_base_port()
        self.gcs_port = self.base_port
        self.address = f"{HEAD_IP}:{self.gcs_port}"

    def _pick_base_port(self) -> int:
        span = (_PORTS_PER_NODE + _WORKER_PORTS) * self.nodes
        rng = random.Random(os.getpid() ^ time.time_ns())
        for _ in range(200):  # away from Ray's defaults (6379, 8265, 10001, 10002-19999, 52365)
            base = rng.randrange(30000, 50000 - span, 10)
            if all(_free(base + k) for k in range(0, span, 7)) and _free(base):
                return base
        raise RuntimeError("no free port range for a loopback Ray cluster")

    def _node_args(self, i: int) -> list[str]:
        ip = HEAD_IP
        p = self.base_port + i * (_PORTS_PER_NODE + _WORKER_PORTS)
        workers = p + _PORTS_PER_NODE
        args = ["--num-cpus", str(self.cpus_per_node), "--node-ip-address", ip, "--disable-usage-stats",
                "--temp-dir", str(self.root / f"n{i}"), "--object-manager-port", str(p + 1),
                "--metrics-export-port", str(p + 3), "--dashboard-agent-listen-port", str(p + 4),
                "--dashboard-agent-grpc-port", str(p + 5), "--runtime-env-agent-port", str(p + 6),
                "--min-worker-port", str(workers), "--max-worker-port", str(workers + _WORKER_PORTS - 1), "--block"]
        if i == 0:
            return ["--head", "--port", str(p), "--ray-client-server-port", str(p + 2), "--include-dashboard",
                    "false", *args]
        return ["--address", self.address, "--node-manager-port", str(p), *args]

    def driver_env(self) -> dict[str, str]:
        """The environment for a driver process of this cluster (see the module's docstring)."""
        env = {**os.environ, **SINGLE_MACHINE_ENV, "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("RAY_ADDRESS", None)
        return env

    def start(self) -> LoopbackCluster:
        env = {**os.environ, **self.env, "RAY_USAGE_STATS_ENABLED": "0"}
        for name in ("RAY_ADDRESS", *SINGLE_MACHINE_ENV):  # a node joining a cluster refuses the latter
            env.pop(name, None)
        try:
            for i in range(self.nodes):
                log = (self.root / f"node{i}.log").open("w")
                self.procs.append(subprocess.Popen([sys.executable, "-m", __name__, "start", *self._node_args(i)],
                                                   stdout=log,
                                                   stderr=subprocess.STDOUT, env=env, start_new_session=True))
                self._wait_for_nodes(i + 1)
        except BaseException:
            self.stop()
            raise
        return self

    def alive_nodes(self) -> list[str]:
        """``IP:node-manager-port`` of each node that Ray itself reports alive."""
        out = subprocess.run([sys.executable, "-c", _LIST_NODES, self.address], capture_output=True, text=True,
                             timeout=60, env=self.driver_env())
        return out.stdout.split() if out.returncode == 0 else []

    def _wait_for_nodes(self, n: int) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a Ray node exited while starting (see {self.root}/node*.log):\n" + self.log_tail())
            if _free(self.gcs_port) is False and len(self.alive_nodes()) >= n:
                return
            time.sleep(1.0)
        raise RuntimeError(f"{n} Ray node(s) did not come up in {self.start_timeout_s:.0f} s:\n" + self.log_tail())

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for log in sorted(self.root.glob("node*.log")):
            out.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def node_titles(self, i: int) -> list[str]:
        """The command lines of node ``i``'s processes (Ray titles a worker ``ray::Class.method`` while it runs
        a task)."""
        titles = []
        for pid in self.pids(nodes=[i]):
            try:
                titles.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
        return titles

    def pids(self, nodes: list[int] | None = None) -> list[int]:
        """Every process of every node (or of ``nodes``) still running: the node's session (its raylet puts the
        workers in process groups of their own, in the same session)."""
        sessions = {p.pid for k, p in enumerate(self.procs) if nodes is None or k in nodes}
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                state, session = fields[0], int(fields[3])
            except (OSError, ValueError, IndexError):
                continue
            if session in sessions and state != "Z":  # a zombie is gone, only not yet reaped
                found.append(int(stat.parent.name))
        return found

    def _signal(self, nodes: list[int], sig: int) -> None:
        for pid in self.pids(nodes):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def kill_node(self, i: int) -> None:
        """Kill node ``i`` and everything it started, at once (SIGKILL to every process of its session): a lost
        machine."""
        self._signal([i], signal.SIGKILL)
        self.procs[i].wait(timeout=30)

    def stop(self) -> None:
        """Stop every node (SIGTERM to each process of their sessions, SIGKILL what is left after 10 s); remove
        the temporary files."""
        every = list(range(len(self.procs)))
        self._signal(every, signal.SIGTERM)
        deadline = time.monotonic() + 10.0
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.2)
        self._signal(every, signal.SIGKILL)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LoopbackCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# Run in a short-lived process: the alive nodes' addresses, without making the caller a Ray driver.
_LIST_NODES = """
import sys, ray
ray.init(address=sys.argv[1], _node_ip_address=sys.argv[1].rsplit(":", 1)[0], log_to_driver=False,
         logging_level="ERROR")
print(" ".join(f'{n["NodeManagerAddress"]}:{n["NodeManagerPort"]}' for n in ray.nodes() if n["Alive"]))
"""


def listening_addresses(pids: list[int]) -> set[tuple[str, int]]:
    """The (address, port) on which the given processes listen for TCP connections (from /proc)."""
    return {local for state, local, _ in _tcp_sockets(pids) if state == "0A"}  # 0A: LISTEN


def connected_addresses(pids: list[int]) -> set[tuple[tuple[str, int], tuple[str, int]]]:
    """The (local, remote) (address, port) pairs of the given processes' established TCP connections."""
    return {(local, remote) for state, local, remote in _tcp_sockets(pids) if state == "01"}  # 01: ESTABLISHED


def _tcp_sockets(pids: list[int]) -> list[tuple[str, tuple[str, int], tuple[str, int]]]:
    """(state, local, remote) of every TCP socket the given processes hold, from /proc/net/tcp{,6}."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[9] in inodes:
                found.append((cols[3], _endpoint(cols[1], width), _endpoint(cols[2], width)))
    return found


def _endpoint(hex_endpoint: str, width: int) -> tuple[str, int]:
    hex_ip, hex_port = hex_endpoint.split(":")
    return _ip_of_hex(hex_ip, width), int(hex_port, 16)


def _ip_of_hex(hex_ip: str, width: int) -> str:
    raw = bytes.fromhex(hex_ip)
    if width == 8:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[k:k + 4][::-1] for k in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def _keep_loopback(host: str) -> str:
    """Ray's ``resolve_ip_for_localhost`` for a loopback node: a loopback address is kept as given, anything
    else is refused (a node of this cluster has no other address)."""
    if host != HEAD_IP:
        raise ValueError(f"a loopback cluster's node address must be {HEAD_IP}, got {host!r}")
    return host


def main(argv: list[str] | None = None) -> int:
    """``python -m handleit.harness.ray_loopback start ARGS``: Ray's own ``ray start ARGS`` for a node on
    127.0.0.1 (see the module's docstring)."""
    import ray._private.services as ray_services  # lazy: ray (an optional cluster back end, ~1 s to import)
    from ray.scripts.scripts import cli as ray_cli  # lazy: ray (an optional cluster back end, ~1 s to import)

    ray_services.resolve_ip_for_localhost = _keep_loopback
    return ray_cli.main(args=sys.argv[1:] if argv is None else argv, prog_name="ray", standalone_mode=True)


if __name__ == "__main__":
    sys.exit(main())
