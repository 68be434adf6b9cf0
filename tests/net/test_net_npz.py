"""net_priority/npz.py: the endpoints' NumPy-free .npz files read back by numpy.load exactly, and the endpoints
import no NumPy (what the writer exists for: each endpoint process starts in seconds in the TCG guest lab)."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import pytest

from net_priority import npz


def test_numpy_reads_every_field_kind() -> None:
    data = npz.encode(a=npz.int64s([1, -2, 2**62]), m=npz.int64_matrix([[1, 2], [3]], 3), n=-7,
                      t="héllo {\"k\": 1}", e="", z=npz.int64s([]), w=npz.int64_matrix([], 0))
    with np.load(io.BytesIO(data)) as z:
        assert z["a"].dtype == np.int64 and z["a"].tolist() == [1, -2, 2**62]
        assert z["m"].shape == (2, 3) and z["m"].tolist() == [[1, 2, 0], [3, 0, 0]]
        assert z["n"].shape == () and int(z["n"]) == -7
        assert str(z["t"]) == "héllo {\"k\": 1}" and str(z["e"]) == ""
        assert z["z"].shape == (0,) and z["w"].shape == (0, 0)


def test_same_bytes_as_numpy_savez_for_arrays() -> None:
    """Byte for byte what numpy.save writes for the same int64 array (header, padding, data)."""
    ref = io.BytesIO()
    np.save(ref, np.array([5, 6, 7], dtype=np.int64))
    assert npz._npy("<i8", (3,), npz.int64s([5, 6, 7]).data) == ref.getvalue()
    ref = io.BytesIO()
    np.save(ref, np.zeros((2, 4), dtype=np.int64))
    assert npz._npy("<i8", (2, 4), bytes(64)) == ref.getvalue()


def test_bad_values_refused() -> None:
    with pytest.raises(ValueError):
        npz.Int64Array((2,), bytes(8))
    with pytest.raises(ValueError):
        npz.int64_matrix([[1, 2, 3]], 2)
    with pytest.raises(TypeError):
        npz.encode(x=1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        npz.encode(x=True)


def test_endpoint_imports_no_numpy() -> None:
    code = "import sys, net_priority.endpoint; sys.exit(1 if 'numpy' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
