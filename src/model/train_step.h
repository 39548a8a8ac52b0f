#pragma once
// The GPU training step, written once as launches on one stream, so it runs eagerly, captured whole
// (cuda_graph_impl local) or with per-(layer, module, phase) regions graphed (transformer_engine) — and
// every execution touches the same addresses and reads the same device scalars.
//
// The model is a stack of layers (model/stack.h, model/layer.h); the step owns what lies between and
// around them: the embedding, the residual stream and every pre-norm (fused with the residual add at
// each layer boundary), the LM head and loss, gradient norm and clipping, the lr schedule and AdamW.
//
// Plan time (the constructor): EVERY buffer is declared in one cuda::MemoryPlan and backed by one Arena:
//   parameters      bf16 compute weights (flat, model/param_builder.h offsets)
//   main_weights    fp32 master weights (with the distributed optimizer this rank's shard, and every rank's
//                   replica of the blocks the forward reads in fp32: kernels/fp32_replica.h)
//   gradients       fp32 main_grad, accumulated over microbatches
//   optimizer_state Adam moments, StepScalars, RNG generator states, cuDNN dropout seeds/offsets
//   activations     ONE microbatch's saved activations (the residual stream, each layer's own) +
//                   scratch shared by all layers: the microbatches run forward+backward one after the
//                   other and reuse them
//   workspaces      cuBLASLt (32 MiB), cuDNN attention, chunked LM head, rmsnorm/embedding/grad-norm scratch
//   inputs          tokens, targets, loss_mask of the WHOLE global batch (microbatch m at rows m T ..)
// and every GEMM and attention plan is made. After that nothing is allocated or planned.
//
// Step time: enqueue_step() enqueues the complete step: zero the gradients no first writer overwrites
// (model/gradient_zeroing.h) and the step's loss and flags; for each microbatch: [attention dropout seeds], embedding, layer 0's pre-norm, per layer its
// module forward regions, the chunked LM head + cross-entropy (adds loss/M into the device loss), per
// layer in reverse its module backward regions, layer 0's pre-norm backward, embedding backward, RNG
// advance (but after the last microbatch); then the grad norm's partial sums, and one launch for the
// optimizer's per-step scalars (grad norm + clip coefficient + grad NaN flag, loss NaN flag, lr from the
// device step counter, AdamW's constants, step counter + 1, the last microbatch's RNG advance:
// kernels/optimizer_step_scalars.h), AdamW (writes the bf16 weights). No
// host sync, no allocation, no host-side per-step scalar.
//
// Region boundaries (each region reads and writes only static buffers, so it can be replayed for every
// microbatch and every step). With x_i the residual stream entering layer i and n_i = norm_i(x_i):
//   forward, layer i (its last module's region ends with):
//       delta_i = layer(n_i); x_{i+1} = x_i + drop(delta_i), n_{i+1} = norm_{i+1}(x_{i+1})   (fused)
//   where norm_{i+1} is layer i+1's pre-norm, or the final norm after the last layer. So the final norm
//   lives in the last layer's region and only layer 0's pre-norm runs outside a region.
//   backward, layer i (its last module's region starts with):
//       d x_{i+1} = norm_{i+1}'(d n_{i+1}) + d x_{i+2};  d delta_i = drop'(d x_{i+1})
//   and its first module's region ends with d n_i. The pair (d n, d residual) travels between regions
//   in shared buffers: d_norm_, and d_resid_[k % 2] holding d x_k.
// For GPT blocks (attention then MLP) this is exactly the structure of the dense Llama step.
//
// Activation recompute (model/recompute_layout.h): what the settings give back lives in shared recompute
// buffers, and each recompute group reruns at the start of its last layer's backward region, right after
// the step's side of that boundary — inside the same region, so graphs capture it too.
//
// Dropout: hidden_dropout on every layer's output (before the residual add) with our Philox from the
// "default" generator (the same masks as the CPU model); attention_dropout inside cuDNN attention with
// per-layer seeds derived from the "model-parallel-rng" generator (as Megatron forks it for attention).
// Sites: model/dropout_sites.h. Every generator's offset advances by kRngOffsetPerMicrobatch after each
// microbatch, on the device.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/philox.h"
#include "cuda/arena.h"
#include "cuda/rng_tracker.h"
#include "dist/gradient_reducer.h"
#include "graph/region.h"
#include "graph/scope_plan.h"
#include "kernels/adamw.h"
#include "kernels/fp32_replica.h"
#include "kernels/gemm.h"
#include "kernels/lm_head.h"
#include "model/batch.h"
#include "model/dropout_sites.h"
#include "model/flat_view.h"
#include "model/layer.h"
#include "model/layer_context.h"
#include "model/recompute_layout.h"
#include "model/spec.h"
#include "model/stack.h"
#include "model/weight_fingerprints.h"

