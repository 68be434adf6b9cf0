"""QEMU guest lab: build a patched Linux, boot it under QEMU (KVM where a guest kernel runs under it, else TCG),
run commands and the mm_intent validator in it.

Three layers: `kernel/` (sources, Kconfig fragments, cached builds, the series check, the errno table of a build),
`boot/` (the QEMU command line, the initramfs, booting with a timeout, the console's splats, KTAP, static guest
programs, whether KVM runs a guest here, running a command in a guest: `boot.guest_command`, the API other
tracks call), and on top the verbs of `kvds qemu`, one `<verb>_run` module each (build, build-list, build-prune,
run, validate, exit-bench, reclaim-bench, rebuild-time), with `cli`, `render`, `probe`, `report_section`,
`guest_target` (the lab kernels `--target guest` boots) and `mm_intent_client` (the user-space side of the
register interface).
"""
