"""The VM track: a KV memory arena under memory pressure, each intent class mapped onto madvise, memcg,
swap/zswap, DAMON and MGLRU, and what re-accessing each class then costs (see kernel_vm/README.md)."""
