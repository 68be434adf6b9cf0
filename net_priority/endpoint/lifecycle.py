"""What every endpoint role shares besides its sockets: the errors that end it (exit 1 / the signal that stops
it), the signal handling that lets a blocking call be interrupted but never a result file's write, the one-line
output on stdout / stderr and the JSON result files."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from harness import atomic

mono = time.monotonic_ns


class EndpointError(Exception):
    """The role could not do its job: one line on stderr, exit status 1."""


class Stop(Exception):
    """SIGTERM/SIGINT arrived while the role was inside an interruptible section."""



class Signals:
    stop = False  # a signal arrived
    signum: int | None = None
    raising = False  # raise Stop from the handler (interrupts a blocking call) instead of only setting the flag


def on_signal(signum: int, frame: Any) -> None:
    Signals.stop = True
    Signals.signum = signum
    if Signals.raising:
        Signals.raising = False
        raise Stop()


@contextmanager
def interruptible() -> Iterator[None]:
    """Inside: a signal raises Stop at once (out of recv, sleep, connect). Outside only the flag is set, so
    writing a result file is never cut short."""
    Signals.raising = True
    try:
        if Signals.stop:
            raise Stop()
        yield
    finally:
        Signals.raising = False


def stopped_by() -> str:
    return signal.Signals(Signals.signum).name if Signals.signum else "signal"



def ended(e: BaseException, what: str) -> tuple[str, str | None]:
    """How a client's run ended, for its result file: (stopped, error): the signal that stopped it, or the error and
    where it happened (`what`, for an OSError)."""
    if isinstance(e, Stop):
        return stopped_by(), None
    if isinstance(e, EndpointError):
        return "error", str(e)
    return "error", f"{what}: {getattr(e, 'strerror', None) or e}"


def say(line: str, stream: Any = None) -> None:
    """One line, flushed; a closed pipe (nobody reads any more) is not an error of the role."""
    stream = stream or sys.stdout
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if hasattr(obj, "as_dict") and callable(obj.as_dict):
        return obj.as_dict()
    return str(obj)  # paths


def dumps(obj: Any, indent: int | None = None) -> str:
    """Strict JSON without harness.results (which imports NumPy: see net_priority/npz.py for why not here)."""
    return json.dumps(obj, indent=indent, default=_plain, allow_nan=False)


def write_json(path: Path, obj: Any) -> None:
    atomic.write_text(path, dumps(obj, indent=2) + "\n")


def meta_json(args: argparse.Namespace, **extra: Any) -> str:
    d = {"role": args.role, "args": {k: v for k, v in vars(args).items() if k != "role"}, **extra}
    return dumps(d, indent=None)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile by linear interpolation between closest ranks (numpy.percentile's default method)."""
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def us_stats(ns: Sequence[int], scale: float = 1.0) -> dict[str, float] | None:
    """The client's end-of-run line: microseconds (x scale) of `ns` (only a glance: the bench reads the files)."""
    if not ns:
        return None
    us = sorted(v * scale / 1e3 for v in ns)
    p50, p90, p99, p999 = (percentile(us, q) for q in (50, 90, 99, 99.9))
    return {"n": len(us), "mean": sum(us) / len(us), "p50": p50, "p90": p90, "p99": p99, "p999": p999,
            "max": us[-1], "min": us[0]}


def runq_wait_ns(path: str = "/proc/thread-self/schedstat") -> int:
    """Nanoseconds this thread (or, with another path, task) has waited on a run queue, runnable but not running
    (schedstat's second field; the kernel keeps it with CONFIG_SCHED_INFO), -1 where the kernel has no schedstat.
    The difference over a window is how long the CPU scheduler held the fetch path back."""
    try:
        with open(path) as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return -1
