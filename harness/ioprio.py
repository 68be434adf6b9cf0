"""Linux I/O priorities: parse "rt/0"-style names and call ioprio_set/ioprio_get directly.

Python has no binding for these syscalls; they are called through libc's syscall(2) so that the value the
block layer sees (`block:block_rq_issue`'s ioprio field) is exactly what the mapping names.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from dataclasses import dataclass

from harness.errors import UserError

CLASS_NONE, CLASS_RT, CLASS_BE, CLASS_IDLE = 0, 1, 2, 3
CLASS_NAMES = {CLASS_NONE: "none", CLASS_RT: "rt", CLASS_BE: "be", CLASS_IDLE: "idle"}
CLASS_BY_NAME = {v: k for k, v in CLASS_NAMES.items()}
WHO_PROCESS, WHO_PGRP, WHO_USER = 1, 2, 3  # ioprio "which": a pid/tid, a process group, a user
CLASS_SHIFT = 13

_SYSCALLS = {"x86_64": (251, 252), "aarch64": (30, 31), "riscv64": (30, 31)}

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


@dataclass(frozen=True)
class IoPrio:
    klass: int
    level: int

    @property
    def value(self) -> int:
        """The 16-bit encoding the kernel stores in a request (class << 13 | level)."""
        return (self.klass << CLASS_SHIFT) | self.level

    def __str__(self) -> str:
        return f"{CLASS_NAMES[self.klass]}/{self.level}"

    @classmethod
    def from_value(cls, value: int) -> "IoPrio":
        return cls((value >> CLASS_SHIFT) & 7, value & ((1 << CLASS_SHIFT) - 1))


def parse_ioprio(text: str) -> IoPrio:
    """Parse "rt/0", "be/4", "idle" or "idle/0"; levels are 0-7 (0 is most urgent)."""
    name, _, level_text = text.strip().lower().partition("/")
    if name not in CLASS_BY_NAME or name == "none":
        raise UserError(f"unknown I/O priority class {text!r} (expected rt/N, be/N or idle)")
    level = 0
    if level_text:
        if not level_text.isdigit() or not 0 <= int(level_text) <= 7:
            raise UserError(f"I/O priority level in {text!r} must be 0-7")
        level = int(level_text)
    return IoPrio(CLASS_BY_NAME[name], level)


def _numbers() -> tuple[int, int]:
    arch = platform.machine()
    if arch not in _SYSCALLS:
        raise OSError(f"ioprio syscall numbers unknown for {arch}")
    return _SYSCALLS[arch]


def set_ioprio(prio: IoPrio, who: int = 0, which: int = WHO_PROCESS) -> None:
    """Set the priority of a thread (who=0: the calling thread, since Linux gives each thread its own)."""
    nr_set, _ = _numbers()
    if _libc.syscall(nr_set, which, who, prio.value) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ioprio_set({prio}): {os.strerror(err)}")


def get_ioprio(who: int = 0, which: int = WHO_PROCESS) -> IoPrio:
    _, nr_get = _numbers()
    value = _libc.syscall(nr_get, which, who)
    if value < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ioprio_get: {os.strerror(err)}")
    return IoPrio.from_value(value)
