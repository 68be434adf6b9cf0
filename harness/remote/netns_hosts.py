"""A lab of SSH hosts on this machine: network namespaces joined to the root namespace by veth pairs, each
running its own sshd with a generated host key and one authorized test key. Used by the remote tests and to
demonstrate multi-host runs without other machines.

Every namespace, link and directory goes through the knob journal, so leaving the lab (or `kvds restore` after a
crash) removes it. Traffic stays on the /30 links to namespaces the lab created. The namespaces share this
machine's filesystem, so each host gets its own kvds root (its journals, results and venv never collide).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.knobs import create_dir, create_netns, create_veth, workers
from harness.paths import work_dir

SSHD = "/usr/sbin/sshd"
SSHD_CONFIG = """\
ListenAddress {addr}
Port 22
HostKey {host_key}
AuthorizedKeysFile {authorized}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
MaxStartups 50
Subsystem sftp internal-sftp
"""


@dataclass
class LabHost:
    tag: str
    netns: str
    address: str
    root: Path  # this host's kvds root (its "home" on a shared filesystem)
    config: Path
    log: Path
    sshd: subprocess.Popen | None = None

    def target(self) -> str:
        return f"ssh://root@{self.address}"


class NetnsLab:
    """`with NetnsLab(2) as lab:` -> lab.hosts, lab.client_key, lab.hosts_file(); torn down on leaving."""

    def __init__(self, n_hosts: int = 2, roots_dir: Path | None = None) -> None:
        """roots_dir: keep each host's kvds root (its venv above all) there across labs instead of inside the
        lab directory, so a second lab does not reinstall kvds's dependencies (a cache, like built kernels)."""
        self.n = n_hosts
        self.roots_dir = roots_dir
        self.token = secrets.token_hex(2)
        self.dir = work_dir() / f"remote-lab-{os.getpid()}-{self.token}"
        self.client_key = self.dir / "client_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.hosts: list[LabHost] = []

    # -- set-up ----------------------------------------------------------------------------------------------
    def _subnet(self) -> ipaddress.IPv4Network:
        """A 10.250.x.0/24 no interface here uses yet (the lab's /30 links are carved from it)."""
        used = {ipaddress.ip_interface(a.address).network for ifs in psutil.net_if_addrs().values() for a in ifs
                if a.family == socket.AF_INET}
        for _ in range(64):
            net = ipaddress.ip_network(f"10.250.{secrets.randbelow(250) + 1}.0/24")
            if not any(net.overlaps(u) for u in used):
                return net
        raise RuntimeError("no free 10.250.x.0/24 subnet for the lab")

    def _keygen(self, path: Path, comment: str) -> None:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)], check=True,
                       stdin=subprocess.DEVNULL)

    def up(self) -> "NetnsLab":
        create_dir(self.dir)
        if not Path("/run/sshd").is_dir():  # sshd's privilege-separation directory
            create_dir("/run/sshd")
        self._keygen(self.client_key, "kvds-lab-client")
        self.known_hosts.touch(mode=0o600)
        net = self._subnet()
        hosts_base = list(net.hosts())
        for i in range(self.n):
            tag = f"lab{i}"
            ns = f"kvds-lab-{self.token}-{i}"
            host_ip, ns_ip = hosts_base[4 * i], hosts_base[4 * i + 1]
            create_netns(ns)
            create_veth(f"kvl{self.token}h{i}", ns, "lab0", f"{host_ip}/30", f"{ns_ip}/30")
            d = self.dir / tag
            d.mkdir()
            self._keygen(d / "ssh_host_ed25519_key", f"kvds-lab-{tag}")
            (d / "authorized_keys").write_text(Path(str(self.client_key) + ".pub").read_text())
            cfg = d / "sshd_config"
            cfg.write_text(SSHD_CONFIG.format(addr=ns_ip, host_key=d / "ssh_host_ed25519_key",
                                              authorized=d / "authorized_keys"))
            root = (self.roots_dir / tag) if self.roots_dir else d / "kvds"
            h = LabHost(tag, ns, str(ns_ip), root, cfg, d / "sshd.log")
            self.hosts.append(h)
            self.start_sshd(h)
        return self

    def start_sshd(self, h: LabHost) -> None:
        check = subprocess.run(["ip", "netns", "exec", h.netns, SSHD, "-t", "-f", str(h.config)], capture_output=True,
                               text=True)
        if check.returncode != 0:
            raise RuntimeError(f"sshd rejects the lab config: {check.stderr.strip()}")
        with open(h.log, "ab") as log:
            h.sshd = subprocess.Popen(["ip", "netns", "exec", h.netns, SSHD, "-D", "-e", "-f", str(h.config)],
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                      preexec_fn=workers.dies_with_me())  # not left in a deleted netns
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((h.address, 22), timeout=1):
                    return
            except OSError:
                if h.sshd.poll() is not None:
                    raise RuntimeError(f"sshd for {h.tag} exited: {h.log.read_text()[-300:]}")
                time.sleep(0.1)
        raise RuntimeError(f"sshd for {h.tag} did not start listening on {h.address}:22")

    def kill_sshd(self, h: LabHost) -> list[int]:
        """The host 'drops': SIGKILL its sshd and everything started through it (sessions, remote kvds)."""
        killed: list[int] = []
        if h.sshd is None:
            return killed
        try:
            root = psutil.Process(h.sshd.pid)
            procs = root.children(recursive=True) + [root]
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            try:
                p.send_signal(signal.SIGKILL)
                killed.append(p.pid)
            except psutil.NoSuchProcess:
                pass
        h.sshd.wait(timeout=10)
        h.sshd = None
        return killed

    def hosts_file(self, path: Path | None = None) -> Path:
        path = path or self.dir / "hosts"
        path.write_text("".join(f"{h.target()} name={h.tag} root={h.root} identity={self.client_key}\n"
                                for h in self.hosts))
        return path

    # -- tear-down ---------------------------------------------------------------------------------------------
    def down(self) -> None:
        for h in self.hosts:
            self.kill_sshd(h)

    def __enter__(self) -> "NetnsLab":
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc: object) -> None:
        self.down()
