#pragma once
// A toy training step for the graph runtime's GPU tests and bench (tests/graph/*_gpu_test.cu,
// bench/graph_runtime_bench.cu): > 300 launches per step of the kinds a real step has — elementwise
// kernels, deterministic reductions, cuBLASLt GEMMs (forward and an accumulating weight-gradient
// GEMM), Philox dropout reading RngState from device memory (with a fork to "model-parallel-rng"),
// device-resident step counter / lr / loss, the RNG advance kernel — marked into regions
// (layer x {attn, mlp} x {forward, backward}) with the same contract as the model's step.
//
// Every buffer comes from one MemoryPlan/Arena; the cuBLASLt handle, layouts and algorithms are
// planned once in the constructor (the production GEMM wrapper lives in src/kernels; this is a test
// workload, so it uses cuBLASLt directly).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/check.h"
#include "cuda/rng_tracker.h"
#include "graph/region.h"
#include "graph/scope_plan.h"

// Everything is internal to the including file (the test and the bench each include it once).
namespace sg::graph::toy {
namespace {

#define TOY_CUBLAS_CHECK(call)                                                                    \
  do {                                                                                            \
    const cublasStatus_t st_ = (call);                                                            \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                             \
      throw ::sg::Error(::sg::strprintf("%s failed: cublas status %d [%s:%d]", #call, static_cast<int>(st_), \
                                        __FILE__, __LINE__));                                     \
  } while (0)
// In the destructor: the failure is logged to stderr instead of thrown.
#define TOY_CUBLAS_CHECK_NOEXCEPT(call)                                                            \
  do {                                                                                             \
    const cublasStatus_t st_ = (call);                                                             \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                              \
      std::fprintf(stderr, "error: %s failed: cublas status %d [%s:%d]\n", #call, static_cast<int>(st_), \
                   __FILE__, __LINE__);                                                            \
  } while (0)

struct ToyConfig {
  int layers = 8;
  int microbatches = 2;
  int rows = 64;       // tokens per microbatch (M)
  int features = 128;  // hidden size (N = K)
  float dropout_p = 0.1f;
  int probe_draws = 64;  // RNG values recorded per microbatch and generator
  int max_steps = 64;    // capacity of the loss / probe history
  uint64_t seed = 1234;
};

inline constexpr uint32_t kProbeSite = 1000;
inline constexpr int kReduceThreads = 256;
inline constexpr int kNormBlocks = 64;

// ---------------------------------------------------------------------------------------------
// Kernels (fp32; every reduction in a fixed order so all modes are bitwise identical)
// ---------------------------------------------------------------------------------------------

__global__ void toy_tanh(const float* x, float* h, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) h[i] = tanhf(x[i]);
}

// Keep element i iff philox_uniform(seed, offset, site, i) >= p (the project's dropout rule).
__global__ void toy_dropout(float* y, const float* g, int n, const rng::RngState* state, uint32_t site, float p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float u = rng::philox_uniform(state->seed, state->offset, site, static_cast<uint64_t>(i));
  const float src = g != nullptr ? g[i] : y[i];
  y[i] = u >= p ? src * (1.0f / (1.0f - p)) : 0.0f;
}

// out[r] = sum_c f(in[r, c]) with f = identity or square; one block per row, fixed tree order.
__global__ void toy_row_reduce(const float* in, float* out, int cols, bool square) {
  __shared__ float partial[kReduceThreads];
  const float* row = in + static_cast<size_t>(blockIdx.x) * cols;
  float acc = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += square ? row[c] * row[c] : row[c];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// x += a * y - b * rowsum[r] / cols
__global__ void toy_residual(float* x, const float* y, const float* rowsum, int rows, int cols, float a, float b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  x[i] += a * y[i] - b * rowsum[i / cols] / static_cast<float>(cols);
}

__global__ void toy_affine(float* x, int n, float scale, float shift) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * scale + shift;
}

__global__ void toy_silu(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] / (1.0f + expf(-x[i]));
}

// x[r, c] *= rsqrt(sumsq[r] / cols + eps)
__global__ void toy_rms_normalize(float* x, const float* sumsq, int rows, int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  x[i] *= rsqrtf(sumsq[i / cols] / static_cast<float>(cols) + 1e-5f);
}

