"""A TVM RPC tracker and device servers on loopback, started with TVM's own entry points
(`python -m tvm.exec.rpc_tracker`, `python -m tvm.exec.rpc_server`), for tests and
scripts/bench_rpc.py. Every process gets its own process group, so stopping a server also
stops the session process it forked for a client (what a device dropping out looks like),
and `stop()` leaves nothing behind.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

BIND = re.compile(r"bind to [0-9.]+:(\d+)")


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; a race with another process is
    caught by the tracker failing to bind, and the caller tries again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tracker_summary(port: int) -> dict:
    from tvm import rpc

    return rpc.connect_tracker("127.0.0.1", port).summary()


class Cluster:
    """A tracker on a free loopback port, and servers registered under `key`."""

    def __init__(self, python: str | None = None, key: str = "tgc-test", log_dir: str | None = None):
        self.python = python or os.environ.get("TGC_PYTHON") or sys.executable
        self.key = key
        self._tmp = None if log_dir else tempfile.TemporaryDirectory(prefix="tgc-rpc-")
        self.log_dir = log_dir or self._tmp.name
        self.tracker: subprocess.Popen | None = None
        self.port: int | None = None
        self.servers: list[subprocess.Popen] = []

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen:
        with open(os.path.join(self.log_dir, log), "ab") as f:
            return subprocess.Popen(
                [self.python, "-m", *args],
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def start_tracker(self, timeout_s: float = 30.0) -> int:
        for attempt in range(5):
            port = free_port()
            log = f"tracker-{attempt}.log"
            proc = self._spawn(
                ["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port), "--port-end", str(port + 1)],
                log,
            )
            deadline = time.time() + timeout_s
            while time.time() < deadline and proc.poll() is None:
                text = open(os.path.join(self.log_dir, log), errors="replace").read()
                m = BIND.search(text)
                if m:
                    self.tracker, self.port = proc, int(m.group(1))
                    return self.port
                time.sleep(0.1)
            _kill_group(proc)
        raise RuntimeError(f"the RPC tracker did not start (logs in {self.log_dir})")

    def add_server(self) -> subprocess.Popen:
        assert self.port is not None, "start the tracker first"
        base = free_port()
        proc = self._spawn(
            [
                "tvm.exec.rpc_server",
                "--tracker", f"127.0.0.1:{self.port}",
                "--key", self.key,
                "--host", "127.0.0.1",
                "--port", str(base),
                "--port-end", str(min(base + 100, 65535)),
            ],
            f"server-{len(self.servers)}.log",
        )
        self.servers.append(proc)
        return proc

    def free(self) -> int:
        """Servers free under the key, as the tracker says."""
        q = _tracker_summary(self.port).get("queue_info", {}).get(self.key, {})
        return int(q.get("free", 0))

    def wait_free(self, n: int, timeout_s: float = 60.0) -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            if self.free() >= n:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{n} servers did not register under {self.key!r} (logs in {self.log_dir})")

    def start(self, servers: int) -> "Cluster":
        self.start_tracker()
        for _ in range(servers):
            self.add_server()
        self.wait_free(servers)
        return self

    def kill_server(self, i: int) -> None:
        """SIGKILL server i and the session process it forked: the device drops out."""
        _kill_group(self.servers[i])

    def stop(self) -> None:
        for p in self.servers:
            _kill_group(p)
        if self.tracker is not None:
            _kill_group(self.tracker)
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _kill_group(proc: subprocess.Popen) -> None:
    # the whole group, also when the leader is gone: a server's session process outlives it
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
