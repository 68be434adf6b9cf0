"""A NumPy-free .npz writer for the endpoints' result files: int64 arrays and scalars and text, in the format
`numpy.load` reads (a stored zip of NPY 1.0 files, as `numpy.savez` writes).

Why not numpy.savez: an endpoint is a process of its own, started several times per repetition, and importing
NumPy is its largest start-up cost (about 36 s per process in the QEMU guest lab under TCG, 0.1 s here). The
bench, which reads the files, imports NumPy once.
"""

from __future__ import annotations

import array
import io
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, Union

from harness import atomic

MAGIC = b"\x93NUMPY\x01\x00"  # NPY format version 1.0
ALIGN = 64  # numpy pads the header so the data starts on a 64-byte boundary


@dataclass(frozen=True)
class Int64Array:
    """An int64 array of `shape` (row-major), its values as native-endian bytes (an array.array('q') buffer)."""
    shape: tuple[int, ...]
    data: bytes

    def __post_init__(self) -> None:
        n = 1
        for d in self.shape:
            n *= d
        if len(self.data) != 8 * n:
            raise ValueError(f"{len(self.data)} bytes do not hold an int64 array of shape {self.shape}")


Value = Union[int, str, Int64Array]


def int64s(values: Sequence[int] | array.array) -> Int64Array:
    """A 1-D int64 array."""
    a = values if isinstance(values, array.array) and values.typecode == "q" else array.array("q", values)
    return Int64Array((len(a),), a.tobytes())


def int64_matrix(rows: Sequence[Sequence[int] | array.array], width: int) -> Int64Array:
    """A 2-D int64 array of len(rows) x width, each row zero-padded to `width`."""
    out = array.array("q")
    for r in rows:
        if len(r) > width:
            raise ValueError(f"a row of {len(r)} values is wider than {width}")
        out.extend(r if isinstance(r, array.array) else array.array("q", r))
        out.extend(array.array("q", bytes(8 * (width - len(r)))))
    return Int64Array((len(rows), width), out.tobytes())


def _npy(descr: str, shape: tuple[int, ...], data: bytes) -> bytes:
    dims = "".join(f"{d}," for d in shape) if len(shape) == 1 else ", ".join(str(d) for d in shape)
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({dims}), }}"
    pad = -(len(MAGIC) + 2 + len(header) + 1) % ALIGN
    header += " " * pad + "\n"
    return MAGIC + struct.pack("<H", len(header)) + header.encode("latin1") + data


def _encode(value: Value) -> bytes:
    if isinstance(value, bool):
        raise TypeError("a bool is not an int64 field")
    if isinstance(value, int):
        return _npy("<i8", (), struct.pack("<q", value))
    if isinstance(value, str):  # a 0-d unicode array, as numpy.array(text): UTF-32, at least one character wide
        return _npy(f"<U{max(len(value), 1)}", (), value.encode("utf-32-le") or bytes(4))
    if isinstance(value, Int64Array):
        a = array.array("q", value.data)
        if struct.pack("=h", 1) != struct.pack("<h", 1):  # a big-endian host: NPY says little-endian here
            a.byteswap()
        return _npy("<i8", value.shape, a.tobytes())
    raise TypeError(f"cannot store a {type(value).__name__} in an .npz")


def encode(**fields: Value) -> bytes:
    """The .npz file's bytes (ZIP_STORED, as numpy.savez)."""
    bio = io.BytesIO()
    with zipfile.ZipFile(bio, "w", zipfile.ZIP_STORED) as z:
        for name, value in fields.items():
            z.writestr(f"{name}.npy", _encode(value))
    return bio.getvalue()


def write(path: Path, **fields: Value) -> None:
    """Write the .npz atomically (temporary file, then rename): a reader never sees half a file."""
    atomic.write_bytes(path, encode(**fields))