// g = 0.9 g + 0.1 tanh(d) - 0.01 rowsum[r] / cols
__global__ void toy_grad_update(float* g, const float* d, const float* rowsum, int rows, int cols) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  g[i] = 0.9f * g[i] + 0.1f * tanhf(d[i]) - 0.01f * rowsum[i / cols] / static_cast<float>(cols);
}

// probe[((step * microbatches + mb) * 2 + generator) * draws + i]; the step comes from device memory.
__global__ void toy_probe(float* probe, const rng::RngState* default_state, const rng::RngState* mp_state,
                          const uint32_t* step, int mb, int microbatches, int draws, int max_steps) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t s = *step;
  if (i >= 2 * draws || s >= static_cast<uint32_t>(max_steps)) return;
  const int generator = i / draws, k = i % draws;
  const rng::RngState* st = generator == 0 ? default_state : mp_state;
  const size_t base = ((static_cast<size_t>(s) * microbatches + mb) * 2 + generator) * draws;
  probe[base + k] = rng::philox_uniform(st->seed, st->offset, kProbeSite, static_cast<uint64_t>(k));
}

// partials[b] = sum of squares of a fixed grid-stride slice (fixed grid => fixed order).
__global__ void toy_sumsq_partial(const float* g, size_t n, float* partials) {
  __shared__ float partial[kReduceThreads];
  float acc = 0.0f;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    acc += g[i] * g[i];
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = partial[0];
}

__global__ void toy_norm_final(const float* partials, int count, float* norm) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  float acc = 0.0f;
  for (int i = 0; i < count; ++i) acc += partials[i];
  *norm = sqrtf(acc);
}

// W -= lr * grad / (1 + norm); lr and norm read from device memory.
__global__ void toy_sgd(float* w, const float* grad, size_t n, const float* lr, const float* norm) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) w[i] -= *lr * grad[i] / (1.0f + *norm);
}

// loss_history[*step] = mean(x^2); then ++*step. One block.
__global__ void toy_loss_and_step(const float* x, int n, float* loss_history, uint32_t* step, int max_steps) {
  __shared__ float partial[kReduceThreads];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += x[i] * x[i];
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const uint32_t s = *step;
    if (s < static_cast<uint32_t>(max_steps)) loss_history[s] = partial[0] / static_cast<float>(n);
    *step = s + 1;
  }
}

// ---------------------------------------------------------------------------------------------
// The step
// ---------------------------------------------------------------------------------------------

// Host copies of everything the modes must agree on.
struct ToySnapshot {
  std::vector<float> weights, x, loss_history, probe;
  uint32_t step = 0;
};

// Bitwise comparison (NaN poison compares equal to itself; -0 differs from +0): the modes must agree
// bit for bit. Returns the first differing index, or -1.
long first_bitwise_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    if (x != y) return static_cast<long>(i);
  }
  return -1;
}

class ToyStep {
 public:
  explicit ToyStep(const ToyConfig& config) : cfg_(config), rng_(config.seed) {
    const size_t mk = static_cast<size_t>(cfg_.rows) * cfg_.features;
    const size_t nk = static_cast<size_t>(cfg_.features) * cfg_.features;
    using cuda::MemoryCategory;
    cuda::MemoryPlan plan;
    weights_ = plan.add_array<float>("toy.weights", MemoryCategory::main_weights, nk * cfg_.layers);
    grads_ = plan.add_array<float>("toy.grads", MemoryCategory::gradients, nk * cfg_.layers);
    inputs_ = plan.add_array<float>("toy.inputs", MemoryCategory::inputs, mk * cfg_.microbatches);
    x_ = plan.add_array<float>("toy.x", MemoryCategory::activations, mk);
    y_ = plan.add_array<float>("toy.y", MemoryCategory::activations, mk);
    g_ = plan.add_array<float>("toy.g", MemoryCategory::activations, mk);
    dy_ = plan.add_array<float>("toy.dy", MemoryCategory::activations, mk);
    saved_ = plan.add_array<float>("toy.saved_h", MemoryCategory::activations, mk * cfg_.layers);
    rowsum_ = plan.add_array<float>("toy.rowsum", MemoryCategory::workspaces, static_cast<size_t>(cfg_.rows));
    partials_ = plan.add_array<float>("toy.norm_partials", MemoryCategory::workspaces, kNormBlocks);
    norm_ = plan.add_array<float>("toy.grad_norm", MemoryCategory::optimizer_state, 1);
    lr_ = plan.add_array<float>("toy.lr", MemoryCategory::optimizer_state, 1);
    step_ = plan.add_array<uint32_t>("toy.step", MemoryCategory::optimizer_state, 1);
    loss_ = plan.add_array<float>("toy.loss_history", MemoryCategory::activations, cfg_.max_steps);
    probe_ = plan.add_array<float>("toy.rng_probe", MemoryCategory::activations,
                                   static_cast<size_t>(cfg_.max_steps) * cfg_.microbatches * 2 * cfg_.probe_draws);
    workspace_ = plan.add("toy.gemm_workspace", MemoryCategory::workspaces, kWorkspaceBytes);
    rng_slot_ = rng_.plan(plan);
    arena_ = std::make_unique<cuda::Arena>(plan);
    rng_.bind(arena_->get<rng::RngState>(rng_slot_));
    plan_gemms();
  }

