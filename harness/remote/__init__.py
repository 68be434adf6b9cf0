"""Running kvds experiments on other hosts: local, the QEMU guest, or native hosts over SSH (fabric).

A command opts in with one call, `harness.remote.add_target_args(parser)`; then `--target`/`--hosts` make
harness/cli.py hand it to harness.remote.dispatch, which ships kvds, runs the command on every host in
parallel and files the results home tagged by host. See README.md in this directory.
"""

from harness.remote.args import add_target_args, add_target_options

__all__ = ["add_target_args", "add_target_options"]
