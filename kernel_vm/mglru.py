"""MGLRU (multi-generational LRU) on and off, and its thrashing guard min_ttl_ms, through the journal.

`/sys/kernel/mm/lru_gen/enabled` takes y/n (or a feature bitmask); `min_ttl_ms` keeps the working set of
the last N ms from being evicted (the kernel OOM-kills instead). Absent when CONFIG_LRU_GEN is off.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness import knobs

LRU_GEN = Path("/sys/kernel/mm/lru_gen")


@dataclass(frozen=True)
class Setting:
    """One MGLRU state a variant runs under; `keep` leaves the host as it is."""

    name: str  # "keep", "on", "off"
    min_ttl_ms: int | None = None

    def label(self) -> str:
        if self.name == "keep":
            return ""
        return f"mglru-{self.name}" + (f"-ttl{self.min_ttl_ms}" if self.min_ttl_ms else "")


def available() -> tuple[bool, str]:
    f = LRU_GEN / "enabled"
    if f.exists():
        return True, f"{f} = {f.read_text().strip()}"
    return False, "no /sys/kernel/mm/lru_gen (CONFIG_LRU_GEN off)"


def current() -> dict[str, str]:
    if not (LRU_GEN / "enabled").exists():
        return {}
    return {f.name: f.read_text().strip() for f in (LRU_GEN / "enabled", LRU_GEN / "min_ttl_ms") if f.exists()}


def apply(setting: Setting) -> None:
    """Switch MGLRU for a variant (journaled: restore puts the host's values back)."""
    if setting.name == "keep":
        return
    knobs.write_knob(LRU_GEN / "enabled", "y" if setting.name == "on" else "n")
    if setting.name == "on":
        knobs.write_knob(LRU_GEN / "min_ttl_ms", setting.min_ttl_ms or 0)


def settings_for(choice: str, min_ttl_ms: int | None) -> tuple[list[Setting], dict[str, str]]:
    """The MGLRU settings to compare, and what the summary says about MGLRU.

    choice: auto (on/off where it exists, skipped elsewhere), on, off, both, keep."""
    ok, reason = available()
    if choice == "keep" or (choice == "auto" and not ok):
        return [Setting("keep")], ({"status": "skipped", "reason": reason} if not ok else
                                   {"status": "kept", "reason": f"left as is ({reason})"})
    if not ok:
        from harness.errors import Unavailable

        raise Unavailable(f"MGLRU: {reason}")
    names = ["on", "off"] if choice in ("auto", "both") else [choice]
    out = [Setting(n, min_ttl_ms if n == "on" else None) for n in names]
    return out, {"status": "compared", "reason": reason, "settings": ",".join(s.label() for s in out)}
