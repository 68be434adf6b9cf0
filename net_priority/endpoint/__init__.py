"""Traffic endpoints of the delivery track, one process per role, run inside the lab's network namespaces
(`ip netns exec NS .venv/bin/python -m net_priority.endpoint ROLE ...`, started by the bench through
harness/knobs/workers.py, so each dies with kvds).

All TCP over IPv4. Clocks are CLOCK_MONOTONIC nanoseconds (`time.monotonic_ns`, the clock ioload and kvds's
tracefs instances stamp with); network namespaces share it, so the decode side's fetch times and the bulk
receiver's intervals are on one time axis.

Roles (`--help` on each):
- `fetch-server --bind ADDR:PORT [--sockopt TEXT] [--out FILE.json]`: per request, an 8-byte big-endian size
  N; answers N bytes (its first 8 bytes are N again, big-endian, when N >= 8, so the fetcher can tell an
  answer belongs to its request) from a per-connection preallocated buffer with one `sendall`. Thread per
  connection. The socket class is applied to the listener and to every accepted socket and read back (the
  prefill side's sending sockets are the ones the qdisc sees); a refused option ends the server (exit 1).
- `fetcher --connect ADDR:PORT [--sizes LIST] [--step-ms MS] (--count N | --duration S) --out FILE.npz [--sockopt
  TEXT] [--seed K] [--warmup W] [--spin-us US] [--connect-timeout S]` (defaults: sizes 16384,65536,262144, step 5
  ms, seed 0, warm-up 20, spin 200 us, connect timeout 5 s): open loop on one persistent connection. Fetch i
  (counting the warm-up ones) is intended at t0 + i * step; the fetcher sleeps until `--spin-us` before it, then
  spins on the clock (a late wake-up would be charged to the network), and issues at once when already late (behind
  a slow predecessor). It records intended, issue (just before the request is sent) and done (the answer's last byte
  received) times and the size (drawn uniformly from --sizes with Python's random.Random(--seed).choices).
  Latency = done - intended (includes the wait behind a late predecessor), service = done - issue.
  Warm-up: the first --warmup (default 20) fetches run on the same schedule (the connection's congestion window, the
  server thread and the caches get going) and are kept in the file, but excluded from the summary; `--count` /
  `--duration` count the measured fetches after them (total = warmup + count, or warmup + floor(duration / step)).
- `pingpong-server --bind ADDR:PORT [--sockopt TEXT] [--out FILE.json]` and `pingpong --connect ADDR:PORT --size
  BYTES (--count N | --duration S) --out FILE.npz [--warmup W] [--sockopt TEXT] [--poll block|spin]
  [--connect-timeout S]`: closed-loop ping-pong, BYTES each way (the client names BYTES in an 8-byte header once at
  connect; the server reads a whole message, then sends it back). Per iteration RTT = receive of the reply's last
  byte - start of the send: the like-for-like figure for `sockperf ping-pong --tcp -m BYTES`, whose latency is RTT/2
  (the summary's `half_rtt_us`).
  The default (`--poll block`) sleeps in recv until the reply arrives, as sockperf's default (epoll_wait, then recv)
  sleeps; `--poll spin` busy-waits on FIONREAD instead (the client's vCPU never idles: compare with `sockperf
  ping-pong --nonblocked --timeout 0`). On an idle VM the difference is the vCPU's wake-up.
- `bulk-receiver --bind ADDR:PORT --out FILE.npz [--interval-ms MS] [--streams K]` and `bulk-sender --connect
  ADDR:PORT --streams K --duration S [--chunk BYTES] [--sockopt TEXT] [--out FILE.json] [--connect-timeout S]`
  (interval 100 ms, chunk 1 MiB = bytes per send): K parallel TCP streams from the sender sending as fast as the
  path allows; the receiver (one thread, selectors) counts the bytes each stream delivers per interval. The sender
  stops at --duration or on SIGTERM/SIGINT (closes its streams: what is queued is still delivered, then FIN); the
  receiver stops when every stream closed (all --streams K of them if given, else every accepted one, at least one)
  or on SIGTERM/SIGINT, and always writes its file.

Every server prints `ready ADDR:PORT` (the bound address; `--bind ADDR:0` picks a free port) on stdout, flushed,
once it listens, and nothing else on stdout. Every client prints one JSON line summary on stdout at its end.

Exit statuses: 0 done, also when stopped by SIGTERM/SIGINT (the result file holds what was done: a fetch or
iteration is kept only when complete); 1 the role could not do its job (cannot bind or connect, the peer
closed or reset, a protocol error, the kernel refused a socket option), one line on stderr, result file
still written with what was measured; 2 bad arguments, one line on stderr. Never a traceback.

Result files (written atomically: temporary file in the same directory, then rename):
- fetcher .npz: `intended_ns`, `issue_ns`, `done_ns`, `size` (int64, one entry per completed fetch, warm-up
  first), `warmup` (how many leading entries are warm-up), `step_ns`, `seed`, `meta` (JSON text: role, args,
  socket options read back, why it stopped).
- pingpong .npz: `start_ns`, `rtt_ns` (int64 per completed iteration), `size`, `warmup`, `meta`.
- bulk-receiver .npz: `bytes` (int64, shape [streams, intervals]: bytes received by stream s during interval
  b = [t0_ns + b * interval_ns, + interval_ns), counted when recv returns), `t0_ns` (the first accept),
  `interval_ns`, `end_ns` (when it stopped), per stream `total`, `first_ns` / `last_ns` (first and last
  receive of data, -1 if none), `closed_ns` (EOF, -1 if open when it stopped), `meta`.
- servers' and bulk-sender's `--out` .json: connections with their peer, requests/bytes and the socket options
  read back, why they stopped.
Throughput = bytes / time: a stream's `total` / (`last_ns` - `first_ns`) from the receiver's file, or the bytes of
the intervals inside a window / its length (the fetcher's times are on the same clock); the bulk-sender's
summary gives the bytes it handed to its sockets / its sending time (`mbit_s`).

Modules, one per role and two they share: `lifecycle` (errors, signals, the one-line output, result files),
`sockets` (listen, connect with the class applied, exact receives), `arguments` (the parser, on harness.cli_args'
number types and harness.units' sizes), `servers` (fetch-server, pingpong-server), `fetcher`, `pingpong`, `bulk`
(bulk-receiver, bulk-sender); `__main__` dispatches. Nothing here imports NumPy (net_priority/npz.py writes the
.npz files by hand): in the TCG guest lab a NumPy import costs seconds per endpoint start.
"""
