#!/usr/bin/env bash
# The main job of README.md: import the bundled Keras ResNet-50 (ONNX), partition it into
# TVM tuning tasks with the FuseOps rules, key every task, and list the distinct tasks.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p tgc-cli
./target/release/tgc tasks models/keras-resnet50.onnx "$@"
