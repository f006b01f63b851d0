"""A minimal client for `python -m tgc_worker`, used by the tests (stdlib only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tgc_worker import PROTOCOL_VERSION  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)  # tvm/python


class WorkerProcess:
    def __init__(self, python: str | None = None, stderr_path: str | None = None,
                 env: dict | None = None):
        python = python or os.environ.get("TGC_PYTHON") or sys.executable
        env = dict(os.environ if env is None else env)
        env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._stderr = open(stderr_path, "ab") if stderr_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            [python, "-m", "tgc_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        self._next = 0
        self._lock = threading.Lock()

    def send_raw(self, line: str) -> dict:
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()
        out = self.proc.stdout.readline()
        if not out:
            raise RuntimeError(f"worker exited (rc={self.proc.poll()})")
        return json.loads(out)

    def request(self, method: str, params: dict | None = None) -> dict:
        with self._lock:
            self._next += 1
            req = {"v": PROTOCOL_VERSION, "id": self._next, "method": method, "params": params or {}}
            resp = self.send_raw(json.dumps(req))
            assert resp["id"] == self._next, resp
            return resp

    def call(self, method: str, params: dict | None = None) -> dict:
        resp = self.request(method, params)
        if "error" in resp:
            raise RuntimeError(f"{method} failed: {resp['error']}")
        return resp["result"]

    def close(self, timeout: float = 30) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        rc = self.proc.wait(timeout=timeout)
        if self.proc.stdout:
            self.proc.stdout.close()
        if self._stderr is not subprocess.DEVNULL:
            self._stderr.close()
        return rc


_shared: WorkerProcess | None = None


def shared_worker() -> WorkerProcess:
    """One worker for all tests of a run (TVM's import and MetaSchedule's set-up are slow)."""
    global _shared
    if _shared is None or _shared.proc.poll() is not None:
        log = os.environ.get("TGC_WORKER_LOG")
        _shared = WorkerProcess(stderr_path=log)
        import atexit

        atexit.register(_shared.close)
    return _shared
