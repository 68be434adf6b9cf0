"""`python -m net_priority.endpoint ROLE ...`: parse, run the role, map how it ended to the exit status (0 done or
stopped by a signal, 1 the role could not do its job, 2 bad arguments), never a traceback."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from typing import Callable

from harness.errors import UserError
from net_priority.endpoint.arguments import PROG, build_parser
from net_priority.endpoint.bulk import bulk_receiver, bulk_sender
from net_priority.endpoint.fetcher import fetcher
from net_priority.endpoint.lifecycle import EndpointError, Stop, on_signal, say
from net_priority.endpoint.pingpong import pingpong
from net_priority.endpoint.servers import fetch_server, pingpong_server

ROLES: dict[str, Callable[[argparse.Namespace], int]] = {
    "fetch-server": fetch_server, "fetcher": fetcher, "pingpong-server": pingpong_server, "pingpong": pingpong,
    "bulk-receiver": bulk_receiver, "bulk-sender": bulk_sender,
}
def _stop_on_eof() -> None:
    """Read stdin to its end, then stop this endpoint as SIGTERM would: its SSH session closed (stopped by the
    controller, or the controller is gone), so a remote endpoint never outlives the bench that started it."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 2
    role = args.role
    if args.stop_on_eof:
        say(f"pid {os.getpid()}")
        threading.Thread(target=_stop_on_eof, daemon=True).start()
    try:
        return ROLES[role](args)
    except UserError as e:
        say(f"{PROG} {role}: error: {e}", sys.stderr)
        return 2
    except EndpointError as e:
        say(f"{PROG} {role}: {e}", sys.stderr)
        return 1
    except Stop:
        return 0
    except Exception as e:  # a bug: still one line, never a traceback
        say(f"{PROG} {role}: internal error: {type(e).__name__}: {e}", sys.stderr)
        return 1


if __name__ == "__main__":
    code = main()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)  # connection threads of a server may still sit in recv: do not wait for them
