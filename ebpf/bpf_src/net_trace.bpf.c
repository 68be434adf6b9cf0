// SPDX-License-Identifier: GPL-2.0
/* kvds delivery track (net_priority): a kernel-side view of one interface's traffic per socket priority, for the
 * libbpf backend (compiled once by ebpf/objects.build against the running kernel's vmlinux.h; loaded by
 * ebpf/net_trace.py). Separate from kvds.bpf.c so the block/reclaim/fault object is not rebuilt for it.
 *
 *   qdisc queueing delay  net:net_dev_queue (__dev_queue_xmit, after the tx queue is picked and before the
 *                         qdisc's enqueue) -> net:net_dev_start_xmit (xmit_one, just before the driver's
 *                         ndo_start_xmit), paired by skb address, keyed by skb->priority as read at
 *                         net_dev_queue (what HTB classifies on), for ONE device: ifindex AND the inode of its
 *                         network namespace (ifindex is per namespace), both .rodata constants.
 *   retransmits           tcp:tcp_retransmit_skb, counted per (netns, sk->sk_priority, local port, remote port,
 *                         err), filtered by socket namespace and/or port.
 *   tcp_probe (optional)  tcp:tcp_probe (tcp_rcv_established: every segment a socket receives in ESTABLISHED):
 *                         srtt (us) and snd_cwnd per flow, srtt log2 histogram per priority.
 *
 * Two hooks for each event, chosen by the loader: tp_btf (typed arguments read with direct BTF loads, no helper
 * calls) and the classic tracepoint (record fields, struct fields via BPF_CORE_READ). Field offsets of
 * sk_buff, net_device, net, sock and tcp_sock are CO-RE relocated against the running kernel either way.
 *
 * Histograms: bcc's bpf_log2l slots, slot = floor(log2(v)) + 1 (1 for v = 0), i.e. slot k holds
 * [2^(k-1), 2^k - 1], the layout ebpf/hist.py's bounds() documents (and kvds.bpf.c's kvds_log2l computes).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "kvds_helpers.h"  /* kvds_log2l (bcc's bpf_log2l), kvds_increment */

char LICENSE[] SEC("license") = "GPL";

/* Keep in step with NetCfg in ebpf/net_trace.py. */
#define NET_MAX_PORTS 16
#define NET_MAX_NETNS 4
struct net_cfg {
    __u32 ifindex;    /* the device whose egress is timed ...            */
    __u32 dev_netns;  /* ... in this network namespace (nsfs inode)      */
    __u32 nports;     /* TCP events: 0 = any port, else sport or dport in ports[] */
    __u32 nnetns;     /* TCP events: 0 = any namespace, else the socket's namespace in netns[] */
    __u16 ports[NET_MAX_PORTS];
    __u32 netns[NET_MAX_NETNS];
    __u32 key;        /* queue delay keyed by: 0 skb->priority (SO_PRIORITY, an HTB class id), 1 the IPv4 DSCP */
};
const volatile struct net_cfg cfg = {};

#define HASH(name, k, v, n) \
    struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, n); __type(key, k); __type(value, v); } name SEC(".maps")
#define PERCPU_HASH(name, k, v, n) \
    struct { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, n); __type(key, k); \
             __type(value, v); } name SEC(".maps")

/* ---- qdisc queueing delay ------------------------------------------------------------------------------- */
struct nq_val { __u64 ts; __u32 prio; __u32 len; };
struct nq_hkey { __u32 prio; __u32 slot; };
struct nq_stat { __u64 count; __u64 bytes; __u64 sum_ns; __u64 max_ns; };
struct nq_akey { __u32 prio; __u32 what; };
/* nq_acct what: 0 queued (net_dev_queue seen), 1 untimed (start_xmit without a queue entry), 2 overwritten (a
 * later skb at the same address replaced an entry that never reached start_xmit: dropped by the qdisc, or
 * segmented into new skbs), 3 lost (the in-flight map refused the entry). */
#define NQ_QUEUED 0
#define NQ_UNTIMED 1
#define NQ_OVERWRITTEN 2
#define NQ_LOST 3
HASH(nq_inflight, __u64, struct nq_val, 16384);
HASH(nq_hist, struct nq_hkey, __u64, 4096);
PERCPU_HASH(nq_stats, __u32, struct nq_stat, 1024);
HASH(nq_acct, struct nq_akey, __u64, 4096);

static __always_inline void nq_account(__u32 prio, __u32 what) {
    struct nq_akey k = {.prio = prio, .what = what};
    kvds_increment(&nq_acct, &k);
}

