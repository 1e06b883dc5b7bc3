"""How DDP groups gradients into buckets and how ZeRO splits parameters (no MPI needed)."""

from tinytensor.nn.parallel.distributed import assign_buckets

import tinytensor as tt
from tinytensor.distributed.optim.zero_redundancy_optimizer import partition_parameters


def params(*sizes, dtype=tt.float32):
    return [tt.zeros(n, dtype=dtype, requires_grad=True) for n in sizes]


def test_buckets_fill_in_reverse_order_and_close_at_the_cap():
    ps = params(100, 200, 300, 400, 500)  # float32: 4 bytes each
    buckets = assign_buckets(ps, bucket_cap_bytes=4 * 600, first_bucket_bytes=4 * 400)
    # reversed: 500 alone passes the first cap (400); then 400+300 >= 600; then 200+100
    assert [[p.numel() for p in b.params] for b in buckets] == [[500], [400, 300], [200, 100]]
    assert [b.flat.size for b in buckets] == [500, 700, 300]
    assert buckets[1].spans == [(0, 400), (400, 700)]


def test_one_dtype_per_bucket():
    ps = params(10, 10) + params(10, dtype=tt.float64)
    buckets = assign_buckets(ps, bucket_cap_bytes=10**6, first_bucket_bytes=10**6)
    kinds = sorted(str(b.flat.dtype) for b in buckets)
    assert kinds == ["float32", "float64"]
    assert all(all(p.dtype == b.flat.dtype for p in b.params) for b in buckets)


def test_zero_shards_are_balanced_and_cover_every_parameter():
    sizes = [1000, 700, 300, 300, 200, 100, 50, 50]
    ps = params(*sizes)
    shards = partition_parameters(ps, 3)
    assert sorted(id(p) for shard in shards for p in shard) == sorted(id(p) for p in ps)
    loads = [sum(p.numel() for p in shard) for shard in shards]
    # largest first, each to the least loaded rank: 1000 | 700+100+50 | 300+300+200+50
    assert loads == [1000, 850, 850]
