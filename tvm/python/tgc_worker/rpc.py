"""What a TVM RPC tracker offers under one key (the `rpc_devices` method).

`tgc tune --rpc` asks this before its first task, so an unreachable tracker or a key no
device registered under is one clear error instead of candidates that each wait out their
timeout. TVM's own `connect_tracker` retries a refused connection for a minute; a plain
socket connect with a short timeout comes first.
"""

from __future__ import annotations

import socket

from .errors import WorkerError, one_line

CONNECT_TIMEOUT_S = 5.0


def _address(params: dict) -> tuple[str, int, str]:
    host, port, key = params["tracker_host"], params["tracker_port"], params["key"]
    if not isinstance(host, str) or not host:
        raise WorkerError("bad_params", f"tracker_host must be a host name, got {host!r}")
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise WorkerError("bad_params", f"tracker_port must be an int in [1, 65535], got {port!r}")
    if not isinstance(key, str) or not key:
        raise WorkerError("bad_params", f"key must be a non-empty string, got {key!r}")
    return host, port, key


def devices(params: dict) -> dict:
    host, port, key = _address(params)
    where = f"RPC tracker {host}:{port}"
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise WorkerError("rpc", f"{where}: cannot connect: {one_line(e)}")
    from tvm import rpc

    try:
        summary = rpc.connect_tracker(host, port).summary()
    except Exception as e:  # noqa: BLE001 - not a tracker, or it went away
        raise WorkerError("rpc", f"{where}: no tracker answers there: {one_line(e)}")
    if not isinstance(summary, dict) or not isinstance(summary.get("queue_info"), dict):
        raise WorkerError("rpc", f"{where}: unexpected summary {summary!r}"[:300])
    queues = summary["queue_info"]
    queue = queues.get(key) or {}
    servers = [
        f"{s['addr'][0]}:{s['addr'][1]}"
        for s in summary.get("server_info", [])
        if isinstance(s, dict) and s.get("key") == f"server:{key}" and isinstance(s.get("addr"), list)
    ]
    return {
        "tracker": f"{host}:{port}",
        "key": key,
        "free": int(queue.get("free", 0)),
        "pending": int(queue.get("pending", 0)),
        "servers": sorted(servers),
        "keys": sorted(k for k in queues if isinstance(k, str)),
    }
