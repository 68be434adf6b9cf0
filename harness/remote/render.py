"""`kvds remote`'s text output: one renderer per verb, each taking the verb's typed summary."""

from __future__ import annotations

from harness.remote.baseline_run import BaselineSummary
from harness.remote.doctor_run import DoctorSummary
from harness.remote.execute import HostOutcome
from harness.remote.hosts_run import HostsSummary
from harness.remote.run_run import RunSummary
from harness.remote.summary import print_summary
from harness.results import ResultStore


def hosts(summary: HostsSummary) -> None:
    for r in summary.hosts:
        extra = f"  {r['status']}: {r['detail']}" if "status" in r else ""
        print(f"{r['tag']:<20} {r['target']}{extra}")
        for e in r.get("events", []):
            print(f"{'':<20} {e}")


def doctor(summary: DoctorSummary) -> None:
    print_summary(_outcomes(summary.hosts), ResultStore(), summary.record, "kvds doctor, side by side", all_caps=True)


def run(summary: RunSummary) -> None:
    print_summary(_outcomes(summary.hosts), ResultStore(), summary.record, f"kvds {' '.join(summary.argv)}")


def baseline(summary: BaselineSummary) -> None:
    print("host baseline")
    for name, d in (("pread_direct_4k", summary.pread_direct_4k), ("anon_first_touch", summary.anon_first_touch)):
        print(f"  {name:<18} n={d['count']:<7} p50 {d['p50_us']:.1f} us  p90 {d['p90_us']:.1f} us  "
              f"p99 {d['p99_us']:.1f} us [{d['p99_ci_us'][0]:.1f}, {d['p99_ci_us'][1]:.1f}]")


def _outcomes(hosts: dict[str, dict]) -> list[HostOutcome]:
    """The hosts' outcomes back from the summary's rows (every HostOutcome field, as as_json wrote them)."""
    return [HostOutcome(**row) for row in hosts.values()]
