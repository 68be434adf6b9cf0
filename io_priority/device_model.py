"""Named device models: a null_blk device whose service time kvds sets, so a verdict does not depend on the
shared virtual disk under this machine (`kvds io bench|sweep|fio-check --device-model NAME`).

The device (null_blk with kernel_patches/io_model, irqmode=2) admits at most `hw_queue_depth` requests per submit
queue and serves their bytes one request at a time, in the order the driver receives them, at `service_mbps` MB/s
(reads and writes together); a request completes `completion_nsec` after its own transfer ends (an hrtimer). So a
request's service time is its wait behind the bytes queued ahead of it, its own bytes at the model's bandwidth, and
the model's latency: a 16 KiB read on an idle sata-ssd takes 77 + 31 us, and behind 8 MiB of writes about 16 ms
more. null_blk's own bandwidth cap (`mbps`, a token bucket refilled every millisecond that stops the queue and
requeues a request when it is empty) is not used: how long a request waited under it depended on where in the tick
it arrived, not on the bytes ahead of it (docs/measurements/io.md, 2026-12-02). Under the guest lab's
instruction-count clock (KVDS_GUEST_CLOCK=icount-warp) those timers run in guest time, so a stall of the host's CPU
is in no latency the guest measures.

Each model states where its numbers come from. A model reproduces a device's QD1 latency, its bandwidth (as a
per-byte transfer time) and its queue depth; it does not reproduce parallel service inside the device (one
transfer at a time), garbage collection or write caching.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from harness.errors import UserError

MiB = 1 << 20


@dataclass(frozen=True)
class DeviceModel:
    name: str
    completion_us: float   # latency added after a request's transfer (QD1 4 KiB random read latency)
    mbps: int              # bandwidth, MB/s (10^6 bytes/s), reads and writes together, one transfer at a time
    queue_depth: int       # requests in flight per submit queue (hw_queue_depth)
    submit_queues: int     # hardware queues (NVMe: one per CPU; AHCI: one)
    source: str            # where the numbers come from

    def nullb_settings(self, size_bytes: int) -> dict[str, int]:
        """configfs attributes for harness.knobs.nullblk.create_nullb."""
        return {"size": -(-size_bytes // MiB), "blocksize": 4096, "queue_mode": 2, "irqmode": 2,
                "completion_nsec": int(round(self.completion_us * 1000)), "hw_queue_depth": self.queue_depth,
                "submit_queues": self.submit_queues, "service_mbps": self.mbps, "memory_backed": 0}

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
                "its 3,000 IOPS cap is not modelled (the model times bytes, not operations)"),
)}


def model(name: str) -> DeviceModel:
    """The named model, or a one-line UserError listing the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        raise UserError(f"unknown device model {name!r} (known: {', '.join(MODELS)})") from None
