// Runs unchanged CUDA kernel source on the CPU, for tests on machines without a GPU.
//
// Force-included before a .cu file (tinytensor/kernels/cpu_executor.py builds it with g++):
// `__global__` kernels become plain functions, and every CUDA thread of a block runs as a fiber
// (ucontext) that the scheduler below switches between. Blocks run one after another, so
// `__shared__` is `static` and dynamic shared memory is one buffer, refilled with NaN bytes
// before each block. `__syncthreads()`, `__syncwarp()` and warp shuffles are real rendezvous
// points: a fiber that reaches one stops until every thread it waits for is there. Between
// rendezvous points the ready fibers run in the order of a schedule (ascending, descending or
// seeded random thread ids), so a missing barrier shows as results that change with the
// schedule. Errors (a barrier reached by only some threads, threads waiting at different
// barriers, a shuffle with a lane that exited, a deadlock) end the launch with a message.

#pragma once

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

using std::max;  // CUDA's integer min and max
using std::min;

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace tt_exec {

enum State { kReady, kAtBarrier, kAtWarp, kDone };
enum WarpOp { kWarpSync, kShuffleXor, kShuffleIndex };
enum Schedule { kAscending = 0, kDescending = 1, kRandom = 2 };

constexpr size_t kStackBytes = 256 * 1024;

struct Fiber {
  ucontext_t context;
  dim3 index;
  State state = kReady;
  int barrier_line = 0;
  WarpOp op = kWarpSync;
  int arg = 0;
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
};

struct Launch {
  dim3 grid, block, block_index;
  std::vector<Fiber> fibers;
  std::vector<char*> stacks;
  ucontext_t scheduler;
  Fiber* current = nullptr;
  std::vector<unsigned char> shared;
  std::function<void()> body;
  std::string error;
};

inline Launch* g_launch = nullptr;

inline void fail(const std::string& message) {
  if (g_launch->error.empty()) g_launch->error = message;
}

inline void wait_in(Fiber* f) { swapcontext(&f->context, &g_launch->scheduler); }

inline void syncthreads(int line) {
  Fiber* f = g_launch->current;
  f->state = kAtBarrier;
  f->barrier_line = line;
  wait_in(f);
}

template <class T>
T warp_exchange(WarpOp op, unsigned mask, T value, int arg, int width) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffles of at most 8 bytes");
  Fiber* f = g_launch->current;
  if (width != 32) fail("warp shuffles with width != 32 are not supported by the executor");
  f->op = op;
  f->mask = mask;
  f->arg = arg;
  f->value = 0;
  memcpy(&f->value, &value, sizeof(T));
  f->state = kAtWarp;
  wait_in(f);
  T result;
  memcpy(&result, &f->result, sizeof(T));
  return result;
}

inline void fiber_main() {
  g_launch->body();
  g_launch->current->state = kDone;  // then uc_link returns to the scheduler
}

inline std::string describe(const Fiber& f) {
  return "thread (" + std::to_string(f.index.x) + "," + std::to_string(f.index.y) + "," +
         std::to_string(f.index.z) + ")";
}

// Releases a warp whose live lanes all wait at a warp operation; returns true if it did.
inline bool release_warp(Launch& L, size_t first, size_t last) {
  size_t live = 0, waiting = 0;
  for (size_t t = first; t < last; ++t) {
    live += L.fibers[t].state != kDone;
    waiting += L.fibers[t].state == kAtWarp;
  }
  if (waiting == 0 || waiting != live) return false;
  const Fiber& lead = *std::find_if(L.fibers.begin() + first, L.fibers.begin() + last,
                                    [](const Fiber& f) { return f.state == kAtWarp; });
  for (size_t t = first; t < last; ++t) {
    const Fiber& f = L.fibers[t];
    const unsigned lane = t - first;
    if (f.state == kDone && (lead.mask >> lane & 1u)) {
      fail("warp operation with mask " + std::to_string(lead.mask) + " but lane " +
           std::to_string(lane) + " (" + describe(f) + ") has exited");
      return false;
    }
    if (f.state == kAtWarp && (f.op != lead.op || f.mask != lead.mask)) {
      fail("lanes of one warp wait at different warp operations (" + describe(f) + " vs " +
           describe(lead) + ")");
      return false;
    }
  }
  for (size_t t = first; t < last; ++t) {
    Fiber& f = L.fibers[t];
    if (f.state != kAtWarp) continue;
    if (f.op != kWarpSync) {
      const unsigned lane = t - first;
      const unsigned source = f.op == kShuffleXor ? (lane ^ f.arg) & 31u : f.arg & 31u;
      if (first + source >= last || L.fibers[first + source].state != kAtWarp) {
        fail(describe(f) + " shuffles from lane " + std::to_string(source) +
             ", which is not taking part");
        return false;
      }
      f.result = L.fibers[first + source].value;
    }
  }
  for (size_t t = first; t < last; ++t)
    if (L.fibers[t].state == kAtWarp) L.fibers[t].state = kReady;
  return true;
}

// Releases the block barrier if every live thread waits at it; reports partial barriers.
inline bool release_barrier(Launch& L) {
  size_t done = 0, waiting = 0;
  int line = -1;
  for (const Fiber& f : L.fibers) {
    done += f.state == kDone;
    if (f.state == kAtBarrier) {
      if (waiting++ == 0) line = f.barrier_line;
      if (f.barrier_line != line) {
        fail("threads wait at different __syncthreads() (lines " + std::to_string(line) +
             " and " + std::to_string(f.barrier_line) + ")");
        return false;
      }
    }
  }
  if (waiting == 0 || waiting + done != L.fibers.size()) return false;
  if (done > 0) {
    fail("__syncthreads() at line " + std::to_string(line) + " reached by " +
         std::to_string(waiting) + " of " + std::to_string(L.fibers.size()) +
         " threads: the others had exited");
    return false;
  }
  for (Fiber& f : L.fibers) f.state = kReady;
  return true;
}

