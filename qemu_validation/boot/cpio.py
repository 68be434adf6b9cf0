"""A pure-Python writer for the newc ("070701") cpio format the kernel unpacks as an initramfs.

Written here rather than shelling out to cpio(1) so the archive is byte-for-byte reproducible (fixed inode
numbers and mtimes) and needs no staging directory with device nodes, which would need root.
"""

from __future__ import annotations

import stat
from dataclasses import dataclass, field

MAGIC = b"070701"
TRAILER = "TRAILER!!!"


def _pad4(n: int) -> int:
    return (4 - n % 4) % 4


@dataclass
class _Entry:
    name: str
    mode: int
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)


@dataclass
class Archive:
    """An in-memory newc archive; paths are relative to the guest's root, parents are added on demand."""

    entries: list[_Entry] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)

    @staticmethod
    def _norm(path: str) -> str:
        name = path.strip("/")
        if not name or any(part in ("", ".", "..") for part in name.split("/")):
            raise ValueError(f"bad archive path {path!r}")
        return name

    def _add(self, entry: _Entry) -> None:
        parent = entry.name.rpartition("/")[0]
        if parent and parent not in self._names:
            self.add_dir(parent)
        if entry.name in self._names:
            raise ValueError(f"duplicate archive path {entry.name!r}")
        self._names.add(entry.name)
        self.entries.append(entry)

    def add_dir(self, path: str, mode: int = 0o755) -> None:
        name = self._norm(path)
        if name not in self._names:
            self._add(_Entry(name, stat.S_IFDIR | mode))

    def add_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self._add(_Entry(self._norm(path), stat.S_IFREG | mode, data))

    def add_symlink(self, path: str, target: str) -> None:
        self._add(_Entry(self._norm(path), stat.S_IFLNK | 0o777, target.encode()))

    def add_char_device(self, path: str, major: int, minor: int, mode: int = 0o600) -> None:
        self._add(_Entry(self._norm(path), stat.S_IFCHR | mode, b"", (major, minor)))

    def to_bytes(self) -> bytes:
        out = bytearray()
        for ino, e in enumerate(self.entries, start=1):
            nlink = 2 if stat.S_ISDIR(e.mode) else 1
            out += _record(ino, e.mode, nlink, e.name, e.data, e.rdev)
        out += _record(0, 0, 1, TRAILER, b"", (0, 0))
        return bytes(out)


def _record(ino: int, mode: int, nlink: int, name: str, data: bytes, rdev: tuple[int, int]) -> bytes:
    raw_name = name.encode() + b"\0"
    fields = (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1], len(raw_name), 0)
    header = MAGIC + b"".join(b"%08x" % f for f in fields)
    head = header + raw_name
    return head + b"\0" * _pad4(len(head)) + data + b"\0" * _pad4(len(data))


def parse(blob: bytes) -> list[tuple[str, int, bytes]]:
    """Read a newc archive back as (name, mode, data); used by tests and to check what a guest will see."""
    out: list[tuple[str, int, bytes]] = []
    pos = 0
    while True:
        if blob[pos : pos + 6] != MAGIC:
            raise ValueError(f"bad cpio magic at offset {pos}")
        f = [int(blob[pos + 6 + 8 * i : pos + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = f[1], f[6], f[11]
        name_start = pos + 110
        name = blob[name_start : name_start + namesize - 1].decode()
        data_start = name_start + namesize + _pad4(110 + namesize)
        data = blob[data_start : data_start + size]
        pos = data_start + size + _pad4(size)
        if name == TRAILER:
            return out
        out.append((name, mode, data))