namespace sg::model {

// The step's device-resident scalars, one struct in device memory so the trainer can copy them all with
// one cudaMemcpyAsync after the step. loss and both flags are zeroed at the start of every step, so after
// the step they describe that step only.
struct StepScalars {
  int64_t steps_done = 0;      // optimizer steps done (the lr schedule's step; AdamW's t - 1)
  float lr = 0.0f;             // lr of the last update
  float grad_norm = 0.0f;      // global L2 norm of the last step's gradients (before clipping)
  float clip_coef = 1.0f;      // gradient scale applied by the last update
  // AdamW's constants for the last update, derived from lr and steps_done within the step (not state:
  // never saved or loaded; kernels/optimizer_step_scalars.h writes them, adamw_step reads them).
  kernels::AdamWStepConstants adamw_constants;
  // The last step's auxiliary losses (MoE layers; coefficients applied): per layer the mean over
  // microbatches, summed over the layers. Not part of `loss`; their gradients are in the step's.
  float aux_loss = 0.0f;       // load balancing (moe_aux_loss_coeff)
  float z_loss = 0.0f;         // router z-loss (moe_z_loss_coeff)
  float loss = 0.0f;           // the last step's loss: mean over microbatches of the masked mean CE
  int32_t loss_nonfinite = 0;  // 1: the step loss was NaN/inf (rerun_state_machine.check_for_nan_in_loss)
  int32_t grad_nonfinite = 0;  // 1: the grad norm was NaN/inf (ddp.check_for_nan_in_grad)
  // enqueue_eval's result: the evaluated batch's token loss sum and loss-token count over every rank's rows (the
  // evaluation divides the totals of all its batches, as Bridge's evaluate())
  double eval_loss_sums[2] = {0.0, 0.0};
};

struct TrainStepOptions {
  // Bytes of one LM-head chunk's bf16 logits + bf16 dlogits (kernels/lm_head.h).
  size_t lm_head_chunk_budget_bytes = kernels::lm_head_chunk_budget_bytes();
  // Data parallelism (dist/gradient_reducer.h; must outlive the step): the flat buffers follow its
  // layout (padded, and with the distributed optimizer the fp32 state holds this rank's shard only),
  // and the step calls its collectives. nullptr: one process, the whole batch here.
  dist::GradientReducer* reducer = nullptr;
  // Without a reducer: the data parallelism a memory plan is for (TrainStep::plan_memory from the config, as
  // validate and bench --dryrun print it): the buffers sized as one rank of `planned_world_size` would have
  // them (its shard of the fp32 state under the distributed optimizer). A step built without a reducer
  // trains in one process: both must stay at their defaults there.
  int planned_world_size = 1;
  bool planned_distributed_optimizer = false;
  // true: zero the whole gradient buffer at each step's start and let every writer add, as before
  // first writers (model/gradient_zeroing.h). Only the reference of the GPU test that checks them.
  bool zero_all_gradients = false;
  // Elements load_state converts and uploads at a time (its host buffers' size); tests set a small one to cross
  // chunk edges inside tensors, gaps and shards.
  int64_t upload_chunk_elements = kUploadChunkElements;
  // validation.test_mode with data parallelism: plan the buffer of enqueue_weight_fingerprints.
  bool weight_fingerprints = false;
};

class TrainStep {
 public:
  // Plans all memory and every GEMM/attention plan on the current device; the arena starts zeroed
  // (upload the initial weights with upload_parameters). `seed` is rng.seed: the RNG tracker's
  // "default" generator gets it (hidden dropout), "model-parallel-rng" seed + 2718 (attention dropout).
  // Throws sg::Error for a layer kind that is not implemented (model/layer_registry.h).
  TrainStep(const ModelSpec& model, const BatchSpec& batch, const OptimizerSpec& optimizer, uint64_t seed,
            const TrainStepOptions& options = {});
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  const ModelLayout& layout() const { return layout_; }
  const ModelSpec& model_spec() const { return layout_.spec; }
  const BatchSpec& batch_spec() const { return batch_; }
  int64_t tokens_per_microbatch() const { return T_; }
  int64_t tokens_per_step() const { return T_ * batch_.num_microbatches; }

