#include "model/layer_context.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"

namespace sg::model {

// ---- SharedBuffers ----

SharedBufferRef SharedBuffers::request(const std::string& name, cuda::MemoryCategory category, size_t bytes) {
  SG_CHECK(!planned_, strprintf("shared buffer '%s' requested after the memory plan was made", name.c_str()));
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (e.name != name) continue;
    SG_CHECK(e.category == category,
             strprintf("shared buffer '%s' requested as %s and as %s", name.c_str(),
                       cuda::memory_category_name(e.category), cuda::memory_category_name(category)));
    e.bytes = std::max(e.bytes, bytes);
    return SharedBufferRef{static_cast<int32_t>(i)};
  }
  entries_.push_back(Entry{name, category, bytes, {}, nullptr});
  return SharedBufferRef{static_cast<int32_t>(entries_.size() - 1)};
}

void SharedBuffers::plan(cuda::MemoryPlan& plan) {
  SG_CHECK(!planned_, "SharedBuffers::plan called twice");
  planned_ = true;
  for (Entry& e : entries_) e.slot = plan.add(e.name, e.category, e.bytes);
}

void SharedBuffers::bind(const cuda::Arena& arena) {
  SG_CHECK(planned_, "SharedBuffers::bind before plan");
  for (Entry& e : entries_) e.ptr = arena.raw(e.slot);
}

void* SharedBuffers::get(SharedBufferRef ref) const {
  SG_CHECK(ref.index >= 0 && static_cast<size_t>(ref.index) < entries_.size(),
           "SharedBuffers::get: a reference from another step (or none)");
  const Entry& e = entries_[static_cast<size_t>(ref.index)];
  SG_CHECK(e.ptr != nullptr, strprintf("shared buffer '%s' used before bind", e.name.c_str()));
  return e.ptr;
}

// ---- LayerPlanContext ----

LayerPlanContext::LayerPlanContext(const ModelSpec& model, const BatchSpec& batch, cuda::MemoryPlan& plan,
                                   SharedBuffers& shared, RecomputeLayout* recompute)
    : model_(model),
      batch_(batch),
      tokens_(batch.tokens_per_microbatch(model)),
      plan_(plan),
      shared_(shared),
      recompute_(recompute) {}

cuda::MemorySlot LayerPlanContext::state(const std::string& name, size_t bytes) {
  return plan_.add(strprintf("state.layer%d.%s", layer_, name.c_str()), cuda::MemoryCategory::optimizer_state, bytes);
}

cuda::MemorySlot LayerPlanContext::saved(graph::Module module, const std::string& name, size_t bytes,
                                         std::optional<RecomputeModule> given_back_by) {
  const std::string full_name = strprintf("act.layer%d.%s", layer_, name.c_str());
  const bool recomputed = recompute_ != nullptr && recompute_->recomputes(layer_, given_back_by);
  const cuda::MemorySlot slot = recomputed ? recompute_->add(layer_, module, full_name, bytes)
                                           : plan_.add(full_name, cuda::MemoryCategory::activations, bytes);
  // Layers plan one after the other: the entry, if any, is near the end.
  auto it = std::find_if(saved_bytes_.rbegin(), saved_bytes_.rend(), [&](const SavedActivationBytes& s) {
    return s.layer == layer_ && s.module == module;
  });
  if (it == saved_bytes_.rend()) {
    saved_bytes_.push_back({layer_, module, bytes, recomputed ? bytes : 0});
  } else {
    it->bytes += bytes;
    if (recomputed) it->recomputed += bytes;
  }
  return slot;
}

SharedBufferRef LayerPlanContext::scratch(const std::string& name, size_t bytes) {
  return shared_.request(name, cuda::MemoryCategory::activations, bytes);
}

SharedBufferRef LayerPlanContext::shared_state(const std::string& name, size_t bytes) {
  return shared_.request("state." + name, cuda::MemoryCategory::optimizer_state, bytes);
}

int64_t LayerPlanContext::step_counts(int64_t count) {
  SG_CHECK(count > 0, strprintf("layer %d asked for %lld step counts", layer_, static_cast<long long>(count)));
  const int64_t offset = step_counts_;
  step_counts_ += count;
  return offset;
}

int LayerPlanContext::attention_dropout_slot(uint32_t site) {
  attention_sites_.push_back(site);
  return static_cast<int>(attention_sites_.size() - 1);
}

// ---- DevicePlanContext ----

DevicePlanContext::DevicePlanContext(const ModelSpec& model, const BatchSpec& batch, SharedBuffers& buffers,
                                     SharedObjects& objects, kernels::CudnnContext& cudnn,
                                     kernels::FloatDtype grad_dtype)
    : model_(model),
      batch_(batch),
      tokens_(batch.tokens_per_microbatch(model)),
      buffers_(buffers),
      objects_(objects),
      cudnn_(cudnn),
      grad_dtype_(grad_dtype) {}

SharedBufferRef DevicePlanContext::workspace(const std::string& name, size_t bytes) {
  return buffers_.request(name, cuda::MemoryCategory::workspaces, bytes);
}

// ---- LayerBindContext ----

LayerBindContext::LayerBindContext(const ModelLayout& layout, const cuda::Arena& arena, const SharedBuffers& buffers,
                                   SharedObjects& objects, kernels::Blas& blas, const StepPointers& pointers,
                                   const RecomputeLayout* recompute)
    : layout_(layout),
      arena_(arena),
      buffers_(buffers),
      objects_(objects),
      blas_(blas),
      pointers_(pointers),
      recompute_(recompute) {}

float* LayerBindContext::main_weight(ParamRef ref) const {
  SG_CHECK(layout_.params.is_fp32_block(ref),
           "LayerBindContext::main_weight: the block was not declared with ParamBuilder::fp32_vector (the step keeps "
           "a replica of those blocks only when the distributed optimizer shards the master weights)");
  if (pointers_.main_weights != nullptr) return pointers_.main_weights + layout_.offset(ref);
  SG_CHECK(pointers_.fp32_replica != nullptr,
           "LayerBindContext::main_weight: the step bound neither the master weights nor their fp32 replica");
  return pointers_.fp32_replica + layout_.params.fp32_packed_offset(ref);
}

int32_t* LayerBindContext::step_counts(int64_t offset) const {
  SG_CHECK(pointers_.step_counts != nullptr, "LayerBindContext::step_counts: the step planned no step counts");
  return pointers_.step_counts + offset;
}

}  // namespace sg::model
