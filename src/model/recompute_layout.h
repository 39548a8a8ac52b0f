#pragma once
// Where recomputed activations live and when the step recomputes them (pure CPU until bind()).
//
// The layers that recompute anything form groups of consecutive layers, each recomputed as one piece at
// the start of the backward of its last layer (after that layer's output-norm backward, before its own
// backward), in forward order:
//   selective: one group per layer with something to recompute: the modules holding saved activations
//              tagged with a selected recompute module (model/layer.h), and with `layernorm` the layer's
//              pre-norm output n_i (recomputed from the residual stream x_i, which is kept);
//   full:      one group per chunk of Megatron layers (a GPT block is two stack layers): every saved
//              activation of its layers, the pre-norm outputs n_i inside it and the residual stream at
//              its inner boundaries; only its input x_begin is kept. Recomputing reruns every module and
//              the step's dropout + residual add + norm between the chunk's layers.
// What a group recomputes is planned in a sub-plan of its own, laid out from offset 0 inside a shared
// recompute buffer ("act.recompute.<r>") as large as the largest group. Full groups alternate between two
// buffers: in the forward, the step's fused add & norm at the end of a chunk reads the chunk's last inner
// residual and writes the next chunk's first pre-norm output, which must not overlap. Selective groups
// never read each other's buffers, so one buffer serves them all.
//
// The rstd of each pre-norm (T floats) is always kept; recomputing n_i rewrites it with the same bits.
// Recompute draws the same random numbers as the forward: the hidden-dropout masks are a function of
// (generator state, site) and the state advances only after the microbatch; the cuDNN attention seeds
// are written once per microbatch into device memory (model/dropout_sites.h).
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda/arena.h"
#include "graph/region.h"
#include "model/recompute_spec.h"
#include "model/spec.h"
#include "model/stack.h"

namespace sg::model {

struct RecomputeGroup {
  int begin = 0, end = 0;  // stack layers [begin, end)
  bool full = false;
  int buffer = 0;  // which act.recompute.<buffer>
};

class RecomputeLayout {
 public:
  // From spec.recompute and the stack; no groups when recompute is off. Selective modules apply to the
  // layers of the kind they belong to (model/recompute.h); validation has refused the rest.
  explicit RecomputeLayout(const ModelSpec& spec);
  ~RecomputeLayout();
  RecomputeLayout(const RecomputeLayout&) = delete;
  RecomputeLayout& operator=(const RecomputeLayout&) = delete;

  const std::vector<RecomputeGroup>& groups() const { return groups_; }
  // The group of layer i, or nullptr; the group whose last layer is i, or nullptr.
  const RecomputeGroup* group_of(int layer) const;
  const RecomputeGroup* group_ending_at(int layer) const;

  // Whether a saved activation of `layer` that `given_back_by` recomputes (nullopt: only full recompute
  // does) lives in the recompute buffer.
  bool recomputes(int layer, std::optional<RecomputeModule> given_back_by) const;
  bool full(int layer) const;  // its group is a full-recompute group
  // The step's boundary buffers: n_k (boundary k < num_layers, the input of layer k), x_k (inner
  // boundaries of a full group).
  bool recomputes_norm(int boundary) const;
  bool recomputes_residual(int boundary) const;
  // The CPU twin reruns a layer's whole forward when this is true (its group is full, or one of the
  // layer's kind's modules is selected).
  bool reruns_layer(int layer) const;

  // ---- planning (the step and activation accounting) ----
  // A buffer of layer `layer` (or boundary `layer`) in its group's sub-plan; `module` is what the step
  // reruns to get it back (nullopt: the step's boundary buffers). Named like the main plan's.
  cuda::MemorySlot add(int layer, std::optional<graph::Module> module, const std::string& name, size_t bytes);
  // Whether the step must rerun `module` of `layer` (it has a buffer in the recompute buffer).
  bool reruns(int layer, graph::Module module) const;
  // Adds act.recompute.<r> to `plan`; call once, after the last add().
  void plan(cuda::MemoryPlan& plan);
  size_t buffer_bytes() const;  // all recompute buffers together (after plan())
  size_t layer_bytes(int layer) const;  // what add() put in the buffer for `layer`

  // ---- binding ----
  void bind(const cuda::Arena& arena);
  bool owns(cuda::MemorySlot slot) const;
  void* get(cuda::MemorySlot slot) const;

 private:
  struct Group;
  int num_layers_ = 0;
  std::vector<RecomputeGroup> groups_;
  std::vector<int> group_index_;                 // [layer] -> group or -1
  std::vector<bool> reruns_layer_;               // [layer]
  std::vector<std::vector<RecomputeModule>> selected_;  // [layer] selective modules that apply to it
  std::vector<std::unique_ptr<Group>> plans_;    // [group]
  std::vector<size_t> layer_bytes_;              // [layer]
  std::vector<cuda::MemorySlot> buffer_slots_;   // [buffer]
  std::vector<unsigned char*> buffer_ptrs_;      // [buffer]
  bool planned_ = false;
};

// The residual stream, pre-norm outputs and rstd at the num_layers + 1 layer boundaries (the last is the
// final norm), planned as the step plans them: "act.resid<k>", "act.norm<k>", "act.rstd<k>", or in the
// recompute buffer where `recompute` says so.
struct BoundarySlots {
  std::vector<cuda::MemorySlot> resid, norm, rstd;
};
BoundarySlots plan_boundaries(cuda::MemoryPlan& plan, RecomputeLayout& recompute, int64_t num_layers, int64_t tokens,
                              int64_t hidden);

}  // namespace sg::model