static __always_inline int nq_queue(__u64 skb, __u32 prio, __u32 len) {
    struct nq_val v = {.ts = bpf_ktime_get_ns(), .prio = prio, .len = len};
    struct nq_val *prev = bpf_map_lookup_elem(&nq_inflight, &skb);
    if (prev)
        nq_account(prev->prio, NQ_OVERWRITTEN);
    nq_account(prio, NQ_QUEUED);
    if (bpf_map_update_elem(&nq_inflight, &skb, &v, BPF_ANY))
        nq_account(prio, NQ_LOST);
    return 0;
}

static __always_inline int nq_xmit(__u64 skb, __u32 prio_now) {
    struct nq_val *v = bpf_map_lookup_elem(&nq_inflight, &skb);
    if (!v) {
        nq_account(prio_now, NQ_UNTIMED);
        return 0;
    }
    __u64 delta = bpf_ktime_get_ns() - v->ts;
    __u32 prio = v->prio, len = v->len;
    bpf_map_delete_elem(&nq_inflight, &skb);
    struct nq_hkey hk = {.prio = prio, .slot = kvds_log2l(delta)};
    kvds_increment(&nq_hist, &hk);
    struct nq_stat zero = {}, *s = bpf_map_lookup_elem(&nq_stats, &prio);
    if (!s) {
        bpf_map_update_elem(&nq_stats, &prio, &zero, BPF_NOEXIST);
        s = bpf_map_lookup_elem(&nq_stats, &prio);
    }
    if (s) {  /* this CPU's copy: no other writer */
        s->count += 1;
        s->bytes += len;
        s->sum_ns += delta;
        if (delta > s->max_ns)
            s->max_ns = delta;
    }
    return 0;
}

/* The queue-delay key: the socket priority, or (cfg.key == NQ_KEY_DSCP, what u32 filters on the DSCP field
 * classify by) the IPv4 header's DSCP, NQ_NOT_IPV4 for any other packet. The network header is set before
 * __dev_queue_xmit (ip_finish_output2 -> neigh_output), so head + network_header is the IP header here. */
#define NQ_KEY_DSCP 1
#define NQ_NOT_IPV4 0xFFFF
static __always_inline __u32 nq_key(const struct sk_buff *skb) {
    if (cfg.key != NQ_KEY_DSCP)
        return BPF_CORE_READ(skb, priority);
    if (BPF_CORE_READ(skb, protocol) != bpf_htons(0x0800))  /* ETH_P_IP */
        return NQ_NOT_IPV4;
    unsigned char *head = BPF_CORE_READ(skb, head);
    __u16 nh = BPF_CORE_READ(skb, network_header);
    __u8 tos = 0;
    if (bpf_probe_read_kernel(&tos, sizeof(tos), head + nh + 1))  /* iphdr: version/ihl, then tos */
        return NQ_NOT_IPV4;
    return tos >> 2;
}

SEC("tp_btf/net_dev_queue")
int BPF_PROG(nd_queue_btf, struct sk_buff *skb)
{
    struct net_device *dev = skb->dev;
    if (dev->ifindex != cfg.ifindex || dev->nd_net.net->ns.inum != cfg.dev_netns)
        return 0;
    return nq_queue((__u64)skb, nq_key(skb), skb->len);
}

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(nd_xmit_btf, const struct sk_buff *skb, const struct net_device *dev)
{
    if (dev->ifindex != cfg.ifindex || dev->nd_net.net->ns.inum != cfg.dev_netns)
        return 0;
    return nq_xmit((__u64)skb, nq_key(skb));
}

SEC("tracepoint/net/net_dev_queue")
int nd_queue_tp(struct trace_event_raw_net_dev_template *ctx)
{
    struct sk_buff *skb = ctx->skbaddr;
    struct net_device *dev = BPF_CORE_READ(skb, dev);
    if (BPF_CORE_READ(dev, ifindex) != cfg.ifindex || BPF_CORE_READ(dev, nd_net.net, ns.inum) != cfg.dev_netns)
        return 0;
    return nq_queue((__u64)skb, nq_key(skb), ctx->len);
}

SEC("tracepoint/net/net_dev_start_xmit")
int nd_xmit_tp(struct trace_event_raw_net_dev_start_xmit *ctx)
{
    const struct sk_buff *skb = ctx->skbaddr;
    struct net_device *dev = BPF_CORE_READ(skb, dev);
    if (BPF_CORE_READ(dev, ifindex) != cfg.ifindex || BPF_CORE_READ(dev, nd_net.net, ns.inum) != cfg.dev_netns)
        return 0;
    return nq_xmit((__u64)skb, nq_key(skb));
}

