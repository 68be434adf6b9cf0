"""The results store: results/<run-id>/{meta.json, summary.json, samples/*.npy, ...}.

Raw samples are kept as NumPy .npy arrays (compact, typed, readable anywhere NumPy is) so every
percentile can be recomputed later; every file is written atomically, so a crash never leaves a torn one.

Every JSON kvds writes or prints goes through `strict` / `dumps` / `print_json` here: NaN and infinities (no
data, an interval from too few repetitions) become null, NumPy scalars and arrays become plain numbers and
lists, so what a user pipes into `jq` or `json.loads` always parses.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import secrets
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TextIO, TypeVar

import numpy as np

from harness import atomic
from harness.environment import capture
from harness.errors import UserError
from harness.paths import results_dir


PARENT_ENV = "KVDS_PARENT_RUN"


def strict(obj: Any) -> Any:
    """obj made strict-JSON-safe: non-finite floats -> None, NumPy values -> Python ones, tuples and sets ->
    lists, dataclasses -> dicts, paths and anything else unknown -> str; dict keys -> str."""
    if obj is None or isinstance(obj, (bool, str, int)) and not isinstance(obj, np.generic):
        return obj
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.ndarray):
        return [strict(v) for v in obj.tolist()]
    if isinstance(obj, dict):
        return {(k if isinstance(k, str) else str(strict(k))): strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [strict(v) for v in (sorted(obj, key=str) if isinstance(obj, (set, frozenset)) else obj)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return strict(dataclasses.asdict(obj))
    if hasattr(obj, "as_dict") and callable(obj.as_dict):
        return strict(obj.as_dict())
    return str(obj)


def dumps(obj: Any, indent: int | None = 2, sort_keys: bool = False) -> str:
    """Strict JSON text (allow_nan=False: a non-finite number that slipped past `strict` is a bug, not output)."""
    return json.dumps(strict(obj), indent=indent, sort_keys=sort_keys, allow_nan=False)


def print_json(obj: Any, file: TextIO | None = None, sort_keys: bool = False) -> None:
    """What every `--json` prints: strict JSON on stdout."""
    print(dumps(obj, sort_keys=sort_keys), file=file or sys.stdout)


@dataclass
class Run:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    def write_json(self, name: str, obj: Any) -> Path:
        return atomic.write_json(self.path / (name if name.endswith(".json") else f"{name}.json"), strict(obj))

    def write_text(self, name: str, text: str) -> Path:
        return atomic.write_text(self.path / name, text)

    def write_bytes(self, name: str, data: bytes) -> Path:
        return atomic.write_bytes(self.path / name, data)

    def write_summary(self, summary: dict[str, Any]) -> Path:
        return self.write_json("summary.json", summary)

    def write_samples(self, name: str, samples: Any) -> Path:
        """Raw samples as .npy (int64 nanoseconds or float64 are the usual dtypes)."""
        buf = io.BytesIO()
        np.save(buf, np.asarray(samples), allow_pickle=False)
        return atomic.write_bytes(self.path / "samples" / f"{name}.npy", buf.getvalue())

    def samples(self, name: str) -> np.ndarray:
        return np.load(self.path / "samples" / f"{name}.npy", allow_pickle=False)

    def sample_names(self) -> list[str]:
        d = self.path / "samples"
        return sorted(p.stem for p in d.glob("*.npy")) if d.is_dir() else []

    def read_json(self, name: str) -> Any:
        p = self.path / (name if name.endswith(".json") else f"{name}.json")
        return json.loads(p.read_text())

    @property
    def meta(self) -> dict[str, Any]:
        return self.read_json("meta.json")

    @property
    def summary(self) -> dict[str, Any]:
        p = self.path / "summary.json"
        return json.loads(p.read_text()) if p.exists() else {}

    def update_meta(self, **fields: Any) -> None:
        meta = self.meta
        meta.update(fields)
        self.write_json("meta.json", meta)


S = TypeVar("S")


@dataclass
class Filed(Generic[S]):
    """What every verb's run returns (harness/verbs.py): the run directory it filed (None for a verb that files
    nothing: a dry-run plan, a listing, a re-judgement of stored runs) and its typed summary (as summary.json holds
    it)."""
    run: Run | None
    summary: S


T = TypeVar("T", bound="StoredSummary")


class StoredSummary:
    """as_dict / from_json for a typed summary dataclass (every track's summary.json): fields in declaration
    order, the OMIT_WHEN_NONE ones left out while None (the layout earlier runs have), strict JSON (NaN and
    infinities to null); reading back, a field an older kvds did not write takes its default, else None."""

    OMIT_WHEN_NONE: tuple[str, ...] = ()
    STRICT = True  # False for the figures nested in a summary: converted once, with the summary

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]
        out = {k: v for k, v in out.items() if not (k in self.OMIT_WHEN_NONE and v is None)}
        return strict(out) if self.STRICT else out

    @classmethod
    def from_json(cls: type[T], stored: dict[str, Any]) -> T:
        kw = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in stored:
                kw[f.name] = stored[f.name]
            elif f.default is not dataclasses.MISSING:
                kw[f.name] = f.default
            else:
                kw[f.name] = None
        return cls(**kw)


class ResultStore:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else results_dir()

    def new_run(self, kind: str, config: dict[str, Any] | None = None, host: str | None = None,
                environment: dict[str, Any] | None = None) -> Run:
        """A fresh run directory with meta.json (environment + config) already written."""
        host = host or socket.gethostname()
        run_id = f"{time.strftime('%Y%m%d-%H%M%S')}-{kind}-{host}-{secrets.token_hex(3)}"
        path = self.root / run_id
        path.mkdir(parents=True, exist_ok=False)
        run = Run(path)
        env = environment if environment is not None else capture()
        meta = {"kind": kind, "run_id": run_id, "config": config or {}, "environment": env}
        if os.environ.get(PARENT_ENV):
            meta["parent"] = os.environ[PARENT_ENV]  # "<suite run id>/<stage>": set by `kvds run` for its stages
        run.write_json("meta.json", meta)
        return run

    def runs(self, kind: str | None = None) -> list[Run]:
        if not self.root.is_dir():
            return []
        out = [Run(p) for p in sorted(self.root.iterdir()) if (p / "meta.json").exists()]
        return [r for r in out if kind is None or r.meta.get("kind") == kind]

    def get(self, ref: str) -> Run:
        """A run by id, unique id prefix, path, or 'latest'."""
        p = Path(ref)
        if (p / "meta.json").exists():
            return Run(p)
        runs = self.runs()
        if ref == "latest":
            if not runs:
                raise UserError(f"no runs in {self.root}")
            return max(runs, key=lambda r: r.meta["environment"].get("unix_time", 0))
        matches = [r for r in runs if r.run_id.startswith(ref)]
        if len(matches) != 1:
            raise UserError(f"run {ref!r} {'is ambiguous' if matches else 'not found'} in {self.root}")
        return matches[0]
