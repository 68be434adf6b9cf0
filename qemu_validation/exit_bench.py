"""`kvds qemu exit-bench`: what mm_intent costs the process exit path, measured inside the guest kernel.

guest/exit_bench.c times fork + exit + wait of a child with the registry unused since boot, used by one other
process, and used by 257 processes holding 1,025 intents; raw per-iteration samples are reduced in the guest to
median, p90 and mean. Run it on two kernels (the series before and after a change) to compare exit paths; the
figures come from one boot each, under TCG and the debug kernel's instrumentation, so compare kernels with the
same configuration, and states within one run.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

from harness.errors import UserError
from harness.progress import say
from harness.results import ResultStore, Run
from qemu_validation import build, cachedirs, guest

SOURCE = Path(__file__).resolve().parent / "guest" / "exit_bench.c"
GUEST_PATH = "bin/exit_bench"
_LINE = re.compile(r"^exit_bench (\w+) n=(\d+) median_ns=(\d+) p90_ns=(\d+) mean_ns=(\d+)$", re.M)
_HELD = re.compile(r"^exit_bench intents_held=(\d+) processes_holding=(\d+)$", re.M)


def binary() -> Path:
    key = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    out = cachedirs.guest_bin() / key / "exit_bench"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        p = subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out), str(SOURCE)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise build.BuildError(f"compiling {SOURCE.name} failed:\n{p.stderr.strip()[-1500:]}")
    return out


def parse(text: str) -> dict:
    states = {m.group(1): {"n": int(m.group(2)), "median_ns": int(m.group(3)), "p90_ns": int(m.group(4)),
                           "mean_ns": int(m.group(5))} for m in _LINE.finditer(text)}
    held = _HELD.search(text)
    return {"states": states, "intents_held": int(held.group(1)) if held else None,
            "processes_holding": int(held.group(2)) if held else None}


def bench(kernel_id: str | None, iterations: int = 2000, timeout: float = 900,
          store: ResultStore | None = None) -> tuple[dict, Run]:
    if iterations < 10:
        raise UserError("--iterations must be at least 10 (a median and a p90 from fewer say nothing)")
    kb = guest.kernel(kernel_id)
    run = (store or ResultStore()).new_run("qemu-exit-bench", {"kernel": kb.id, "label": kb.label,
                                                              "iterations": iterations})
    share = run.path / "guest"
    share.mkdir()
    say(f"exit path on {kb.label} ({kb.id}): {iterations} fork+exit per state under TCG")
    res = guest.run_guest(kb.id, ["sh", "-c", f"/{GUEST_PATH} {iterations} > /share/out.txt"], share,
                          timeout=timeout, files={GUEST_PATH: binary()}, log_dir=run.path)
    (run.path / "initramfs.cpio").unlink(missing_ok=True)
    out = {"kernel": {"id": kb.id, "label": kb.label, "series": [p["file"] for p in kb.info.get("patches", [])]},
           "ok": res.ok and res.status == 0, "failure": res.failure(),
           **parse((share / "out.txt").read_text() if (share / "out.txt").exists() else "")}
    run.write_summary(out)
    return out, run