/* ---- TCP: retransmits, tcp_probe ----------------------------------------------------------------------- */
static __always_inline int tcp_wanted(__u32 netns, __u16 sport, __u16 dport) {
    if (cfg.nnetns) {
        int ok = 0;
        for (int i = 0; i < NET_MAX_NETNS; i++)
            if (i < cfg.nnetns && cfg.netns[i] == netns)
                ok = 1;
        if (!ok)
            return 0;
    }
    if (cfg.nports) {
        int ok = 0;
        for (int i = 0; i < NET_MAX_PORTS; i++)
            if (i < cfg.nports && (cfg.ports[i] == sport || cfg.ports[i] == dport))
                ok = 1;
        if (!ok)
            return 0;
    }
    return 1;
}

struct rtx_key { __u32 netns; __u32 prio; __u16 sport; __u16 dport; __s32 err; };
HASH(rtx_counts, struct rtx_key, __u64, 4096);

static __always_inline int rtx_count(__u32 netns, __u32 prio, __u16 sport, __u16 dport, __s32 err) {
    if (!tcp_wanted(netns, sport, dport))
        return 0;
    struct rtx_key k = {.netns = netns, .prio = prio, .sport = sport, .dport = dport, .err = err};
    kvds_increment(&rtx_counts, &k);
    return 0;
}

/* 6.18: trace_tcp_retransmit_skb(sk, skb, err) carries the attempt's result; err != 0 is one that sent nothing. */
SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_rtx_btf, const struct sock *sk, const struct sk_buff *skb, int err)
{
    return rtx_count(sk->__sk_common.skc_net.net->ns.inum, sk->sk_priority, sk->__sk_common.skc_num,
                     bpf_ntohs(sk->__sk_common.skc_dport), err);
}

SEC("tracepoint/tcp/tcp_retransmit_skb")
int tcp_rtx_tp(struct trace_event_raw_tcp_retransmit_skb *ctx)
{
    const struct sock *sk = ctx->skaddr;
    return rtx_count(BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum), BPF_CORE_READ(sk, sk_priority),
                     ctx->sport, ctx->dport, ctx->err);
}

struct probe_key { __u32 netns; __u16 sport; __u16 dport; };
struct probe_val {
    __u64 samples; __u64 srtt_sum_us; __u64 cwnd_sum;
    __u32 srtt_min_us; __u32 srtt_max_us; __u32 srtt_last_us;
    __u32 cwnd_min; __u32 cwnd_max; __u32 cwnd_last;
    __u32 prio; __u32 pad;
};
struct probe_hkey { __u32 prio; __u32 slot; };
HASH(probe_flows, struct probe_key, struct probe_val, 4096);
HASH(probe_srtt_hist, struct probe_hkey, __u64, 4096);

/* Called with the socket locked (tcp_rcv_established), so one flow's entry has one writer at a time. */
static __always_inline int probe_sample(__u32 netns, __u32 prio, __u16 sport, __u16 dport, __u32 srtt_us,
                                        __u32 cwnd) {
    if (!tcp_wanted(netns, sport, dport))
        return 0;
    struct probe_key k = {.netns = netns, .sport = sport, .dport = dport};
    struct probe_val *v = bpf_map_lookup_elem(&probe_flows, &k);
    if (!v) {
        struct probe_val init = {.srtt_min_us = 0xFFFFFFFF, .cwnd_min = 0xFFFFFFFF};
        bpf_map_update_elem(&probe_flows, &k, &init, BPF_NOEXIST);
        v = bpf_map_lookup_elem(&probe_flows, &k);
        if (!v)
            return 0;
    }
    v->samples += 1;
    v->srtt_sum_us += srtt_us;
    v->cwnd_sum += cwnd;
    if (srtt_us < v->srtt_min_us) v->srtt_min_us = srtt_us;
    if (srtt_us > v->srtt_max_us) v->srtt_max_us = srtt_us;
    if (cwnd < v->cwnd_min) v->cwnd_min = cwnd;
    if (cwnd > v->cwnd_max) v->cwnd_max = cwnd;
    v->srtt_last_us = srtt_us;
    v->cwnd_last = cwnd;
    v->prio = prio;
    struct probe_hkey hk = {.prio = prio, .slot = kvds_log2l(srtt_us)};
    kvds_increment(&probe_srtt_hist, &hk);
    return 0;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(tcp_probe_btf, struct sock *sk, const struct sk_buff *skb)
{
    struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
    if (!tp)
        return 0;
    return probe_sample(sk->__sk_common.skc_net.net->ns.inum, sk->sk_priority, sk->__sk_common.skc_num,
                        bpf_ntohs(sk->__sk_common.skc_dport), tp->srtt_us >> 3, tp->snd_cwnd);
}

SEC("tracepoint/tcp/tcp_probe")
int tcp_probe_tp(struct trace_event_raw_tcp_probe *ctx)
{
    const struct sock *sk = ctx->skaddr;
    return probe_sample(BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum), BPF_CORE_READ(sk, sk_priority),
                        ctx->sport, ctx->dport, ctx->srtt, ctx->snd_cwnd);
}