  // ---- the step ----
  // Enqueues one complete training step on `stream` (see the file comment). Region bodies go through
  // `regions`; everything else is launched directly. The batch must already be in the input buffers.
  void enqueue_step(cudaStream_t stream, graph::RegionRunner& regions);
  // Forward-only evaluation of the batch in the input buffers (Megatron's model.eval() + forward):
  // every microbatch's forward — the layers' forward modules with their dropout off, no hidden
  // dropout — then the LM head's loss only (no backward GEMMs); the token loss sum and token count of the
  // microbatches land in StepScalars::eval_loss_sums (zeroed first). It writes only activations, LM-head workspace
  // and eval_loss_sums — no parameter, gradient, optimizer state, RNG state or other step scalar — so training
  // gives the same bits with and without evaluation. Region keys are the forward ones of enqueue_step,
  // but the bodies differ when dropout is on: run it with its own runner (eager, or inside its own
  // whole capture), never the training step's scoped runner.
  void enqueue_eval(cudaStream_t stream, graph::RegionRunner& regions);
  const double* eval_loss_sums() const { return scalars_device()->eval_loss_sums; }

  // Every buffer the step plans, declared on the CPU without a device (`stepgraph validate`,
  // `bench --dryrun`, `train` at start): the same declarations as the constructor's, except the
  // workspaces only the device can size (the layers' device plans, e.g. cuDNN attention, and the
  // embedding backward's CUB sort scratch), which are absent or 0 bytes here.
  static cuda::MemoryPlan plan_memory(const ModelSpec& model, const BatchSpec& batch,
                                      const TrainStepOptions& options = {}, const OptimizerSpec& optimizer = {});

  // The data-parallel layout of the flat buffers (world size 1 and everything owned without a reducer).
  const dist::DataParallelLayout& data_parallel() const { return dp_; }

