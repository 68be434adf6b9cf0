"""`kvds qemu validate`: boot the KASAN+lockdep mm_intent kernel and run the in-guest validator.

The validator (guest/mm_intent_validate.c) is compiled static on the host, cached by content, and put in the
initramfs; it writes KTAP to the share. Validation passes only when every KTAP test passed, the plan completed,
the guest reported status 0 and the console shows no oops, BUG, KASAN report, lockdep splat or WARN.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from harness.errors import UserError
from harness.progress import say
from harness.results import ResultStore, Run
from qemu_validation import build, cachedirs, guest, ktap, runner

SOURCE = Path(__file__).resolve().parent / "guest" / "mm_intent_validate.c"
GUEST_PATH = "bin/mm_intent_validate"
CFLAGS = ("-static", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread")
MIN_MALFORMED = 10_000


def validator_binary() -> Path:
    """The static validator binary, compiled once per (source, compiler, flags)."""
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    key = hashlib.sha256(SOURCE.read_bytes() + repr((gcc, CFLAGS)).encode()).hexdigest()[:16]
    out = cachedirs.guest_bin() / key / "mm_intent_validate"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    p = subprocess.run(["gcc", *CFLAGS, "-o", str(tmp), str(SOURCE)], capture_output=True, text=True)
    if p.returncode != 0:
        raise build.BuildError(f"compiling {SOURCE.name} failed:\n{p.stderr.strip()[-1500:]}")
    tmp.rename(out)
    return out


def ktap_text(share: Path, console_log: Path) -> str:
    """The KTAP the validator wrote to the share, or, if it never got that far, what reached the console."""
    f = share / "ktap.txt"
    if f.exists() and f.stat().st_size:
        return f.read_text(errors="replace")
    lines = console_log.read_text(errors="replace").splitlines() if console_log.exists() else []
    return "\n".join(l for l in lines if l.startswith(("KTAP", "1..", "ok ", "not ok ", "# ")))


def summarize(res: runner.BootResult, rep: ktap.Report, kb: build.KernelBuild, fuzz: int) -> dict:
    counters = rep.counters
    problems = list(rep.problems)
    if fuzz >= MIN_MALFORMED and counters.get("malformed_writes", 0) < MIN_MALFORMED:
        problems.append(f"only {counters.get('malformed_writes', 0)} malformed writes were tried")
    ok = res.ok and rep.ok and not problems
    return {
        "ok": ok,
        "kernel": {"id": kb.id, "label": kb.label, "kasan_lockdep": kb.kasan, "release": kb.info.get("kernel_release")},
        "tests": rep.summary(),
        "malformed_writes": counters.get("malformed_writes", 0),
        "errno_mismatches": counters.get("mismatches", 0),
        "fuzz_ms": counters.get("fuzz_ms"),
        "fuzz_expected_errnos": {k[5:]: v for k, v in counters.items() if k.startswith("fuzz_E")},
        "splats": len(res.findings),
        "findings": [f.as_dict() for f in res.findings],
        "boot": res.as_dict(),
        "problems": problems,
        "failure": None if ok else (res.failure() or "; ".join(problems) or "KTAP tests failed"),
    }


def validate(kernel_id: str | None = None, spec: build.BuildSpec | None = None, fuzz: int = MIN_MALFORMED,
             seed: int = 1, timeout: float = 600, store: ResultStore | None = None) -> tuple[dict, Run]:
    """Build (if needed), boot and validate; returns the summary and the results-store run holding the logs."""
    if fuzz < 0:
        raise UserError("--fuzz must be >= 0")
    kb = build.find(kernel_id) if kernel_id else build.ensure_built(spec or guest.DEFAULT_SPEC, say=say)
    binary = validator_binary()
    run = (store or ResultStore()).new_run("qemu-validate", {"kernel": kb.id, "label": kb.label, "fuzz": fuzz,
                                                             "seed": seed, "timeout": timeout})
    share = run.path / "guest"
    share.mkdir()
    say(f"validating mm_intent on {kb.label} ({kb.id}) under TCG; results: {run.path}")
    res = guest.run_guest(kb.id, ["/" + GUEST_PATH, "--fuzz", str(fuzz), "--seed", str(seed), "--ktap",
                                  "/share/ktap.txt"], share, timeout=timeout, files={GUEST_PATH: binary},
                          log_dir=run.path)
    (run.path / "initramfs.cpio").unlink(missing_ok=True)
    rep = ktap.parse(ktap_text(share, res.console_log))
    summary = summarize(res, rep, kb, fuzz)
    run.write_summary(summary)
    return summary, run
