#!/usr/bin/env bash
# The test suite: unit tests, then the integration tests that drive a real FreeCAD.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked "$@"