inline void run_block(Launch& L, int schedule, std::mt19937& rng) {
  const size_t n = L.fibers.size();
  std::vector<size_t> order(n);
  for (;;) {
    for (size_t t = 0; t < n; ++t) order[t] = schedule == kDescending ? n - 1 - t : t;
    if (schedule == kRandom) std::shuffle(order.begin(), order.end(), rng);
    for (size_t t : order) {
      Fiber& f = L.fibers[t];
      if (f.state != kReady) continue;
      L.current = &f;
      swapcontext(&L.scheduler, &f.context);
      if (!L.error.empty()) return;
    }
    bool released = false;
    for (size_t first = 0; first < n; first += 32)
      released |= release_warp(L, first, std::min(n, first + 32));
    if (!L.error.empty()) return;
    if (released) continue;
    if (release_barrier(L)) continue;
    if (!L.error.empty()) return;
    size_t done = 0, at_barrier = 0, at_warp = 0;
    for (const Fiber& f : L.fibers) {
      done += f.state == kDone;
      at_barrier += f.state == kAtBarrier;
      at_warp += f.state == kAtWarp;
    }
    if (done == n) return;
    fail("deadlock: " + std::to_string(at_barrier) + " threads wait at __syncthreads(), " +
         std::to_string(at_warp) + " at warp operations, " + std::to_string(done) +
         " have exited (a barrier or shuffle under a thread-dependent condition?)");
    return;
  }
}

inline int run_launch(const unsigned* grid, const unsigned* block, unsigned long long shared_bytes,
                      std::function<void()> body, int schedule, unsigned seed, char* error,
                      int error_len) {
  Launch L;
  g_launch = &L;
  L.grid = {grid[0], grid[1], grid[2]};
  L.block = {block[0], block[1], block[2]};
  L.body = std::move(body);
  const size_t n = (size_t)block[0] * block[1] * block[2];
  L.fibers.resize(n);
  for (size_t t = 0; t < n; ++t) L.stacks.push_back(static_cast<char*>(std::malloc(kStackBytes)));
  std::mt19937 rng(seed);
  for (unsigned z = 0; z < grid[2] && L.error.empty(); ++z)
    for (unsigned y = 0; y < grid[1] && L.error.empty(); ++y)
      for (unsigned x = 0; x < grid[0] && L.error.empty(); ++x) {
        L.block_index = {x, y, z};
        // NOTE: 0xff bytes are NaN as floats: shared memory read before it is written shows.
        L.shared.assign(shared_bytes, 0xff);
        for (size_t t = 0; t < n; ++t) {
          Fiber& f = L.fibers[t];
          f = Fiber();
          f.index = {unsigned(t % block[0]), unsigned(t / block[0] % block[1]),
                     unsigned(t / (block[0] * block[1]))};
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = L.stacks[t];
          f.context.uc_stack.ss_size = kStackBytes;
          f.context.uc_link = &L.scheduler;
          makecontext(&f.context, fiber_main, 0);
        }
        run_block(L, schedule, rng);
        if (!L.error.empty())
          L.error = "block (" + std::to_string(x) + "," + std::to_string(y) + "," +
                    std::to_string(z) + "): " + L.error;
      }
  for (char* s : L.stacks) std::free(s);
  g_launch = nullptr;
  if (L.error.empty()) return 0;
  snprintf(error, error_len, "%s", L.error.c_str());
  return 1;
}

template <class... A, size_t... I>
std::function<void()> bind_arguments(void (*kernel)(A...), void** args,
                                     std::index_sequence<I...>) {
  auto values = std::make_tuple(*static_cast<std::remove_cv_t<A>*>(args[I])...);
  return [kernel, values]() { std::apply(kernel, values); };
}

template <class... A>
int launch(void (*kernel)(A...), const unsigned* grid, const unsigned* block,
           unsigned long long shared_bytes, void** args, int schedule, unsigned seed, char* error,
           int error_len) {
  return run_launch(grid, block, shared_bytes,
                    bind_arguments(kernel, args, std::index_sequence_for<A...>{}), schedule, seed,
                    error, error_len);
}

}  // namespace tt_exec

// ---- the CUDA names the kernels use --------------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define TT_DYNAMIC_SHARED(type, name) \
  type* name = reinterpret_cast<type*>(tt_exec::g_launch->shared.data())
#define threadIdx (tt_exec::g_launch->current->index)
#define blockIdx (tt_exec::g_launch->block_index)
#define blockDim (tt_exec::g_launch->block)
#define gridDim (tt_exec::g_launch->grid)
#define __syncthreads() tt_exec::syncthreads(__LINE__)

inline void __syncwarp(unsigned mask = 0xffffffffu) {
  tt_exec::warp_exchange<int>(tt_exec::kWarpSync, mask, 0, 0, 32);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask, int width = 32) {
  return tt_exec::warp_exchange(tt_exec::kShuffleXor, mask, value, lane_mask, width);
}
template <class T>
T __shfl_sync(unsigned mask, T value, int source_lane, int width = 32) {
  return tt_exec::warp_exchange(tt_exec::kShuffleIndex, mask, value, source_lane, width);
}
inline float __int_as_float(int bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}
inline int __float_as_int(float f) {
  int bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}