  // ---- setup and inspection (synchronous on `stream`; never inside a step) ----
  // With the distributed optimizer, the fp32 state downloads gather every rank's shard: every rank must
  // call them together. Uploads always take the full state; each rank keeps its shard.
  // fp32 weights (layout().total() floats) into the main weights and their bf16 copy; zeroes the Adam
  // moments and the step counter.
  void upload_parameters(cudaStream_t stream, const FlatView& weights);
  // A checkpointed state: weights, moments (FlatView::zeros: a fresh optimizer), steps done and the "default"
  // generator's RngState (the other generators keep their seeds and take the same offset). Reads the views in chunks
  // of kUploadChunkElements through two host buffers (model/flat_view.h), so the host holds no copy of the state.
  void load_state(cudaStream_t stream, const FlatView& weights, const FlatView& exp_avg, const FlatView& exp_avg_sq,
                  int64_t steps_done, rng::RngState rng);
  std::vector<float> download_main_weights(cudaStream_t stream) const;
  std::vector<float> download_compute_weights(cudaStream_t stream) const;  // the bf16 copy, widened
  std::vector<float> download_grads(cudaStream_t stream) const;  // as fp32 (widened where they are stored in bf16)
  std::vector<float> download_exp_avg(cudaStream_t stream) const;
  std::vector<float> download_exp_avg_sq(cudaStream_t stream) const;
  // The collectives of download_main_weights, download_exp_avg and download_exp_avg_sq, in that order, without their
  // copies to the host: a data-parallel rank that does not write the checkpoint joins the gathers of the one that
  // does. Nothing without the distributed optimizer (nothing is gathered).
  void join_state_gather(cudaStream_t stream) const;
  StepScalars download_scalars(cudaStream_t stream) const;
  // validation.test_mode (TrainStepOptions::weight_fingerprints): the fingerprints of this rank's weights
  // (model/weight_fingerprints.h says which), enqueued on `stream` after a step, outside its graph, and copied into
  // `host` (pinned, weight_fingerprints().count() values). Ranks holding the same weights get the same values.
  const WeightFingerprintLayout& weight_fingerprints() const { return fingerprints_; }
  void enqueue_weight_fingerprints(cudaStream_t stream, uint64_t* host) const;
  rng::RngState download_rng_state(cudaStream_t stream);  // the "default" generator
  // Copies a host batch into the input buffers (tests, tools; the trainer copies asynchronously into
  // tokens()/targets()/loss_mask() from pinned memory instead).
  void upload_batch(cudaStream_t stream, const HostBatch& batch);

  // ---- device pointers ----
  int32_t* tokens() const;     // [tokens_per_step()]
  int32_t* targets() const;    // [tokens_per_step()]
  float* loss_mask() const;    // [tokens_per_step()]
  // [data_parallel().padded_params] main gradients (OptimizerSpec::main_grad_dtype); between steps only (tests
  // poison them to check that every step zeroes or overwrites all of them: model/gradient_zeroing.h).
  kernels::FloatBuffer gradients() const { return grads_; }
  const StepScalars* scalars() const;  // device
  const float* loss() const { return &scalars_device()->loss; }
  const float* grad_norm() const { return &scalars_device()->grad_norm; }
  const float* lr() const { return &scalars_device()->lr; }
  const int32_t* loss_nonfinite() const { return &scalars_device()->loss_nonfinite; }
  const int32_t* grad_nonfinite() const { return &scalars_device()->grad_nonfinite; }
  const int64_t* step_counter() const { return &scalars_device()->steps_done; }
  // The layers, for per-kind inspection (e.g. the MoE layers' token counts, model/layers/moe_layer.h).
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  cuda::RngTracker& rng_tracker() { return rng_; }

  // The regions the step marks, per layer of the stack in step order (for graph::plan_graph_scopes).
  std::vector<graph::LayerRegions> layer_regions() const;
  // Saved activation bytes per (layer, module) of one microbatch (and what recompute gives back).
  const std::vector<SavedActivationBytes>& saved_activations() const { return saved_activations_; }
  const RecomputeLayout& recompute_layout() const { return *recompute_; }
  const cuda::Arena& arena() const { return *arena_; }
  std::string memory_breakdown() const { return arena_->breakdown(); }

