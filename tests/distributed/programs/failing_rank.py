"""Rank 1 fails while rank 0 waits for it in a collective; the job must end, non-zero.

failing_rank.py raise        rank 1 raises after init_process_group
failing_rank.py exit         rank 1 calls sys.exit(3)
failing_rank.py early        rank 1 raises before init_process_group
failing_rank.py finish       not a failure: rank 1 ends first, rank 0 works on without collectives
"""

import os
import sys
import time

import tinytensor as tt
import tinytensor.distributed as dist

mode = sys.argv[1]
rank = int(os.environ.get("PMI_RANK", "0"))
if mode == "early" and rank == 1:
    raise ValueError("rank 1 failed before joining")
dist.init_process_group("mpi")
if mode == "finish":
    dist.all_reduce(tt.ones(3))
    if rank == 0:
        time.sleep(1.0)  # rank 1 has ended (and said so) by now; rank 0 makes no collective
        print("rank 0: finished after rank 1 ended", flush=True)
    sys.exit(0)
if rank == 1:
    if mode == "raise":
        raise ValueError("rank 1 failed on purpose")
    if mode == "exit":
        sys.exit(3)
dist.all_reduce(tt.ones(3))  # rank 0 waits here for a rank that will never come
print(f"rank {rank}: passed the collective (it should not have)", flush=True)
