"""Named device models: a null_blk device whose service time kvds sets, so a verdict does not depend on the
shared virtual disk under this machine (`kvds io bench|sweep|fio-check --device-model NAME`).

null_blk completes every request `completion_nsec` after it reaches the driver (irqmode=2: an hrtimer), admits
at most `hw_queue_depth` requests per submit queue, and holds the device to `mbps` MB/s (a 1 ms token bucket,
reads and writes together). Under the guest lab's instruction-count clock (KVDS_GUEST_CLOCK=icount) those timers
run in guest time, so a stall of the host's CPU is in no latency the guest measures.

Each model states where its numbers come from. A model reproduces a device's QD1 latency, its bandwidth and its
queue depth; it does not reproduce size-dependent service time (a 1 MiB write completes in the same
completion_nsec as a 4 KiB read once the bandwidth budget admits it), garbage collection or write caching.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from harness.errors import UserError

MiB = 1 << 20


@dataclass(frozen=True)
class DeviceModel:
    name: str
    completion_us: float   # service time of one request once admitted (QD1 4 KiB random read latency)
    mbps: int              # bandwidth cap, MB/s, reads and writes together
    queue_depth: int       # requests in flight per submit queue (hw_queue_depth)
    submit_queues: int     # hardware queues (NVMe: one per CPU; AHCI: one)
    source: str            # where the numbers come from

    def nullb_settings(self, size_bytes: int) -> dict[str, int]:
        """configfs attributes for harness.knobs.nullblk.create_nullb."""
        return {"size": -(-size_bytes // MiB), "blocksize": 4096, "queue_mode": 2, "irqmode": 2,
                "completion_nsec": int(round(self.completion_us * 1000)), "hw_queue_depth": self.queue_depth,
                "submit_queues": self.submit_queues, "mbps": self.mbps, "memory_backed": 0}

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


MODELS: dict[str, DeviceModel] = {m.name: m for m in (
    DeviceModel("nvme-gen4", 45.0, 5000, 1023, 2,
                "Samsung 980 PRO 1 TB data sheet: 4 KB random read QD1 T1 22,000 IOPS (45 us), sequential write "
                "5,000 MB/s; NVMe allows 1,023 commands per queue, one queue per CPU (2 vCPUs in the lab)"),
    DeviceModel("sata-ssd", 77.0, 530, 32, 1,
                "Samsung 870 EVO data sheet: 4 KB random read QD1 13,000 IOPS (77 us), sequential write 530 MB/s; "
                "SATA NCQ holds 32 commands, AHCI has one queue"),
    DeviceModel("cloud-disk", 1000.0, 125, 32, 1,
                "AWS EBS gp3 documentation: baseline 125 MiB/s and 'single-digit millisecond' latency (1 ms taken); "
                "its 3,000 IOPS cap is not modelled (null_blk caps bytes, not operations)"),
)}


def model(name: str) -> DeviceModel:
    """The named model, or a one-line UserError listing the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise UserError(f"unknown device model {name!r} (known: {', '.join(MODELS)})") from None
