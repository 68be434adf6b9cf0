#!/usr/bin/env bash
# Compile-once BPF objects for the eBPF track's libbpf backend (ebpf/objects.py): vmlinux.h from this kernel's
# BTF (bpftool), then clang -target bpf of ebpf/bpf_src/*.bpf.c into /var/cache/kvds/bpf-objects (override with
# KVDS_BPF_OBJECTS), named by a hash of source, flags and kernel build. Recordings then only open the object.
# Idempotent: a cached object returns at once. setup.sh installs clang, bpftool and libbpf-dev first, so a build
# that fails here is a failed set-up (exit 1 with the compiler's message), never a silent fall-back to bcc.
# Usage: provision-bpf-objects.sh [checkout]
set -euo pipefail
top="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$top"
if [ ! -x .venv/bin/python ]; then
  echo "provision-bpf-objects: no .venv in $top (run harness/setup/setup.sh)" >&2
  exit 2
fi
if ! .venv/bin/python -m ebpf.objects --quiet; then
  echo "provision-bpf-objects: FAILED to build kvds's BPF object (message above); see kvds doctor ebpf.libbpf" >&2
  exit 1
fi
