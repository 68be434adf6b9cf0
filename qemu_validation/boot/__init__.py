"""The boot layer of the guest lab: the QEMU command line, the initramfs (cpio), booting with a timeout and
reading the console, KTAP, the kernel-choosing arguments, static guest programs and running a command in a guest."""
