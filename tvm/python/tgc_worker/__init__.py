"""tgc's TVM worker: a JSON-lines server the Rust side drives (see PROTOCOL.md)."""

PROTOCOL_VERSION = 16