 private:
  // What planning yields besides the MemoryPlan (the layers' accounting).
  struct LayerPlans {
    std::vector<SavedActivationBytes> saved_activations;
    std::vector<uint32_t> attention_dropout_sites;  // per cuDNN seed slot
    int64_t step_counts = 0;                        // the layers' int32 step counts (LayerPlanContext)
    BoundarySlots boundaries;                       // the residual stream and pre-norms (recompute_layout.h)
  };
  // Declares every buffer into `plan`: the step's own and its layers' (Layer::plan), then `device`
  // (may be null: no device) runs the layers' device plans, then the shared and recompute buffers are planned.
  // `embedding_scratch_bytes` is the CUB sort scratch (0 without a device).
  static LayerPlans declare_memory(cuda::MemoryPlan& plan, const ModelLayout& layout, const BatchSpec& batch,
                                   const TrainStepOptions& options, const OptimizerSpec& optimizer,
                                   std::vector<std::unique_ptr<Layer>>& layers,
                                   SharedBuffers& shared, RecomputeLayout& recompute, DevicePlanContext* device,
                                   size_t embedding_scratch_bytes);
  void plan_memory(const TrainStepOptions& options);  // plans every buffer, makes the arena, binds
  void microbatch(cudaStream_t stream, graph::RegionRunner& regions, int64_t mb);
  // A microbatch's forward up to the final norm (n_N); `train` false: dropout off (evaluation).
  void forward(cudaStream_t stream, graph::RegionRunner& regions, int64_t mb, bool train);
  // The step's side of layer i's regions: the fused dropout + residual add + next norm after its
  // forward (no dropout when `train` is false), and the next norm's backward + dropout backward before
  // its backward.
  void layer_output_forward(cudaStream_t stream, size_t i, bool train);
  void layer_output_backward(cudaStream_t stream, size_t i);
  // Activation recompute of one group (model/recompute_layout.h), at the start of its last layer's
  // backward: the pre-norm outputs it gave back, each layer's rerun modules, and for a full group the
  // step's dropout + residual add + norm between its layers.
  void recompute_group(cudaStream_t stream, const RecomputeGroup& group);
  void norm_backward(cudaStream_t stream, bf16* din, int64_t norm_index, const bf16* in, const float* rstd,
                     const bf16* dresidual);
  StepScalars* scalars_device() const;
  void download_floats(cudaStream_t stream, const float* src, std::vector<float>& out) const;
  // layout().total() values of a buffer of either dtype, widened to fp32.
  std::vector<float> download_widened(cudaStream_t stream, const kernels::FloatBuffer& src) const;
  // Data parallelism (train_step_data_parallel.cpp).
  // The reducer's layout, or world size 1 with everything owned when there is none.
  static dist::DataParallelLayout data_parallel_layout(const TrainStepOptions& options, int64_t num_params);
  // Elements of the replica of the fp32 weights the forward reads (kernels/fp32_replica.h): the packed
  // fp32_vector() blocks with the distributed optimizer, else 0 (the layers read the flat master weights).
  static int64_t fp32_replica_count(const dist::DataParallelLayout& dp, const ModelLayout& layout);
  // The replica's elements of flat [begin, end) from host `values` (load_state's chunks).
  void upload_fp32_replica_part(cudaStream_t stream, const float* values, int64_t begin, int64_t end);
  // Sharded only, in the step: the owned replica elements into the master shard (before AdamW), and the
  // replica refilled from the shard (after it; the reducer's gather_weights makes it whole).
  void fp32_replica_to_shard(cudaStream_t stream);
  void fp32_replica_from_shard(cudaStream_t stream);
  kernels::Fp32ReplicaParams fp32_replica_params() const;
  void bind_reducer();
  // The whole fp32 state buffer `moment` (main weights or a moment, fp32 or bf16) as fp32: gathered from every rank
  // with the distributed optimizer (a collective), else this rank's whole buffer.
  std::vector<float> download_moment(cudaStream_t stream, const kernels::FloatBuffer& moment) const;
  // The distributed optimizer's gather of every rank's shard of `moment` (fp32 or bf16) into the gradient buffer,
  // and into *out as fp32 (layout().total() values) unless out is null (join_state_gather).
  void gather_state(cudaStream_t stream, const kernels::FloatBuffer& moment, std::vector<float>* out) const;
  uint64_t rank_rng_offset() const;          // where this rank's microbatches start in the global stream
  uint64_t other_ranks_rng_offset() const;   // skipped at the end of each step: the other ranks' microbatches
  void check_setup_allowed(const char* what) const;

  std::vector<std::unique_ptr<Layer>> layers_;
  ModelLayout layout_;
  dist::GradientReducer* reducer_ = nullptr;
  dist::DataParallelLayout dp_;
  // What enqueue_step zeroes of grads_ (model/gradient_zeroing.h), and whether the first microbatch's
  // first writers overwrite (false with TrainStepOptions::zero_all_gradients: one range, everything).
  std::vector<dist::FlatRange> grad_zero_ranges_;
  bool first_writers_overwrite_ = true;
  int64_t upload_chunk_ = kUploadChunkElements;  // TrainStepOptions::upload_chunk_elements
  BatchSpec batch_;
  OptimizerSpec optimizer_;
  int64_t T_ = 0;

