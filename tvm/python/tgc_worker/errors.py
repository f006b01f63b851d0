"""Errors the worker reports as protocol error responses."""


class WorkerError(Exception):
    """An error with a protocol `kind` and, when known, the task it concerns.

    Kinds (see PROTOCOL.md): protocol, version, unknown_method, bad_params, bad_task,
    unsupported_op, bad_trace, rpc, tvm, internal.
    """

    def __init__(self, kind: str, message: str, task: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.task = task


def one_line(text: str, limit: int = 2000) -> str:
    """Collapse a (possibly multi-line) message into one line of at most `limit` chars.

    TVM errors carry a traceback before the actual message; keep the lines that say
    what went wrong (the last non-empty ones) rather than the stack.
    """
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return "(no message)"
    # TVM's messages look like "...Traceback...\n  File ...\n<Kind>: <message>" possibly
    # followed by context lines. Prefer the first line that looks like "XxxError: ...".
    picked = None
    for ln in lines:
        head = ln.split(":", 1)[0]
        if head.endswith("Error") and " " not in head and not ln.startswith("File "):
            picked = ln
    if picked is None:
        picked = lines[-1] if len(lines) > 1 and lines[0].startswith("Traceback") else lines[0]
        if len(lines) > 1 and not lines[0].startswith("Traceback"):
            picked = " | ".join(lines[:3])
    if len(picked) > limit:
        picked = picked[: limit - 3] + "..."
    return picked
