"""Boot one guest under QEMU: start it, enforce the timeout, and turn its exit into a status and findings.

A run passes only when the guest reported a status through isa-debug-exit and the console shows no splat;
a hang is killed after the timeout, a kernel panic (QEMU exits 0 because of `panic=-1 -no-reboot`) is a failure.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import Unavailable
from harness.knobs import workers
from harness.results import StoredSummary
from qemu_validation.boot import console, initramfs, qemu_cmd

_STATUS = re.compile(rf"{initramfs.STATUS_MARKER} (\d+)")
POLL_S = 2.0  # how often a running guest's console is checked for an OOM livelock


@dataclass(frozen=True)
class BootResult(StoredSummary):
    """One guest boot: what `kvds qemu run --json` prints as its summary, and validate's `boot`. The fields are
    exactly the JSON keys (StoredSummary.as_dict: the console log as its path, each finding as its fields);
    `ok` and `failure` are decided once, by `of`, from the others."""
    status: int | None           # the guest command's exit status, None when it never reported one
    qemu_status: int | None      # QEMU's own exit status, None when it was killed after the timeout
    timed_out: bool              # the guest ran past the timeout and was killed
    seconds: float = field(metadata={"unit": "s"})  # QEMU start to exit, host wall clock
    console_log: Path            # the guest's serial console as captured (JSON: its path)
    findings: list[console.Finding]  # oops, BUG, KASAN, lockdep and WARN reports on the console, in order
    # (JSON: each console.Finding's kind, line_no, line, context)
    ok: bool                     # status 0, no finding and no timeout
    failure: str | None          # why the boot is not ok, in one line (None when it is)
    qemu_argv: list[str]         # the QEMU command line that ran (qemu_cmd.command)

    @classmethod
    def of(cls, status: int | None, qemu_status: int | None, timed_out: bool, seconds: float, console_log: Path,
           findings: list[console.Finding], qemu_argv: list[str]) -> BootResult:
        ok = status == 0 and not findings and not timed_out
        return cls(status, qemu_status, timed_out, round(seconds, 2), console_log, list(findings), ok,
                   None if ok else failure_of(status, qemu_status, timed_out, console_log, findings), list(qemu_argv))


def failure_of(status: int | None, qemu_status: int | None, timed_out: bool, console_log: Path,
               findings: list[console.Finding]) -> str | None:
    """Why a boot failed, in one line (None if it passed)."""
    if timed_out:
        return f"the guest did not finish within the timeout (console: {console_log})"
    livelock = next((f for f in findings if f.kind == "oom-livelock"), None)
    if livelock is not None:
        return (f"the guest kernel looped in the OOM killer with nothing to kill ({livelock.line}; a memory cgroup "
                f"over its limit whose subtree holds no killable task): ended (console: {console_log})")
    if findings:
        f = findings[0]
        return f"kernel {f.kind} on the console: {f.line} ({len(findings)} finding(s); {console_log})"
    if status is None:
        return f"the guest never reported a status (QEMU exit {qemu_status}; panic?) (console: {console_log})"
    if status != 0:
        return f"the guest command exited with status {status}"
    return None


def boot(machine: qemu_cmd.Machine, timeout: float) -> BootResult:
    """Run QEMU to completion (or kill it at `timeout` seconds) and analyse the console."""
    binary = qemu_cmd.qemu_binary()
    if binary is None:
        raise Unavailable("qemu-system-x86_64 is not installed (harness/setup installs qemu-system-x86)")
    machine.console_log.parent.mkdir(parents=True, exist_ok=True)
    machine.console_log.write_bytes(b"")
    argv = qemu_cmd.command(machine, binary)
    started = time.monotonic()
    # a killed kvds must not leave QEMU running, and one on its way out (SIGINT/SIGTERM) must not wait for it
    proc = workers.popen_waited(argv, "QEMU", stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
    try:
        out, timed_out = _wait(proc, console.LivelockWatch(machine.console_log), started + timeout)
    finally:
        ended = workers.release(proc)
    if ended:
        raise workers.Ended(f"QEMU was killed: kvds is exiting (SIGINT/SIGTERM) (console: {machine.console_log})")
    seconds = time.monotonic() - started
    text = machine.console_log.read_text(errors="replace")
    if out.strip():
        text += "\n[qemu] " + out.decode(errors="replace")
        machine.console_log.write_text(text)
    qemu_status = None if timed_out else proc.returncode
    status = reported_status(text, qemu_status)
    return BootResult.of(status, qemu_status, timed_out, seconds, machine.console_log, console.scan(text), argv)


def _wait(proc: subprocess.Popen[bytes], watch: console.LivelockWatch, deadline: float) -> tuple[bytes, bool]:
    """QEMU's output and whether it ran into the deadline; a guest whose kernel loops in the OOM killer is ended
    at once (its console then carries the "oom-livelock" finding): it would never finish."""
    while True:
        try:
            out, _ = proc.communicate(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            return out, False
        except subprocess.TimeoutExpired:
            livelocked = watch.poll()
            if livelocked or time.monotonic() >= deadline:
                proc.kill()
                out, _ = proc.communicate()
                return out, not livelocked


def command_output(text: str) -> str:
    """The console lines between /init's start and status markers: what the command printed (plus any kernel
    messages that arrived meanwhile)."""
    lines = text.splitlines()
    try:
        start = lines.index(initramfs.START_MARKER) + 1
    except ValueError:
        return ""
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(initramfs.STATUS_MARKER)), len(lines))
    return "\n".join(lines[start:end])


def reported_status(text: str, qemu_status: int | None) -> int | None:
    """The guest's full exit status: the console marker, cross-checked against the 7 bits debug-exit carries."""
    port = qemu_cmd.decode_exit(qemu_status) if qemu_status is not None else None
    if port is None:
        return None
    found = _STATUS.findall(text)
    if found and qemu_cmd.port_value(int(found[-1])) == port:
        return int(found[-1])
    return port