  std::unique_ptr<kernels::CudnnContext> cudnn_;
  kernels::LmHeadLayout lm_head_layout_;
  size_t embedding_scratch_bytes_ = 0, rmsnorm_scratch_bytes_ = 0;
  cuda::RngTracker rng_;
  std::unique_ptr<RecomputeLayout> recompute_;
  SharedBuffers shared_buffers_;
  SharedObjects shared_objects_;
  std::vector<SavedActivationBytes> saved_activations_;
  std::vector<uint32_t> attention_dropout_sites_;  // per cuDNN seed slot

  std::unique_ptr<cuda::Arena> arena_;
  std::unique_ptr<kernels::Blas> blas_;
  std::unique_ptr<kernels::LmHeadPlan> lm_head_;

  // Bound pointers (arena addresses; fixed for the life of the step).
  bf16* params_ = nullptr;
  float* main_weights_ = nullptr;
  kernels::FloatBuffer grads_;    // fp32 or bf16 (OptimizerSpec::main_grad_dtype)
  kernels::FloatBuffer exp_avg_;  // fp32 or bf16 (OptimizerSpec::exp_avg_dtype)
  kernels::FloatBuffer exp_avg_sq_;
  StepScalars* scalars_ = nullptr;
  uint32_t* dropout_sites_ = nullptr;  // [slots] the attention layers' sites (written once)
  int64_t* dropout_seeds_ = nullptr;   // [slots]
  int64_t* dropout_offsets_ = nullptr;
  WeightFingerprintLayout fingerprints_;    // count() 0 unless TrainStepOptions::weight_fingerprints
  uint64_t* fingerprint_values_ = nullptr;  // [fingerprints_.count()]
  int32_t* step_counts_ = nullptr;          // [step_counts_count_] the layers' step counts (summed over ranks)
  int64_t step_counts_count_ = 0;
  float* fp32_replica_ = nullptr;            // [fp32_replica_count_] (kernels/fp32_replica.h), sharded only
  int64_t* fp32_replica_offsets_ = nullptr;  // [fp32_replica_count_] their flat offsets (-1: a gap)
  int64_t fp32_replica_count_ = 0;
  std::vector<bf16*> resid_;     // [N+1] x_i; x_N enters the final norm
  std::vector<bf16*> norm_;      // [N+1] n_i; n_N = final norm output (the LM head input)
  std::vector<float*> rstd_;     // [N+1]
  std::vector<LayerIO> io_;      // [N] what each layer reads and writes
  std::vector<LayerIO> eval_io_;  // [N] the same with the layers' dropout off (enqueue_eval)
  bf16* delta_ = nullptr;        // [T, H] every layer's output, dropped in place
  bf16* d_resid_[2] = {};        // [T, H] d x_k in d_resid_[k % 2]
  bf16* d_delta_ = nullptr;      // [T, H] dropout backward output
  bf16* d_norm_ = nullptr;       // [T, H] d n_i
  const rng::RngState* hidden_rng_ = nullptr;     // "default" generator (hidden dropout)
  const rng::RngState* attention_rng_ = nullptr;  // "model-parallel-rng" (cuDNN attention dropout seeds)
  void* lm_head_workspace_ = nullptr;
  float* rmsnorm_scratch_ = nullptr;     // [N+1] partial-sum matrices, one per norm_before(i)
  int64_t* norm_grad_offsets_ = nullptr;  // [N+1] flat offsets of norm_before(i) (written once)
  void* embedding_scratch_ = nullptr;
  double* grad_norm_partials_ = nullptr;
  int32_t* tokens_ = nullptr;
  int32_t* targets_ = nullptr;
  float* loss_mask_ = nullptr;
};

}  // namespace sg::model
