"""The doctor's memory-area capabilities without probing the other areas first.

`doctor.capability` walks the probe areas in name order (ebpf, io, memory, ...), so the first memory lookup
would also run the eBPF and I/O probes; under TCG+KASAN in the guest lab that costs minutes. Every capability the
VM bench needs lives in the memory area, so it is probed first (hiding, errors and unknown names as the doctor's).
"""

from __future__ import annotations

from harness import doctor
from harness.capability import Capability

AREA = "memory"


def capability(name: str) -> Capability:
    return doctor.capability(name, AREA)


def require(*names: str) -> None:
    """Unavailable with the probe's reason when a needed capability is missing (doctor.require, memory first)."""
    doctor.require(*names, area=AREA)
