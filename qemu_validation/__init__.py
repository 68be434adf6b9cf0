"""QEMU guest lab: build a patched Linux, boot it under TCG, run commands and the mm_intent validator in it.

One module per job, kunit_tool style: `source` (kernel trees), `kconfig_fragments`, `build` (cached builds),
`cpio` + `initramfs` (the guest's root), `qemu_cmd` (the one place a QEMU command line is made), `runner`
(boot + timeout + exit status), `console` (oops/BUG/KASAN/lockdep/WARN detection), `ktap`, `guest` (the API other
tracks call), `validate`, `mm_intent_client` (user-space registration helper), `cli`.
"""
