#!/usr/bin/env bash
# I/O priority track: compile io_priority/ioload.c into the kvds cache (a no-op when already built).
# Usage: provision-io.sh [checkout]   env: KVDS_PYTHON (default: the checkout's .venv/bin/python)
set -euo pipefail
top="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$top"
"${KVDS_PYTHON:-$top/.venv/bin/python}" -m io_priority.ioload_launch >/dev/null