  ~ToyStep() {
    if (fwd_desc_) TOY_CUBLAS_CHECK_NOEXCEPT(cublasLtMatmulDescDestroy(fwd_desc_));
    if (bwd_desc_) TOY_CUBLAS_CHECK_NOEXCEPT(cublasLtMatmulDescDestroy(bwd_desc_));
    for (cublasLtMatrixLayout_t l : layouts_) TOY_CUBLAS_CHECK_NOEXCEPT(cublasLtMatrixLayoutDestroy(l));
    if (handle_) TOY_CUBLAS_CHECK_NOEXCEPT(cublasLtDestroy(handle_));
  }
  ToyStep(const ToyStep&) = delete;
  ToyStep& operator=(const ToyStep&) = delete;

  const ToyConfig& config() const { return cfg_; }
  cuda::RngTracker& rng() { return rng_; }
  const cuda::Arena& arena() const { return *arena_; }

  // Deterministic initial state (setup time, synchronous): same for every mode.
  void reset() {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    arena_->zero();
    std::mt19937 gen(static_cast<uint32_t>(cfg_.seed));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t nk = static_cast<size_t>(cfg_.features) * cfg_.features;
    std::vector<float> w(nk * cfg_.layers), in(static_cast<size_t>(cfg_.rows) * cfg_.features * cfg_.microbatches);
    const float wscale = 1.0f / std::sqrt(static_cast<float>(cfg_.features));
    for (auto& v : w) v = normal(gen) * wscale;
    for (auto& v : in) v = normal(gen);
    upload(arena_->get<float>(weights_), w);
    upload(arena_->get<float>(inputs_), in);
    upload(arena_->get<float>(lr_), std::vector<float>{0.05f});
    // NaN history: an entry the step did not write fails the comparisons.
    SG_CUDA_CHECK(cudaMemset(arena_->get<float>(loss_), 0xFF, arena_->bytes(loss_)));
    SG_CUDA_CHECK(cudaMemset(arena_->get<float>(probe_), 0xFF, arena_->bytes(probe_)));
    for (size_t g = 0; g < rng_.size(); ++g) rng_.host_state(g).offset = 0;
    rng_.upload();
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }

  // The regions each layer marks, for the scope planner.
  std::vector<LayerRegions> layer_regions() const {
    std::vector<LayerRegions> layers;
    for (int l = 0; l < cfg_.layers; ++l) layers.push_back({l, {Module::attn, Module::mlp}});
    return layers;
  }

