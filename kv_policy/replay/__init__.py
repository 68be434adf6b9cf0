"""The machinery behind `kvds policy replay` (the verb itself is kv_policy/replay_run.py): a policy's simulated
decisions turned into a plan of slot moves (plan.py), executed as real memory copies and O_DIRECT I/O (execute.py
over slot_io.py), set up, repeated and summarised per policy (session.py), and the tier costs refitted to what this
host measured (fit.py)."""
