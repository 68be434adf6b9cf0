"""One SSH host as kvds uses it: its directory layout, installing kvds there, running kvds as root, and
copying result directories back.

Layout under the host's kvds root R (default ~/.kvds-remote; two "hosts" sharing a filesystem get different
roots): R/wheelhouse (shipped wheels), R/venv-<deps hash> (Python 3.11 venv with kvds), R/state (journals:
KVDS_STATE_DIR), R/work (scratch: KVDS_WORK_DIR), R/cache, and R/results/<invocation>/ (KVDS_RESULTS_DIR of
one invocation; `.pid` holds the remote kvds's pid, `.fetched` marks it copied home).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from fabric import Connection

from harness.remote.args import SshOptions
from harness.remote.connection import open_connection
from harness.remote.scrub import scrub
from harness.remote.ship import Payload, wheelhouse
from harness.remote.targets import SshTarget

FIND_PYTHON = r"""for p in python3.11 python3 /usr/bin/python3.11 /usr/local/bin/python3.11; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    "$p" -c 'import sys, platform, json; print(json.dumps({"python": sys.executable, "version": platform.python_version(), "machine": platform.machine(), "libc": "-".join(platform.libc_ver()), "kernel": platform.release()}))'
    exit 0
  fi
done
exit 7"""


class ConnectionLost(Exception):
    """The SSH connection died while a command ran (the host dropped, sshd was killed)."""


class HostCommandFailed(Exception):
    """A set-up step on the host failed; carries its (scrubbed) last error line."""


@dataclass
class Completed:
    exited: int
    stdout: str
    stderr: str


class SshHost:
    def __init__(self, target: SshTarget, opts: SshOptions) -> None:
        self.target, self.opts = target, opts
        self.events: list[str] = []
        self.conn: Connection | None = None
        self.root = ""
        self.python: dict[str, Any] = {}
        self.venv = ""

    # -- connection -------------------------------------------------------------------------------------
    def connect(self) -> None:
        self.conn = open_connection(self.target, self.opts, self.events)
        sftp = self.conn.sftp()
        home = sftp.normalize(".")
        root = self.opts.remote_root or self.target.root or ".kvds-remote"
        self.root = root if root.startswith("/") else posixpath.join(home, root)
        for sub in ("", "wheelhouse", "results", "state", "work", "cache"):
            self._mkdir(posixpath.join(self.root, sub))

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # closing a dead connection must not mask why it died
                pass

    def alive(self) -> bool:
        t = self.conn.transport if self.conn else None
        return bool(t and t.is_active())

    def _mkdir(self, path: str) -> None:
        sftp = self.conn.sftp()
        try:
            sftp.stat(path)
        except FileNotFoundError:
            parent = posixpath.dirname(path.rstrip("/"))
            if parent and parent != path:
                self._mkdir(parent)
            sftp.mkdir(path, 0o755)

    def sh(self, cmd: str, root: bool = False, what: str = "a command") -> Completed:
        """Run a shell command (as root: via `sudo -n` when the login is not root)."""
        if root and self.target.needs_sudo:
            cmd = "sudo -n sh -c " + shlex.quote(cmd)
        try:
            r = self.conn.run(cmd, hide=True, warn=True, in_stream=False)
        except Exception as exc:  # paramiko/socket errors surface here when the host vanishes mid-command
            if not self.alive():
                raise ConnectionLost(f"connection lost during {what}: {type(exc).__name__}: {exc}") from None
            raise
        if r.exited == -1 or not self.alive():
            raise ConnectionLost(f"connection lost during {what} (the ssh channel closed without an exit status)")
        res = Completed(r.exited, r.stdout, r.stderr)
        if root and self.target.needs_sudo and r.exited == 1 and "sudo:" in r.stderr and "password" in r.stderr:
            raise HostCommandFailed(f"{self.target.user} cannot sudo without a password on {self.target.host}: "
                                    "kvds needs root there (passwordless sudo or log in as root)")
        return res

    def _check(self, res: Completed, what: str) -> Completed:
        if res.exited != 0:
            lines = (res.stderr.strip() or res.stdout.strip()).splitlines() or [f"exit status {res.exited}"]
            raise HostCommandFailed(f"{what} failed on the host: {scrub(lines[-1])}")
        return res

    # -- installing kvds --------------------------------------------------------------------------------
    def find_python(self) -> dict[str, Any]:
        res = self.sh(FIND_PYTHON, what="looking for Python 3.11")
        if res.exited == 7:
            raise HostCommandFailed("the host has no Python 3.11 with venv/ensurepip (install python3.11 and "
                                    "python3.11-venv); kvds needs 3.11")
        self.python = json.loads(self._check(res, "looking for Python 3.11").stdout.strip().splitlines()[-1])
        return self.python

    def platform_key(self) -> str:
        return f"cp311-{self.python['machine']}-{self.python['libc']}"

    def _upload(self, local: Path, remote_dir: str) -> bool:
        """Copy a file unless the host already has it with the same size; atomic rename into place."""
        sftp = self.conn.sftp()
        dest = posixpath.join(remote_dir, local.name)
        try:
            if sftp.stat(dest).st_size == local.stat().st_size:
                return False
        except FileNotFoundError:
            pass
        tmp = dest + ".part"
        sftp.put(str(local), tmp)
        sftp.posix_rename(tmp, dest)
        return True

    def install(self, payload: Payload) -> str:
        """Ensure R/venv-<hash> has this checkout's kvds and its dependencies; returns a status line."""
        import platform as _platform

        deps = payload.dependencies
        key = hashlib.sha256(("\n".join(deps) + self.python["version"][:4] + self.platform_key()).encode()).hexdigest()
        self.venv = posixpath.join(self.root, f"venv-{key[:12]}")
        wh = posixpath.join(self.root, "wheelhouse")
        shipped = 0
        if self.opts.deps == "ship":
            same = (self.python["machine"] == _platform.machine())
            plat_args: tuple[str, ...] = () if same else (
                "--python-version", "3.11", "--platform", f"manylinux2014_{self.python['machine']}",
                "--platform", f"manylinux_2_17_{self.python['machine']}")
            for w in wheelhouse(deps, self.platform_key(), plat_args):
                shipped += self._upload(w, wh)
        shipped += self._upload(payload.wheel, wh)
        q = shlex.quote
        venv_py = posixpath.join(self.venv, "bin", "python")
        marker = posixpath.join(self.venv, ".kvds-source")
        have = self.sh(f"cat {q(marker)} 2>/dev/null", what="checking the installed kvds").stdout.strip()
        if have == payload.source_hash:
            return f"kvds {payload.source_hash} already installed ({shipped} file(s) shipped)"
        self._check(self.sh(f"test -x {q(venv_py)} || {q(self.python['python'])} -m venv {q(self.venv)}",
                            what="creating the venv"), "creating the venv")
        index = f"--no-index --find-links {q(wh)}" if self.opts.deps == "ship" else ""
        pip = f"{q(venv_py)} -m pip install -q --no-compile --disable-pip-version-check"
        self._check(self.sh(f"{pip} {index} " + " ".join(q(d) for d in deps), what="installing dependencies"),
                    "installing dependencies")
        wheel = posixpath.join(wh, payload.wheel.name)
        self._check(self.sh(f"{pip} --no-index --no-deps --force-reinstall {q(wheel)} && echo {q(payload.source_hash)} > "
                            f"{q(marker)}", what="installing kvds"), "installing kvds")
        return f"installed kvds {payload.source_hash} into {self.venv} ({shipped} file(s) shipped)"

    # -- running kvds ------------------------------------------------------------------------------------
    def results_dir(self, invocation: str) -> str:
        return posixpath.join(self.root, "results", invocation)

    def kvds(self, argv: Sequence[str], invocation: str, what: str) -> Completed:
        """Run `kvds argv` as root with this host's own state, work and results directories."""
        q = shlex.quote
        res_dir = self.results_dir(invocation)
        self._mkdir(res_dir)
        env = {"KVDS_STATE_DIR": posixpath.join(self.root, "state"), "KVDS_WORK_DIR": posixpath.join(self.root, "work"),
               "KVDS_CACHE_DIR": posixpath.join(self.root, "cache"), "KVDS_RESULTS_DIR": res_dir,
               "KVDS_NO_PROGRESS": "1"}
        envs = " ".join(f"{k}={q(v)}" for k, v in env.items())
        kvds = posixpath.join(self.venv, "bin", "kvds")
        cmd = (f"cd {q(self.root)} && echo $$ > {q(posixpath.join(res_dir, '.pid'))} && "
               f"exec env {envs} {q(kvds)} " + " ".join(q(a) for a in argv))
        return self.sh(cmd, root=True, what=what)

    def restore_leftovers(self, invocation: str) -> list[dict[str, Any]]:
        """`kvds restore` for journals an earlier, interrupted kvds left on this host."""
        res = self.kvds(["restore", "--json"], invocation + "-restore", "kvds restore")
        self.sh(f"rm -rf {shlex.quote(self.results_dir(invocation + '-restore'))}", root=True, what="cleaning up")
        try:
            return json.loads(res.stdout)["summary"]["journals"] if res.stdout.strip() else []
        except (json.JSONDecodeError, KeyError, TypeError):
            raise HostCommandFailed(f"kvds restore on the host: {scrub(res.stderr.strip()) or 'no JSON output'}") from None

    def unfetched_invocations(self, current: str) -> list[str]:
        """Earlier invocations whose results were never copied home and whose kvds is no longer running."""
        base = shlex.quote(posixpath.join(self.root, "results"))
        script = (f"cd {base} && for d in */; do d=${{d%/}}; [ -d \"$d\" ] || continue; [ -e \"$d/.fetched\" ] && continue; "
                  f"p=$(cat \"$d/.pid\" 2>/dev/null); [ -n \"$p\" ] && [ -d /proc/$p ] && continue; echo \"$d\"; done")
        out = self.sh(script, what="looking for unfetched results").stdout.split()
        return [d for d in out if d != current and not d.endswith("-restore")]

    def run_dirs(self, invocation: str) -> list[str]:
        sftp = self.conn.sftp()
        base = self.results_dir(invocation)
        try:
            entries = sftp.listdir_attr(base)
        except FileNotFoundError:
            return []
        return sorted(e.filename for e in entries if stat.S_ISDIR(e.st_mode or 0))

    def fetch_tree(self, remote: str, local: Path) -> int:
        """Copy a remote directory tree; returns the number of files copied."""
        sftp = self.conn.sftp()
        local.mkdir(parents=True, exist_ok=True)
        n = 0
        for e in sftp.listdir_attr(remote):
            src = posixpath.join(remote, e.filename)
            if stat.S_ISDIR(e.st_mode or 0):
                n += self.fetch_tree(src, local / e.filename)
            elif stat.S_ISREG(e.st_mode or 0):
                sftp.get(src, str(local / e.filename))
                n += 1
        return n

    def mark_fetched(self, invocation: str, remove: bool = False) -> None:
        """Never fetch this invocation again; with remove, delete it from the host (the local store has it)."""
        d = shlex.quote(self.results_dir(invocation))
        self.sh(f"touch {d}/.fetched" + (f" && rm -rf {d}" if remove else ""), root=True, what="marking results fetched")
