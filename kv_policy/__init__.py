"""KV-cache placement policies: traces, a two-tier simulator, and real-kernel replay.

The simulator answers "which policy keeps decode-critical KV in the fast tier"; replay
re-executes the same decisions as real memory accesses and O_DIRECT I/O so the
simulated ranking can be checked against a real kernel.
"""
