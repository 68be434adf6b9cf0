/* Helpers every kvds BPF object shares (kvds.bpf.c, net_trace.bpf.c); ebpf/objects.py hashes this header into
 * each object's cache key. Needs vmlinux.h and bpf_helpers.h included first. */
#ifndef KVDS_HELPERS_H
#define KVDS_HELPERS_H

/* bcc's bpf_log2 / bpf_log2l, bit for bit: slot = floor(log2(v)) + 1, slot 1 for v = 0 or 1. */
static __always_inline unsigned int kvds_log2(unsigned int v) {
    unsigned int r, shift;
    r = (v > 0xFFFF) << 4; v >>= r;
    shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
    shift = (v > 0xF) << 2; v >>= shift; r |= shift;
    shift = (v > 0x3) << 1; v >>= shift; r |= shift;
    r |= (v >> 1);
    return r;
}

static __always_inline unsigned int kvds_log2l(unsigned long v) {
    unsigned int hi = v >> 32;
    if (hi)
        return kvds_log2(hi) + 32 + 1;
    return kvds_log2(v) + 1;
}

/* bcc's table.increment(key): create at zero, then add atomically. */
static __always_inline void kvds_increment(void *map, const void *key) {
    __u64 zero = 0, *v = bpf_map_lookup_elem(map, key);
    if (!v) {
        bpf_map_update_elem(map, key, &zero, BPF_NOEXIST);
        v = bpf_map_lookup_elem(map, key);
    }
    if (v)
        __sync_fetch_and_add(v, 1);
}

#endif /* KVDS_HELPERS_H */
