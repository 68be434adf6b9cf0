"""Journaled changes of kernel state. Import from here; every function records its undo first.

Modules: files (sysfs/procfs/sysctl values, scratch files), block (schedulers), loop (loop devices),
swap (zram, swapfiles, swapon), cgroups (creation, limits, process moves), mounts (tracefs, debugfs),
netns (network namespaces, veth pairs), qdisc (traffic control inside kvds's namespaces), guards (what kvds must
never touch).
"""

from harness.knobs.files import create_dir, create_file, read_knob, sysctl, write_knob
from harness.knobs.block import set_scheduler, scheduler_of
from harness.knobs.loop import loop_attach, loop_detach
from harness.knobs.swap import swapfile, swapon, zram_device, zram_swap
from harness.knobs.cgroups import Cgroup, create_cgroup, create_child, hierarchy_for
from harness.knobs.mounts import ensure_debugfs, ensure_tracefs, is_mounted, mount
from harness.knobs.netns import create_netns, create_veth, create_veth_between  # harness/remote, net_priority
from harness.knobs.qdisc import HtbClass, htb_priority, install_htb, install_tbf, qdisc_stats  # net_priority
from harness.knobs import workers  # worker processes: die with kvds, ended first by restore

__all__ = [
    "create_dir", "create_file", "read_knob", "sysctl", "write_knob", "set_scheduler", "scheduler_of",
    "loop_attach", "loop_detach", "swapfile", "swapon", "zram_device", "zram_swap", "Cgroup", "create_cgroup",
    "create_child", "hierarchy_for", "ensure_debugfs", "ensure_tracefs", "is_mounted", "mount", "create_netns",
    "create_veth", "create_veth_between", "HtbClass", "htb_priority", "install_htb", "install_tbf", "qdisc_stats",
    "workers",
]
