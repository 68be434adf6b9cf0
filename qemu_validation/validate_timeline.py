"""Where a validate run's time goes under TCG: boot, KUnit at boot, the validator's parts, kselftest, kmemleak.

Two clocks, both the guest kernel's: printk timestamps in dmesg (`printk.time=1` on the command line) mark the
boot (KUnit's suite runs at boot, before /init), and the guest script appends `<mark> <uptime>` lines to
/share/phases.txt between its steps. The validator reports its own fuzz, well-formed and concurrent
milliseconds as KTAP counters. What the kernel clock cannot see (QEMU start, firmware, decompression, exit) is
the host's wall time minus the guest's uptime at the last mark. A phase whose marks are missing is left out
rather than guessed.
"""

from __future__ import annotations

import re

_TS = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")
_KTAP_TOP = re.compile(r"^(?:not )?ok \d+ \S")
CLOCK_TOLERANCE = 1.02   # the guest's uptime may exceed the host's wall time by this much, no more

# (phase name, start mark, end mark) for the guest script's own marks; see validate.guest_script().
SCRIPT_PHASES = (
    ("kmemleak boot scan", "start", "kmemleak_boot"),
    ("validator", "kmemleak_boot", "validator"),
    ("kselftest", "validator", "kselftest"),
    ("KUnit results + final kmemleak scans (6 s settle included)", "kselftest", "kmemleak"),
    ("dmesg copy", "kmemleak", "end"),
)
VALIDATOR_PARTS = (("malformed fuzz", "fuzz_ms"), ("well-formed lines", "valid_ms"),
                   ("concurrent phase", "concurrent_ms"))


def kernel_marks(dmesg: str) -> dict[str, float]:
    """Boot marks from timestamped dmesg: KUnit's first and last top-level KTAP line, and /init starting."""
    marks: dict[str, float] = {}
    for raw in dmesg.splitlines():
        m = _TS.match(raw)
        if not m:
            continue
        t, text = float(m.group(1)), m.group(2)
        if "init" in marks:
            break
        if text.startswith("KTAP version") and "kunit_start" not in marks:
            marks["kunit_start"] = t
        elif "kunit_start" in marks and _KTAP_TOP.match(text):
            marks["kunit_end"] = t
        elif text.startswith("Run /init as init process"):
            marks["init"] = t
    return marks


def script_marks(text: str) -> dict[str, float]:
    """`<mark> <uptime seconds>` lines written by the guest script (the last of a repeated mark wins)."""
    marks: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                marks[parts[0]] = float(parts[1])
            except ValueError:
                continue
    return marks


def breakdown(dmesg: str, marks_text: str, counters: dict[str, int], wall_seconds: float | None) -> list[dict]:
    """Ordered [{"phase", "seconds"}] that add up to the guest's wall time when every mark is present."""
    k, s = kernel_marks(dmesg), script_marks(marks_text)
    out: list[dict] = []
    end = s.get("end")
    if wall_seconds and end is not None and end > wall_seconds * CLOCK_TOLERANCE:
        return [{"phase": f"(guest clock ran {end / wall_seconds:.2f}x the host's: TSC miscalibrated, no breakdown)",
                 "seconds": round(wall_seconds, 2)}]

    def add(name: str, a: float | None, b: float | None) -> None:
        if a is not None and b is not None and b >= a:
            out.append({"phase": name, "seconds": round(b - a, 2)})

    if wall_seconds is not None and end is not None:
        add("outside the kernel clock (QEMU start, firmware, decompression, exit)", end, wall_seconds)
    if "kunit_start" in k and "kunit_end" in k:
        add("kernel boot to KUnit", 0.0, k["kunit_start"])
        add("KUnit suite (at boot)", k["kunit_start"], k["kunit_end"])
        add("kernel boot after KUnit, to /init", k["kunit_end"], k.get("init"))
    else:
        add("kernel boot to /init", 0.0, k.get("init"))
    add("/init to the validate script (mounts)", k.get("init"), s.get("start"))
    for name, a, b in SCRIPT_PHASES:
        add(name, s.get(a), s.get(b))
        if name == "validator" and a in s and b in s:
            parts = [(label, counters[key] / 1000) for label, key in VALIDATOR_PARTS if key in counters]
            for label, sec in parts:
                out.append({"phase": f"  validator: {label}", "seconds": round(sec, 2)})
            rest = s[b] - s[a] - sum(sec for _, sec in parts)
            if parts and rest >= 0:
                out.append({"phase": "  validator: interface, tables, fixed cases", "seconds": round(rest, 2)})
    return out