  // Enqueues one training step on `stream`; regions go through `runner`. Returns the number of
  // operations enqueued (kernels, GEMMs, copies, memsets).
  int enqueue(cudaStream_t stream, RegionRunner& runner) {
    launches_ = 0;
    const int mk = cfg_.rows * cfg_.features;
    const size_t grad_count = static_cast<size_t>(cfg_.features) * cfg_.features * cfg_.layers;
    count(cudaMemsetAsync(arena_->get<float>(grads_), 0, grad_count * sizeof(float), stream));
    for (int mb = 0; mb < cfg_.microbatches; ++mb) {
      count(cudaMemcpyAsync(arena_->get<float>(x_), arena_->get<float>(inputs_) + static_cast<size_t>(mb) * mk,
                            mk * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      for (int l = 0; l < cfg_.layers; ++l) {
        runner.run({l, Module::attn, Phase::forward}, stream, [&, l](cudaStream_t s) { attn_forward(l, s); });
        runner.run({l, Module::mlp, Phase::forward}, stream, [&, l](cudaStream_t s) { mlp_forward(l, s); });
      }
      probe(mb, stream);
      count(cudaMemcpyAsync(arena_->get<float>(g_), arena_->get<float>(x_), mk * sizeof(float),
                            cudaMemcpyDeviceToDevice, stream));
      for (int l = cfg_.layers - 1; l >= 0; --l) {
        runner.run({l, Module::mlp, Phase::backward}, stream, [&, l](cudaStream_t s) { mlp_backward(l, s); });
        runner.run({l, Module::attn, Phase::backward}, stream, [&, l](cudaStream_t s) { attn_backward(l, s); });
      }
      rng_.launch_advance(stream);  // end of microbatch: every generator's offset += 1, on the device
      ++launches_;
    }
    optimizer(stream);
    return launches_;
  }

  // Everything the modes must agree on (synchronous; call between steps).
  ToySnapshot snapshot() {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    ToySnapshot s;
    s.weights = download<float>(weights_);
    s.x = download<float>(x_);
    s.loss_history = download<float>(loss_);
    s.probe = download<float>(probe_);
    SG_CUDA_CHECK(cudaMemcpy(&s.step, arena_->get<uint32_t>(step_), sizeof(uint32_t), cudaMemcpyDeviceToHost));
    return s;
  }

  // Index into ToySnapshot::probe.
  size_t probe_index(int step, int mb, int generator, int k) const {
    return ((static_cast<size_t>(step) * cfg_.microbatches + mb) * 2 + generator) * cfg_.probe_draws + k;
  }

 private:
  static constexpr size_t kWorkspaceBytes = size_t{4} << 20;
  static constexpr int kThreads = 256;

  unsigned blocks(size_t n) const { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }
  void count(cudaError_t err) {
    SG_CUDA_CHECK(err);
    ++launches_;
  }
  void launched(const char* name) {
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) ::sg::cuda::throw_cuda_error(err, name, __FILE__, __LINE__);
    ++launches_;
  }
  float* f(cuda::MemorySlot slot) const { return arena_->get<float>(slot); }
  template <class T>
  void upload(T* dst, const std::vector<T>& src) {
    SG_CUDA_CHECK(cudaMemcpy(dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  template <class T>
  std::vector<T> download(cuda::MemorySlot slot) const {
    std::vector<T> out(arena_->count<T>(slot));
    SG_CUDA_CHECK(cudaMemcpy(out.data(), arena_->get<T>(slot), out.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

  // Odd layers draw from "model-parallel-rng" (TE's tensor-parallel dropout region), even layers
  // from "default": the fork only changes which device pointer the kernel gets.
  const rng::RngState* dropout_state(int layer) {
    if (layer % 2 == 0) return rng_.current();
    auto fork = rng_.fork(cuda::kModelParallelRng);
    return rng_.current();
  }

  void attn_forward(int l, cudaStream_t s) {
    const int mk = cfg_.rows * cfg_.features;
    float* saved = f(saved_) + static_cast<size_t>(l) * mk;
    toy_tanh<<<blocks(mk), kThreads, 0, s>>>(f(x_), saved, mk);
    launched("toy_tanh");
    gemm_forward(l, saved, f(y_), s);
    toy_dropout<<<blocks(mk), kThreads, 0, s>>>(f(y_), nullptr, mk, dropout_state(l), static_cast<uint32_t>(l),
                                                 cfg_.dropout_p);
    launched("toy_dropout");
    toy_row_reduce<<<cfg_.rows, kReduceThreads, 0, s>>>(f(y_), f(rowsum_), cfg_.features, false);
    launched("toy_row_reduce");
    toy_residual<<<blocks(mk), kThreads, 0, s>>>(f(x_), f(y_), f(rowsum_), cfg_.rows, cfg_.features, 0.5f, 0.5f);
    launched("toy_residual");
  }

  void mlp_forward(int l, cudaStream_t s) {
    const int mk = cfg_.rows * cfg_.features;
    toy_affine<<<blocks(mk), kThreads, 0, s>>>(f(x_), mk, 1.0f + 0.01f * l, 0.001f * l);
    launched("toy_affine");
    toy_silu<<<blocks(mk), kThreads, 0, s>>>(f(x_), mk);
    launched("toy_silu");
    toy_affine<<<blocks(mk), kThreads, 0, s>>>(f(x_), mk, 1.5f, -0.01f);
    launched("toy_affine");
    toy_row_reduce<<<cfg_.rows, kReduceThreads, 0, s>>>(f(x_), f(rowsum_), cfg_.features, true);
    launched("toy_row_reduce");
    toy_rms_normalize<<<blocks(mk), kThreads, 0, s>>>(f(x_), f(rowsum_), cfg_.rows, cfg_.features);
    launched("toy_rms_normalize");
    toy_affine<<<blocks(mk), kThreads, 0, s>>>(f(x_), mk, 0.9f, 0.0f);
    launched("toy_affine");
  }

  void mlp_backward(int l, cudaStream_t s) {
    const int mk = cfg_.rows * cfg_.features;
    toy_affine<<<blocks(mk), kThreads, 0, s>>>(f(g_), mk, 0.95f, 0.0005f * l);
    launched("toy_affine");
    toy_row_reduce<<<cfg_.rows, kReduceThreads, 0, s>>>(f(g_), f(rowsum_), cfg_.features, true);
    launched("toy_row_reduce");
    toy_rms_normalize<<<blocks(mk), kThreads, 0, s>>>(f(g_), f(rowsum_), cfg_.rows, cfg_.features);
    launched("toy_rms_normalize");
    toy_silu<<<blocks(mk), kThreads, 0, s>>>(f(g_), mk);
    launched("toy_silu");
  }

  void attn_backward(int l, cudaStream_t s) {
    const int mk = cfg_.rows * cfg_.features;
    // Recompute the forward dropout mask (same generator, site and offset): dy = mask(g) / (1 - p).
    toy_dropout<<<blocks(mk), kThreads, 0, s>>>(f(dy_), f(g_), mk, dropout_state(l), static_cast<uint32_t>(l),
                                                 cfg_.dropout_p);
    launched("toy_dropout (backward)");
    gemm_weight_grad(l, f(saved_) + static_cast<size_t>(l) * mk, f(dy_), s);
    toy_row_reduce<<<cfg_.rows, kReduceThreads, 0, s>>>(f(dy_), f(rowsum_), cfg_.features, false);
    launched("toy_row_reduce");
    toy_grad_update<<<blocks(mk), kThreads, 0, s>>>(f(g_), f(dy_), f(rowsum_), cfg_.rows, cfg_.features);
    launched("toy_grad_update");
  }

  void probe(int mb, cudaStream_t s) {
    toy_probe<<<blocks(2 * static_cast<size_t>(cfg_.probe_draws)), kThreads, 0, s>>>(
        f(probe_), rng_.device_state(cuda::kDefaultRng), rng_.device_state(cuda::kModelParallelRng),
        arena_->get<uint32_t>(step_), mb, cfg_.microbatches, cfg_.probe_draws, cfg_.max_steps);
    launched("toy_probe");
  }

  void optimizer(cudaStream_t s) {
    const size_t n = static_cast<size_t>(cfg_.features) * cfg_.features * cfg_.layers;
    toy_sumsq_partial<<<kNormBlocks, kReduceThreads, 0, s>>>(f(grads_), n, f(partials_));
    launched("toy_sumsq_partial");
    toy_norm_final<<<1, 32, 0, s>>>(f(partials_), kNormBlocks, f(norm_));
    launched("toy_norm_final");
    toy_sgd<<<blocks(n), kThreads, 0, s>>>(f(weights_), f(grads_), n, f(lr_), f(norm_));
    launched("toy_sgd");
    toy_loss_and_step<<<1, kReduceThreads, 0, s>>>(f(x_), cfg_.rows * cfg_.features, f(loss_),
                                                  arena_->get<uint32_t>(step_), cfg_.max_steps);
    launched("toy_loss_and_step");
  }

  // ---- cuBLASLt (column-major API over row-major buffers) ----
  // forward:     Y[M,N] = H[M,K] W[N,K]^T      -> col-major D(N x M) = op_T(A: K x N, ld K) * B(K x M, ld K)
  // weight grad: dW[N,K] += dY[M,N]^T H[M,K]   -> col-major D(K x N) = A(K x M, ld K) * op_T(B: N x M, ld N)
  void plan_gemms() {
    const int M = cfg_.rows, N = cfg_.features, K = cfg_.features;
    TOY_CUBLAS_CHECK(cublasLtCreate(&handle_));
    const cublasOperation_t T = CUBLAS_OP_T, Nop = CUBLAS_OP_N;
    TOY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&fwd_desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    TOY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fwd_desc_, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof(T)));
    TOY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(fwd_desc_, CUBLASLT_MATMUL_DESC_TRANSB, &Nop, sizeof(Nop)));
    TOY_CUBLAS_CHECK(cublasLtMatmulDescCreate(&bwd_desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    TOY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(bwd_desc_, CUBLASLT_MATMUL_DESC_TRANSA, &Nop, sizeof(Nop)));
    TOY_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(bwd_desc_, CUBLASLT_MATMUL_DESC_TRANSB, &T, sizeof(T)));
    fwd_a_ = layout(K, N, K);
    fwd_b_ = layout(K, M, K);
    fwd_d_ = layout(N, M, N);
    bwd_a_ = layout(K, M, K);
    bwd_b_ = layout(N, M, N);
    bwd_d_ = layout(K, N, K);
    fwd_algo_ = pick_algo(fwd_desc_, fwd_a_, fwd_b_, fwd_d_);
    bwd_algo_ = pick_algo(bwd_desc_, bwd_a_, bwd_b_, bwd_d_);
  }

  cublasLtMatrixLayout_t layout(int rows, int cols, int ld) {
    cublasLtMatrixLayout_t l = nullptr;
    TOY_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld));
    layouts_.push_back(l);
    return l;
  }

  // Plan time only: the heuristic never runs inside a step. No split-K reduction schemes, so the
  // result does not depend on the order of partial sums.
  cublasLtMatmulAlgo_t pick_algo(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                 cublasLtMatrixLayout_t d) {
    cublasLtMatmulPreference_t pref = nullptr;
    TOY_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = kWorkspaceBytes;
    const uint32_t reduction_mask = CUBLASLT_REDUCTION_SCHEME_NONE;
    TOY_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    TOY_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                          &reduction_mask, sizeof(reduction_mask)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, desc, a, b, d, d, pref, 1, &result, &found);
    const cublasStatus_t destroyed = cublasLtMatmulPreferenceDestroy(pref);
    TOY_CUBLAS_CHECK(st);  // the heuristic's failure first: it is the likelier one
    TOY_CUBLAS_CHECK(destroyed);
    SG_CHECK(found > 0, "cuBLASLt found no fp32 algorithm for the toy step's GEMM");
    return result.algo;
  }

  void gemm_forward(int l, const float* h, float* y, cudaStream_t s) {
    const float alpha = 1.0f, beta = 0.0f;
    const float* w = f(weights_) + static_cast<size_t>(l) * cfg_.features * cfg_.features;
    TOY_CUBLAS_CHECK(cublasLtMatmul(handle_, fwd_desc_, &alpha, w, fwd_a_, h, fwd_b_, &beta, y, fwd_d_, y, fwd_d_,
                                    &fwd_algo_, arena_->raw(workspace_), kWorkspaceBytes, s));
    ++launches_;
  }

  void gemm_weight_grad(int l, const float* h, const float* dy, cudaStream_t s) {
    const float alpha = 1.0f, beta = 1.0f;  // accumulate over microbatches into the fp32 grad
    float* dw = f(grads_) + static_cast<size_t>(l) * cfg_.features * cfg_.features;
    TOY_CUBLAS_CHECK(cublasLtMatmul(handle_, bwd_desc_, &alpha, h, bwd_a_, dy, bwd_b_, &beta, dw, bwd_d_, dw,
                                    bwd_d_, &bwd_algo_, arena_->raw(workspace_), kWorkspaceBytes, s));
    ++launches_;
  }

  ToyConfig cfg_;
  cuda::RngTracker rng_;
  std::unique_ptr<cuda::Arena> arena_;
  cuda::MemorySlot weights_, grads_, inputs_, x_, y_, g_, dy_, saved_, rowsum_, partials_, norm_, lr_, step_, loss_,
      probe_, workspace_, rng_slot_;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t fwd_desc_ = nullptr, bwd_desc_ = nullptr;
  cublasLtMatrixLayout_t fwd_a_ = nullptr, fwd_b_ = nullptr, fwd_d_ = nullptr, bwd_a_ = nullptr, bwd_b_ = nullptr,
                         bwd_d_ = nullptr;
  std::vector<cublasLtMatrixLayout_t> layouts_;
  cublasLtMatmulAlgo_t fwd_algo_{}, bwd_algo_{};
  int launches_ = 0;
};

}  // namespace
}  // namespace sg::graph::toy
