"""kernel_vm/bounded_write.py: a block that blocks until a signal is ended by the interval timer, the fact is
recorded, and the process's timer and SIGALRM handler are as they were afterwards."""

from __future__ import annotations

import signal

from kernel_vm import bounded_write


def test_a_block_waiting_for_a_signal_is_interrupted_and_says_so() -> None:
    before = signal.getsignal(signal.SIGALRM)
    with bounded_write.interrupt_after(0.05) as bound:
        signal.pause()  # returns only once a handled signal arrived: the bound's SIGALRM
    assert bound.interrupted and bound.seconds > 0
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == before


def test_a_block_that_finishes_is_not_interrupted_and_the_timer_is_cancelled() -> None:
    with bounded_write.interrupt_after(600.0) as bound:
        pass
    assert not bound.interrupted and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_an_error_inside_still_restores_the_timer_and_handler() -> None:
    before = signal.getsignal(signal.SIGALRM)
    try:
        with bounded_write.interrupt_after(600.0):
            raise OSError("EBUSY")
    except OSError:
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0) and signal.getsignal(signal.SIGALRM) == before
