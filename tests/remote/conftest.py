"""What the remote tests share: the real `kvds` CLI run as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.paths import repo_root


def kvds(*args: str, store: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess:
    """`kvds args` from the repository, without progress bars; results under `store` when given."""
    extra = {"KVDS_NO_PROGRESS": "1", **({"KVDS_RESULTS_DIR": str(store)} if store is not None else {}), **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=repo_root(), env={**os.environ, **extra}, timeout=timeout)
