"""A multi-node Ray cluster on this one machine, for benchmarks: ``nodes`` raylets of ``cpus``
logical CPUs each (sleeping workers need no cores), as ``cluster/local_cluster.sh`` starts two.

Each node is a ``ray start`` in its own process group and temp dir, with its own ports (a second
node on one machine clashes on the dashboard agent's default port; other people's clusters on
this machine hold the defaults of the others). :meth:`LoopbackCluster.stop` ends exactly what
it started: the nodes' process groups, then any process whose command line names its temp dir.

    with LoopbackCluster(nodes=4, cpus=16) as cluster:
        ray.init(address=cluster.address)

``dashboard=True`` gives the head Ray's dashboard, whose job server takes ``ray job submit
--address cluster.dashboard_url`` (needs ``ray[default]``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

# Token authentication, said explicitly (Ray's default): distcheck's ensure_ray joins with the token.
AUTH = {"RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "token"), "RAY_task_oom_retries": "2"}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_command() -> str:
    """The ``ray`` next to this Python (the repo's .venv), else the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "ray")
    return beside if os.path.exists(beside) else "ray"


def split_arguments(argv: list[str] | None) -> tuple[list[str], list[str]]:
    """A benchmark's own arguments and those after ``--`` (for the command it runs, as they are);
    ``argv`` None: this process's."""
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        return argv, []
    return argv[: argv.index("--")], argv[argv.index("--") + 1 :]


TICK = os.sysconf("SC_CLK_TCK")  # /proc's CPU figures are in clock ticks


def stat_fields(path: str) -> list[str]:
    """The fields of a ``/proc`` stat file (a process's or a thread's) after the command name."""
    with open(path) as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_seconds(fields: list[str]) -> float:
    """User and system CPU seconds of :func:`stat_fields`."""
    return (int(fields[11]) + int(fields[12])) / TICK


def proc_entries():
    """Every process of this machine, from ``/proc``: ``(pid, the fields of its stat after the
    command name, its command line with NULs)``; one that ends meanwhile is left out."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = stat_fields(f"/proc/{entry}/stat")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().decode(errors="replace")
        except OSError:
            continue
        yield int(entry), fields, command


def _table() -> dict[int, tuple[int, int, str]]:
    """Every live process: pid -> (parent pid, process group, command line)."""
    return {
        pid: (int(fields[1]), int(fields[2]), command)
        for pid, fields, command in proc_entries()
        if fields[0] != "Z"  # a zombie is dead already
    }


def processes_of(groups: list[int], marker: str) -> set[int]:
    """The live processes of ``groups``, those whose command line names ``marker``, and their
    descendants (Ray workers have process groups of their own and rename themselves)."""
    table = _table()
    ours, pid = set(), os.getpid()  # never this process nor its ancestors
    while pid in table and pid not in ours:
        ours.add(pid)
        pid = table[pid][0]
    found = {pid for pid, (_, group, command) in table.items() if group in groups or marker in command} - ours
    while True:
        children = {pid for pid, (parent, _, _) in table.items() if parent in found} - found - ours
        if not children:
            return found
        found |= children


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class LoopbackCluster:
    """``nodes`` Ray nodes of ``cpus`` CPUs on this machine (see the module's docstring)."""

    def __init__(self, nodes: int = 4, cpus: int = 16, log=print, dashboard: bool = False):
        self.nodes, self.cpus, self.log = nodes, cpus, log
        self.root = tempfile.mkdtemp(prefix="dcsim-")  # short: Ray's socket paths must stay < 108 chars
        self.port = free_port()
        self.dashboard_port = free_port() if dashboard else None
        self.groups: list[int] = []
        self.started = 0.0  # seconds to start every node

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def dashboard_url(self) -> str | None:
        """The head's dashboard (job server), if it has one."""
        return None if self.dashboard_port is None else f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def workers(self) -> int:
        return self.nodes * self.cpus

    def _start_node(self, index: int) -> None:
        directory = os.path.join(self.root, f"n{index}")
        os.makedirs(directory)
        where = ["--head", f"--port={self.port}", "--include-dashboard=false"]
        if self.dashboard_port is not None:
            where[2:] = [
                "--include-dashboard=true",
                "--dashboard-host=127.0.0.1",
                f"--dashboard-port={self.dashboard_port}",
            ]
        if index:
            where = [f"--address={self.address}"]
        command = [ray_command(), "start", *where, f"--num-cpus={self.cpus}", f"--temp-dir={directory}"]
        command += [f"--dashboard-agent-listen-port={free_port()}", "--disable-usage-stats"]
        with open(os.path.join(self.root, f"n{index}.log"), "w") as log:
            env = {**os.environ, **AUTH}
            process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log, start_new_session=True)
            self.groups.append(process.pid)
            status = process.wait(timeout=120)
        if status != 0:
            with open(log.name) as f:
                tail = f.read().strip().splitlines()[-5:]
            raise RuntimeError(f"ray start of node {index} failed (status {status}): " + " | ".join(tail))

    def start(self) -> LoopbackCluster:
        token = os.path.expanduser("~/.ray/auth_token")
        if AUTH["RAY_AUTH_MODE"] == "token" and not os.path.exists(token) and "RAY_AUTH_TOKEN" not in os.environ:
            subprocess.run([ray_command(), "get-auth-token", "--generate"], check=True, capture_output=True)
        begin = time.perf_counter()
        for index in range(self.nodes):
            self._start_node(index)
        self.started = time.perf_counter() - begin
        where = f"{self.address}, temp dir {self.root}"
        self.log(f"loopback cluster: {self.nodes} nodes x {self.cpus} CPUs at {where} ({self.started:.1f} s)")
        return self

    def processes(self) -> set[int]:
        return processes_of(self.groups, self.root)

    def stop(self) -> None:
        """SIGTERM to every process of the cluster, SIGKILL to what is left after 10 s."""
        ours = self.processes()
        _signal(ours, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ours = (ours | self.processes()) & set(_table())
            if not ours:
                break
            time.sleep(0.2)
        if ours:
            _signal(ours, signal.SIGKILL)
            self.log(f"loopback cluster: killed {len(ours)} process(es) that ignored SIGTERM")
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LoopbackCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
