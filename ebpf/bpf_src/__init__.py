"""BPF C sources of the libbpf backend (a package only so wheels carry the .c files; see ebpf/objects.py)."""
