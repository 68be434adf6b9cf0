"""The delivery track: KV moving between a prefill and a decode host, per-class network priority measured."""
