"""`kvds qemu validate`: boot the KASAN+lockdep+kmemleak mm_intent kernel and test the series in it.

Four things run in the guest, each reporting KTAP to the share: kvds's validator (guest/mm_intent_validate.c:
interface, errno tables, >= 10,000 random malformed and >= 10,000 random well-formed lines, a concurrent phase),
the series' own kselftest (tools/testing/selftests/mm/mm_intent.c) and KUnit suite (mm/mm_intent_kunit.c, run at
boot, read from debugfs), and a kmemleak scan at the end. Both user-space programs are compiled static on the
host from the exact commit the kernel was built from, cached by content. Validation passes only when all three
KTAP reports pass completely, kmemleak reports nothing, the guest exits 0 and the console shows no oops, BUG,
KASAN report, lockdep splat, WARN or leak.
"""

from __future__ import annotations

import hashlib
import secrets
import shlex
import subprocess
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.progress import say
from harness.results import Filed, ResultStore, StoredSummary
from qemu_validation import validate_timeline
from qemu_validation.boot import console, guest_command, ktap, runner
from qemu_validation.kernel import build, cachedirs, errno_table

GUEST_SOURCES = Path(__file__).resolve().parent / "guest"
SOURCE = GUEST_SOURCES / "mm_intent_validate.c"
MODEL = GUEST_SOURCES / "mm_intent_model.c"
"""The validator's reference model of the register parser, a C file of its own compiled in with SOURCE."""
MODEL_HEADER = GUEST_SOURCES / "mm_intent_model.h"
GUEST_PATH = "bin/mm_intent_validate"
KSELFTEST_GUEST_PATH = "bin/mm_intent_kselftest"
KSELFTEST = "tools/testing/selftests/mm/mm_intent.c"
KSELFTEST_HEADERS = ("tools/testing/selftests/kselftest_harness.h", "tools/testing/selftests/kselftest.h")
KUNIT_RESULTS = "/sys/kernel/debug/kunit/mm_intent/results"
KMEMLEAK = "/sys/kernel/debug/kmemleak"
CFLAGS = ("-static", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread")
KSELFTEST_CFLAGS = ("-static", "-O2", "-Wall", "-pthread")   # the selftests' own Makefile: -Wall
MIN_MALFORMED = 10_000
MIN_VALID = 10_000
MIN_CONCURRENT_S = 60
PHASES_FILE = "validate_timeline.txt"


@dataclass(frozen=True)
class Profile:
    """How much random and concurrent fuzzing one validate does. `full` is the gate (the issue's minimums);
    `quick` is the edit loop: every check still runs (tables, KUnit, kselftest, kmemleak, splat scan) with a
    tenth of the random lines and a 5 s concurrent phase, so a developer hears about a broken edit in about a
    minute instead of two and a half, and runs the full profile before committing."""
    name: str
    fuzz: int
    valid: int
    concurrent: int


PROFILES = {p.name: p for p in (Profile("full", MIN_MALFORMED, MIN_VALID, MIN_CONCURRENT_S),
                                Profile("quick", 1_000, 1_000, 5))}


@dataclass(frozen=True)
class ValidateConfig:
    """What one `kvds qemu validate` does: the kernel (a build, or the spec built first) and how much fuzzing."""
    kernel: str | None = None              # a build id, prefix or label; None: `spec` (built if needed)
    spec: build.BuildSpec | None = None    # None: the debug mm_intent kernel (guest_command.DEFAULT_SPEC)
    fuzz: int = MIN_MALFORMED              # random malformed register lines
    valid: int = MIN_VALID                 # random well-formed register lines
    concurrent: int = MIN_CONCURRENT_S     # seconds of the concurrent phase
    seed: int | None = None                # None: a fresh one, recorded in the summary
    timeout: float = 900.0                 # seconds before a hung guest is killed

    def __post_init__(self) -> None:
        """Negative counts are the user's error, refused where the config is made (before anything boots)."""
        for name, v in (("--fuzz", self.fuzz), ("--valid", self.valid), ("--concurrent", self.concurrent)):
            if v < 0:
                raise UserError(f"{name} must be >= 0")


@dataclass(frozen=True)
class KernelRow:
    """The kernel a validate booted (its summary's `kernel`)."""
    id: str                                # the build id (kvds qemu build --list)
    label: str                             # source + patch series + kasan, as the build names it
    kasan_lockdep: bool                    # the debug configuration: KASAN, lockdep, kmemleak
    release: str | None                    # uname -r of the build (None: not recorded)


@dataclass(frozen=True)
class ValidateSummary(StoredSummary):
    """summary.json of a `qemu-validate` run (and `kvds qemu validate --json`'s summary)."""
    ok: bool                               # the guest exited 0, every KTAP report passed, no splat, no leak
    gate: bool                             # the counts meet the full profile (not a quick edit loop)
    kernel: dict[str, Any]                 # the kernel booted: KernelRow (qemu.validate.kernel)
    tests: dict[str, Any]                  # the validator's KTAP: ktap.KtapSummary (qemu.validate.tests)
    malformed_writes: int                  # malformed register lines written (each must fail with its errno)
    errno_mismatches: int                  # malformed writes that failed with another errno than expected
    fuzz_ms: int | None                    # guest time of the malformed writes
    fuzz_expected_errnos: dict[str, int]   # random malformed lines by the errno they expected
    seed: int | None                       # seed of the random lines (pass back to reproduce)
    valid_writes: int                      # well-formed register lines written (each must succeed)
    valid_via_pidfd: int                   # of those, registered through a pidfd
    kernel_table_rows: int                 # rows of the kernel's errno table the validator checked
    concurrent_ms: int | None              # guest time of the concurrent phase
    concurrent_ops: int | None             # operations in the concurrent phase
    concurrent_processes: int | None       # processes in the concurrent phase
    kselftest: dict[str, Any] | None       # the series' kselftest: ktap.KtapSummary (qemu.validate.tests)
    kunit: dict[str, Any] | None           # the KUnit suite: ktap.KtapSummary (qemu.validate.tests)
    kunit_cases: dict[str, int] | None     # passed/failed cases, parameterised rows included
    kmemleak_leaks: int | None             # unreferenced objects at the final scan (None: no scan)
    splats: int                            # oops/BUG/KASAN/lockdep/WARN/leak lines on console or in dmesg
    findings: list[dict[str, Any]]         # console findings: kind, line, context
    boot: dict[str, Any]                   # the guest boot: runner.BootResult.as_dict() (qemu.run)
    problems: list[str]                    # every reason the run is not ok
    failure: str | None                    # why the run is not ok (None when it is)
    phases: list[dict[str, Any]]           # where the time went, guest clock (validate_timeline.breakdown)


def is_gate(fuzz: int, valid: int, concurrent: int) -> bool:
    """Whether a validate with these counts is the gate (meets the full profile), not a quick loop."""
    full = PROFILES["full"]
    return fuzz >= full.fuzz and valid >= full.valid and concurrent >= full.concurrent


def validator_binary() -> Path:
    """The static validator binary (the validator and its reference model), compiled once per (sources,
    compiler, flags)."""
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    sources = b"".join(f.read_bytes() for f in (SOURCE, MODEL, MODEL_HEADER))
    key = hashlib.sha256(sources + repr((gcc, CFLAGS)).encode()).hexdigest()[:16]
    out = cachedirs.guest_bin() / key / "mm_intent_validate"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    p = subprocess.run(["gcc", *CFLAGS, "-o", str(tmp), str(SOURCE), str(MODEL)], capture_output=True, text=True)
    if p.returncode != 0:
        raise build.BuildError(f"compiling {SOURCE.name} failed:\n{p.stderr.strip()[-1500:]}")
    tmp.rename(out)
    return out


def kselftest_binary(kb: build.KernelBuild) -> Path:
    """The series' kselftest, compiled static from the commit the kernel was built from (cached by content)."""
    tree = workspace_tree(kb)
    files = {p: errno_table.from_commit(tree, kb.info["commit"], p) for p in (KSELFTEST, *KSELFTEST_HEADERS)}
    gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    key = hashlib.sha256(repr((sorted(files.items()), gcc, KSELFTEST_CFLAGS)).encode()).hexdigest()[:16]
    out = cachedirs.guest_bin() / key / "mm_intent_kselftest"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvds-kselftest-") as tmp:
        for rel, text in files.items():
            dest = Path(tmp) / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text)
        tmp_out = out.with_suffix(".tmp")
        p = subprocess.run(["gcc", *KSELFTEST_CFLAGS, "-o", str(tmp_out), str(Path(tmp) / KSELFTEST)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise build.BuildError(f"compiling {KSELFTEST} failed:\n{p.stderr.strip()[-1500:]}")
        tmp_out.rename(out)
    return out


def workspace_tree(kb: build.KernelBuild) -> Path:
    """The git tree the kernel was built in; it holds the build's commit (kb.info["commit"])."""
    tree = cachedirs.workspaces() / kb.info.get("workspace", "") / "linux"
    if not kb.info.get("commit") or not (tree / ".git").exists():
        raise UserError(f"kernel {kb.id}: its workspace {tree} is gone (`kvds qemu build` it again)")
    return tree


def guest_script(validator_args: list[str]) -> str:
    """What the guest runs: kmemleak baseline, validator, kselftest, KUnit results, final kmemleak scan."""
    k = KMEMLEAK
    return "\n".join([
        # Phase marks on the guest's clock (qemu_validation/validate_timeline.py turns them into a breakdown).
        f'mark() {{ read up _ < /proc/uptime; echo "$1 $up" >> /share/{PHASES_FILE}; }}',
        "mark start",
        # Leaks from boot are the kernel's own, not the series': scan once and forget them.
        f"if [ -w {k} ]; then echo scan > {k}; cat {k} > /share/kmemleak-boot.txt; echo clear > {k}; fi",
        "mark kmemleak_boot",
        f"{shlex.join(['/' + GUEST_PATH, *validator_args])}; v=$?",
        "mark validator",
        f"/{KSELFTEST_GUEST_PATH} > /share/kselftest.txt 2>&1; s=$?",
        "mark kselftest",
        f"cat {KUNIT_RESULTS} > /share/kunit.txt 2>&1",
        # kmemleak ignores objects younger than 5 s; two scans settle stale references.
        f"if [ -w {k} ]; then sleep 6; echo scan > {k}; echo scan > {k}; cat {k} > /share/kmemleak.txt; fi",
        "mark kmemleak",
        # The whole kernel log: the console only shows loglevel < 5, and kmemleak reports at KERN_INFO.
        "dmesg > /share/dmesg.txt",
        "mark end",
        'echo "kvds: validator=$v kselftest=$s"',
        '[ "$v" -eq 0 ] && [ "$s" -eq 0 ]',
    ])


def leaks(text: str) -> int:
    return text.count("unreferenced object ")


def ktap_text(share: Path, console_log: Path) -> str:
    """The KTAP the validator wrote to the share, or, if it never got that far, what reached the console."""
    f = share / "ktap.txt"
    if f.exists() and f.stat().st_size:
        return f.read_text(errors="replace")
    lines = console_log.read_text(errors="replace").splitlines() if console_log.exists() else []
    return "\n".join(l for l in lines if l.startswith(("KTAP", "1..", "ok ", "not ok ", "# ")))


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def summarize(res: runner.BootResult, rep: ktap.Report, kb: build.KernelBuild, fuzz: int, valid: int = 0,
              concurrent: int = 0, seed: int | None = None, kselftest: ktap.Report | None = None,
              kunit: ktap.Report | None = None, leak_text: str | None = None,
              phase_rows: list[dict[str, Any]] | None = None) -> ValidateSummary:
    counters = rep.counters
    problems = list(rep.problems)
    if fuzz >= MIN_MALFORMED and counters.get("malformed_writes", 0) < MIN_MALFORMED:
        problems.append(f"only {counters.get('malformed_writes', 0)} malformed writes were tried")
    if valid >= MIN_VALID and counters.get("valid_writes", 0) < MIN_VALID:
        problems.append(f"only {counters.get('valid_writes', 0)} well-formed writes were tried")
    if concurrent and counters.get("concurrent_ms", 0) < concurrent * 1000:
        problems.append(f"the concurrent phase ran {counters.get('concurrent_ms', 0)} ms, not {concurrent} s")
    for name, r in (("kselftest", kselftest), ("KUnit", kunit)):
        if r is not None and not r.ok:
            problems.append(f"{name}: {r.failed} failed of {r.planned}" + (f" ({'; '.join(r.problems)})"
                                                                          if r.problems else ""))
    if leak_text is not None and leaks(leak_text):
        problems.append(f"kmemleak: {leaks(leak_text)} unreferenced objects")
    ok = res.ok and rep.ok and not problems
    return ValidateSummary(
        ok=ok,
        gate=is_gate(fuzz, valid, concurrent),
        kernel=asdict(KernelRow(kb.id, kb.label, kb.kasan, kb.info.get("kernel_release"))),
        tests=rep.summary(),
        malformed_writes=counters.get("malformed_writes", 0),
        errno_mismatches=counters.get("mismatches", 0),
        fuzz_ms=counters.get("fuzz_ms"),
        fuzz_expected_errnos={k[5:]: v for k, v in counters.items() if k.startswith("fuzz_E")},
        seed=seed,
        valid_writes=counters.get("valid_writes", 0),
        valid_via_pidfd=counters.get("valid_via_pidfd", 0),
        kernel_table_rows=counters.get("kernel_table_rows", 0),
        concurrent_ms=counters.get("concurrent_ms"),
        concurrent_ops=counters.get("concurrent_ops"),
        concurrent_processes=counters.get("concurrent_processes"),
        kselftest=kselftest.summary() if kselftest is not None else None,
        kunit=kunit.summary() if kunit is not None else None,
        kunit_cases=_kunit_cases(kunit),
        kmemleak_leaks=leaks(leak_text) if leak_text is not None else None,
        splats=len(res.findings),
        findings=[f.as_dict() for f in res.findings],
        boot=res.as_dict(),
        problems=problems,
        failure=None if ok else (res.failure or "; ".join(problems) or "KTAP tests failed"),
        phases=phase_rows or [],
    )


def _kunit_cases(kunit: ktap.Report | None) -> dict[str, int] | None:
    """Passed and failed KUnit cases (parameterised rows included), counted from the nested results."""
    if kunit is None:
        return None
    lines = [d for r in kunit.results for d in r.diagnostics]
    return {"passed": sum(1 for d in lines if d.startswith("ok ")),
            "failed": sum(1 for d in lines if d.startswith("not ok "))}


def run(cfg: ValidateConfig) -> Filed[ValidateSummary]:
    """Build (if needed), boot and validate; returns the summary and the results-store run holding the logs.

    `cfg.seed` None draws a fresh one (recorded in the summary; pass it back to reproduce the random lines)."""
    if cfg.seed is None:
        cfg = replace(cfg, seed=secrets.randbits(32) or 1)
    fuzz, valid, concurrent, seed, timeout = cfg.fuzz, cfg.valid, cfg.concurrent, cfg.seed, cfg.timeout
    kb = build.find(cfg.kernel) if cfg.kernel else build.ensure_built(cfg.spec or guest_command.DEFAULT_SPEC, say=say)
    binary = validator_binary()
    selftest = kselftest_binary(kb)
    table = errno_table.rows(errno_table.from_commit(workspace_tree(kb), kb.info["commit"]))
    run = ResultStore().new_run("qemu-validate", {"kernel": kb.id, "label": kb.label, "fuzz": fuzz,
                                                             "valid": valid, "concurrent": concurrent,
                                                             "seed": seed, "timeout": timeout})
    share = run.path / "guest"
    share.mkdir()
    (share / "table.txt").write_text(errno_table.to_file(table))
    say(f"validating mm_intent on {kb.label} ({kb.id}) under TCG, seed {seed}; results: {run.path}")
    args = ["--fuzz", str(fuzz), "--valid", str(valid), "--seed", str(seed), "--concurrent", str(concurrent),
            "--table", "/share/table.txt", "--ktap", "/share/ktap.txt"]
    # kunit.enable=1: built-in suites run at boot (allnoconfig leaves KUNIT_DEFAULT_ENABLED off).
    # printk.time=1: timestamps in dmesg mark the boot phases (the console parser strips them).
    res = guest_command.boot_and_run(kb.id, ["sh", "-c", guest_script(args)], share, timeout=timeout,
                                     files={GUEST_PATH: binary, KSELFTEST_GUEST_PATH: selftest}, log_dir=run.path,
                                     extra_append=("kunit.enable=1", "printk.time=1"))
    run.update_meta(commands={"qemu": res.qemu_argv})  # what ran underneath, kept with the run
    seen = {(f.kind, f.line) for f in res.findings}
    res.findings.extend(f for f in console.scan(_read(share / "dmesg.txt")) if (f.kind, f.line) not in seen)
    (run.path / "initramfs.cpio").unlink(missing_ok=True)
    rep = ktap.parse(ktap_text(share, res.console_log))
    kself = ktap.parse(_read(share / "kselftest.txt"))
    kunit = ktap.parse(_read(share / "kunit.txt"))
    leak_text = _read(share / "kmemleak.txt") if (share / "kmemleak.txt").exists() else None
    if leak_text is None and kb.info.get("kasan"):
        leak_text = ""
        rep.problems.append("kmemleak did not run (no /sys/kernel/debug/kmemleak in the debug kernel?)")
    phase_rows = validate_timeline.breakdown(_read(share / "dmesg.txt"), _read(share / PHASES_FILE), rep.counters,
                                             res.seconds)
    summary = summarize(res, rep, kb, fuzz, valid, concurrent, seed, kself, kunit, leak_text, phase_rows)
    run.write_summary(summary.as_dict())
    return Filed(run, summary)


def exit_status(summary: ValidateSummary) -> int:
    """0 when the kernel validated, 1 when it did not (the summary says why)."""
    return 0 if summary.ok else 1
