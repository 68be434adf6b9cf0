"""The doctor's memory-area capabilities without probing the other areas first.

`doctor.capability` walks the probe areas in name order (ebpf, io, memory, ...), so the first memory lookup
also runs the eBPF and I/O probes; under TCG+KASAN in the guest lab that costs minutes. Every capability the VM
bench needs lives in the memory area.
"""

from __future__ import annotations

from harness import doctor
from harness.capability import Capability
from harness.errors import Unavailable

AREA = "memory"


def capability(name: str) -> Capability:
    for c in doctor.probe_area(AREA):
        if c.name == name:
            return c
    return doctor.capability(name)


def require(*names: str) -> None:
    """Unavailable with the probe's reason when a needed capability is missing (like doctor.require)."""
    for n in names:
        c = capability(n)
        if not c.ok:
            raise Unavailable(f"{n} is {c.status} on this host: {c.reason}")
