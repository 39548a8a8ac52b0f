#pragma once
// A small CPU emulator of the CUDA SIMT model, enough to run the tensor-core kernels written over
// src/kernels/warp_mma.cuh on a machine without a GPU (define SG_SIMT_EMULATION before including them).
// Each thread of a block is a ucontext fiber; blocks run one after another. Block barriers and the warp
// collectives (shuffles, ldmatrix, mma.sync) are rendezvous points where a thread yields until its warp
// (or block) has arrived; the collectives then compute each lane's result from every lane's inputs with
// the PTX ISA's fragment layouts. Shared memory starts as 0xFF bytes (NaN), like poisoned buffers.
// Slow (a context switch per collective per thread): for small shapes in tests.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <ucontext.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

namespace sg::emu {

struct Block {
  dim3 block_idx, grid_dim;
  int nthreads = 0;
  std::vector<unsigned char> smem;
  struct Fiber {
    ucontext_t ctx;
    std::unique_ptr<char[]> stack;
    bool done = false;
  };
  std::vector<Fiber> fibers;
  ucontext_t scheduler;
  int current = 0;
  int barrier_arrived = 0;
  uint64_t barrier_generation = 0;
  static constexpr int kWords = 8;  // largest per-lane payload of a collective
  struct Slot {
    uint32_t data[32][kWords];
  };
  std::vector<std::array<Slot, 2>> slots;              // per warp, double-buffered by op parity
  std::vector<std::array<uint64_t, 32>> ops_deposited;  // per warp and lane
  std::function<void()> body;
};

inline Block*& current_block() {
  static Block* block = nullptr;
  return block;
}

inline void yield_to_scheduler() {
  Block* b = current_block();
  swapcontext(&b->fibers[b->current].ctx, &b->scheduler);
}

inline int thread_index() { return current_block()->current; }
inline unsigned lane_id() { return static_cast<unsigned>(thread_index()) & 31u; }
inline unsigned warp_id() { return static_cast<unsigned>(thread_index()) >> 5; }
inline int block_index_x() { return static_cast<int>(current_block()->block_idx.x); }
inline int block_index_y() { return static_cast<int>(current_block()->block_idx.y); }
inline int block_index_z() { return static_cast<int>(current_block()->block_idx.z); }
inline unsigned char* dynamic_smem() { return current_block()->smem.data(); }
inline float fast_exp(float x) { return std::exp(x); }

inline void block_sync() {
  Block* b = current_block();
  const uint64_t generation = b->barrier_generation;
  if (++b->barrier_arrived == b->nthreads) {
    b->barrier_arrived = 0;
    ++b->barrier_generation;
    return;
  }
  while (b->barrier_generation == generation) yield_to_scheduler();
}

// Deposits this lane's words and waits for the whole warp; returns every lane's words (valid until the
// lane's next collective).
inline const uint32_t (*exchange(const uint32_t* mine, int words))[Block::kWords] {
  Block* b = current_block();
  const int warp = static_cast<int>(warp_id()), lane = static_cast<int>(lane_id());
  auto& deposited = b->ops_deposited[warp];
  const uint64_t op = deposited[lane];
  Block::Slot& slot = b->slots[warp][op & 1];
  std::memcpy(slot.data[lane], mine, static_cast<size_t>(words) * 4);
  deposited[lane] = op + 1;
  for (;;) {
    bool all = true;
    for (int l = 0; l < 32; ++l) all = all && deposited[l] >= op + 1;
    if (all) break;
    yield_to_scheduler();
  }
  return slot.data;
}

inline float shuffle(float v, int src_of_lane_delta, int mode) {
  uint32_t w;
  std::memcpy(&w, &v, 4);
  const auto* all = exchange(&w, 1);
  const int lane = static_cast<int>(lane_id());
  int src = lane;
  if (mode == 0) src = lane ^ src_of_lane_delta;
  if (mode == 1 && lane - src_of_lane_delta >= 0) src = lane - src_of_lane_delta;
  if (mode == 2 && lane + src_of_lane_delta < 32) src = lane + src_of_lane_delta;
  float r;
  std::memcpy(&r, &all[src][0], 4);
  return r;
}
inline float shfl_xor(float v, int mask) { return shuffle(v, mask, 0); }
inline float shfl_up(float v, int delta) { return shuffle(v, delta, 1); }
inline float shfl_down(float v, int delta) { return shuffle(v, delta, 2); }

inline uint16_t bits_at(const __nv_bfloat16* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// ldmatrix .x4: lanes 8m..8m+7 give the row addresses of matrix m; register m of lane l holds row l/4,
// columns 2(l%4), 2(l%4)+1 of matrix m (transposed: rows 2(l%4), 2(l%4)+1 of column l/4).
inline void ldmatrix_impl(uint32_t (&r)[4], const __nv_bfloat16* row_address, bool trans) {
  uint32_t words[2];
  std::memcpy(words, &row_address, sizeof(row_address));
  const auto* all = exchange(words, 2);
  const int lane = static_cast<int>(lane_id());
  for (int m = 0; m < 4; ++m) {
    auto row = [&](int i) {
      const __nv_bfloat16* p;
      std::memcpy(&p, all[8 * m + i], sizeof(p));
      return p;
    };
    uint16_t lo, hi;
    if (!trans) {
      lo = bits_at(row(lane / 4) + 2 * (lane % 4));
      hi = bits_at(row(lane / 4) + 2 * (lane % 4) + 1);
    } else {
      lo = bits_at(row(2 * (lane % 4)) + lane / 4);
      hi = bits_at(row(2 * (lane % 4) + 1) + lane / 4);
    }
    r[m] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
}
inline void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* p) { ldmatrix_impl(r, p, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* p) { ldmatrix_impl(r, p, true); }

inline float half_of(uint32_t word, int half) {
  const uint32_t bits = half == 0 ? (word & 0xffffu) << 16 : word & 0xffff0000u;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// mma.sync.m16n8k16 bf16 -> fp32: d += A B with the fragment layouts of warp_mma.cuh.
inline void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  const uint32_t words[6] = {a[0], a[1], a[2], a[3], b0, b1};
  const auto* all = exchange(words, 6);
  const int lane = static_cast<int>(lane_id());
  auto A = [&](int r, int k) { return half_of(all[(r % 8) * 4 + (k % 8) / 2][(r / 8) + 2 * (k / 8)], k % 2); };
  auto B = [&](int k, int n) { return half_of(all[n * 4 + (k % 8) / 2][4 + k / 8], k % 2); };
  for (int i = 0; i < 4; ++i) {
    const int row = lane / 4 + 8 * (i / 2), col = 2 * (lane % 4) + (i & 1);
    float acc = d[i];
    for (int k = 0; k < 16; ++k) acc += A(row, k) * B(k, col);
    d[i] = acc;
  }
}

inline void fiber_entry() {
  Block* b = current_block();
  b->body();
  b->fibers[b->current].done = true;
}

// Prepares a fiber to run fiber_entry and return to `link`. Kept out of line: getcontext returns twice, and
// the launch loop's variables must not live in its frame.
__attribute__((noinline)) inline void init_fiber(Block::Fiber& f, ucontext_t* link, size_t stack_bytes) {
  f.stack.reset(new char[stack_bytes]);
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack.get();
  f.ctx.uc_stack.ss_size = stack_bytes;
  f.ctx.uc_link = link;
  makecontext(&f.ctx, fiber_entry, 0);
}

// Runs `body` as every thread of every block of the grid (blocks in order, x fastest).
inline void launch(dim3 grid, int threads, size_t smem_bytes, const std::function<void()>& body) {
  if (threads % 32 != 0) throw std::runtime_error("emulator: block size must be a multiple of 32");
  constexpr size_t kStack = 256 * 1024;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b;
        b.block_idx = dim3(x, y, z);
        b.grid_dim = grid;
        b.nthreads = threads;
        b.smem.assign(smem_bytes + 16, 0xFF);
        b.slots.resize(threads / 32);
        b.ops_deposited.assign(threads / 32, std::array<uint64_t, 32>{});
        b.body = body;
        b.fibers.resize(threads);
        current_block() = &b;
        for (auto& f : b.fibers) init_fiber(f, &b.scheduler, kStack);
        for (bool running = true; running;) {
          running = false;
          for (int t = 0; t < threads; ++t) {
            if (b.fibers[t].done) continue;
            running = true;
            b.current = t;
            swapcontext(&b.scheduler, &b.fibers[t].ctx);
          }
        }
        current_block() = nullptr;
      }
}

// Launch policy for kernels written over a `launch(name, kernel, grid, threads, smem, args)` interface.
struct Launch {
  template <class Kernel, class Args>
  void operator()(const char*, Kernel kernel, dim3 grid, int threads, size_t smem_bytes, const Args& args) const {
    launch(grid, threads, smem_bytes, [&] { kernel(args); });
  }
};

}  // namespace sg::emu
