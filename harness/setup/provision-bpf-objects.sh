#!/usr/bin/env bash
# Compile-once BPF objects for the eBPF track's libbpf backend (ebpf/objects.py): vmlinux.h from this kernel's
# BTF (bpftool), then clang -target bpf of ebpf/bpf_src/*.bpf.c into /var/cache/kvds/bpf-objects (override with
# KVDS_BPF_OBJECTS), named by a hash of source, flags and kernel build. Recordings then only open the object.
# Idempotent: a cached object returns at once. setup.sh installs clang, bpftool and libbpf-dev first, so a build
# that fails here is a failed set-up (exit 1 with the compiler's message).
# Usage: provision-bpf-objects.sh [checkout]   env: KVDS_PYTHON (default: the checkout's .venv/bin/python)
set -euo pipefail
top="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$top"
py="${KVDS_PYTHON:-$top/.venv/bin/python}"
if [ ! -x "$py" ]; then
  echo "provision-bpf-objects: no Python with kvds at $py (run harness/setup/setup.sh, or set KVDS_PYTHON)" >&2
  exit 2
fi
if ! "$py" -m ebpf.objects --quiet; then
  echo "provision-bpf-objects: FAILED to build kvds's BPF object (message above); see kvds doctor ebpf.libbpf" >&2
  exit 1
fi
