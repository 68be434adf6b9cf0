"""The I/O priority track: decode-critical KV reads under spill pressure, baseline vs separated."""
