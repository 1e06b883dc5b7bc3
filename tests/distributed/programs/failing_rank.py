"""Rank 1 fails while rank 0 waits for it in a collective; the job must end, non-zero.

failing_rank.py raise        rank 1 raises after init_process_group
failing_rank.py exit         rank 1 calls sys.exit(3) (run it under tinytensor's launcher)
failing_rank.py early        rank 1 raises before init_process_group
"""

import os
import sys

import tinytensor as tt
import tinytensor.distributed as dist

mode = sys.argv[1]
rank = int(os.environ.get("PMI_RANK", "0"))
if mode == "early" and rank == 1:
    raise ValueError("rank 1 failed before joining")
dist.init_process_group("mpi")
if rank == 1:
    if mode == "raise":
        raise ValueError("rank 1 failed on purpose")
    if mode == "exit":
        sys.exit(3)
dist.all_reduce(tt.ones(3))  # rank 0 waits here for a rank that will never come
print(f"rank {rank}: passed the collective (it should not have)", flush=True)
