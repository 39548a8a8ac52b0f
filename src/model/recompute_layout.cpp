#include "model/recompute_layout.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/bf16.h"
#include "model/recompute.h"

namespace sg::model {

struct RecomputeLayout::Group {
  cuda::MemoryPlan plan;
  cuda::MemoryLayout layout;
  std::vector<std::pair<int, graph::Module>> reruns;  // (layer, module) with a buffer here
};

namespace {
bool has(const std::vector<RecomputeModule>& list, RecomputeModule m) {
  return std::find(list.begin(), list.end(), m) != list.end();
}
}  // namespace

RecomputeLayout::RecomputeLayout(const ModelSpec& spec) {
  for (const RecomputeProblem& p : check_recompute(spec)) {
    SG_CHECK(false, p.message + ": " + p.fix);  // validation reports these first; a direct caller gets them here
  }
  const std::vector<LayerPlace> places = stack_places(spec);
  num_layers_ = static_cast<int>(places.size());
  const size_t n = places.size();
  group_index_.assign(n, -1);
  reruns_layer_.assign(n, false);
  selected_.assign(n, {});
  layer_bytes_.assign(n, 0);
  const RecomputeSpec& r = spec.recompute;
  if (r.granularity == RecomputeGranularity::selective) {
    for (size_t i = 0; i < n; ++i) {
      for (RecomputeModule module : r.modules) {
        const RecomputeModuleInfo& info = recompute_module_info(module);
        const bool own_kind = info.kind && *info.kind == places[i].kind;
        if (!info.step && !own_kind) continue;
        if (!has(selected_[i], module)) selected_[i].push_back(module);
        if (own_kind) reruns_layer_[i] = true;
      }
      if (!selected_[i].empty()) groups_.push_back({static_cast<int>(i), static_cast<int>(i) + 1, false, 0});
    }
  } else if (r.granularity == RecomputeGranularity::full && n > 0) {
    // Megatron's layers are the stack's Hugging Face layers (a GPT block is two stack layers).
    const int64_t megatron_layers = places.back().hf_layer + 1;
    const int64_t k = std::max<int64_t>(1, r.num_layers);
    std::vector<std::pair<int64_t, int64_t>> chunks;  // [first, last) Megatron layers
    if (r.method == RecomputeMethod::uniform) {
      for (int64_t a = 0; a < megatron_layers; a += k) chunks.push_back({a, std::min(a + k, megatron_layers)});
    } else {
      for (int64_t a = 0; a < std::min(k, megatron_layers); ++a) chunks.push_back({a, a + 1});
    }
    for (const auto& [first, last] : chunks) {
      RecomputeGroup g;
      g.begin = -1;
      for (size_t i = 0; i < n; ++i) {
        if (places[i].hf_layer < first || places[i].hf_layer >= last) continue;
        if (g.begin < 0) g.begin = static_cast<int>(i);
        g.end = static_cast<int>(i) + 1;
        reruns_layer_[i] = true;
      }
      g.full = true;
      g.buffer = static_cast<int>(groups_.size() % 2);
      groups_.push_back(g);
    }
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (int i = groups_[g].begin; i < groups_[g].end; ++i) group_index_[static_cast<size_t>(i)] = static_cast<int>(g);
    plans_.push_back(std::make_unique<Group>());
  }
}

RecomputeLayout::~RecomputeLayout() = default;

const RecomputeGroup* RecomputeLayout::group_of(int layer) const {
  if (layer < 0 || layer >= num_layers_) return nullptr;
  const int g = group_index_[static_cast<size_t>(layer)];
  return g < 0 ? nullptr : &groups_[static_cast<size_t>(g)];
}

const RecomputeGroup* RecomputeLayout::group_ending_at(int layer) const {
  const RecomputeGroup* g = group_of(layer);
  return g != nullptr && g->end == layer + 1 ? g : nullptr;
}

bool RecomputeLayout::full(int layer) const {
  const RecomputeGroup* g = group_of(layer);
  return g != nullptr && g->full;
}

bool RecomputeLayout::recomputes(int layer, std::optional<RecomputeModule> given_back_by) const {
  const RecomputeGroup* g = group_of(layer);
  if (g == nullptr) return false;
  return g->full || (given_back_by && has(selected_[static_cast<size_t>(layer)], *given_back_by));
}

bool RecomputeLayout::recomputes_norm(int boundary) const {
  return recomputes(boundary, RecomputeModule::layernorm);
}

bool RecomputeLayout::recomputes_residual(int boundary) const {
  const RecomputeGroup* g = group_of(boundary);
  return g != nullptr && g->full && boundary > g->begin;
}

bool RecomputeLayout::reruns_layer(int layer) const {
  return layer >= 0 && layer < num_layers_ && reruns_layer_[static_cast<size_t>(layer)];
}

cuda::MemorySlot RecomputeLayout::add(int layer, std::optional<graph::Module> module, const std::string& name,
                                      size_t bytes) {
  SG_CHECK(!planned_, strprintf("recompute buffer '%s' added after the recompute buffers were planned", name.c_str()));
  const RecomputeGroup* g = group_of(layer);
  SG_CHECK(g != nullptr, strprintf("recompute buffer '%s': layer %d recomputes nothing", name.c_str(), layer));
  Group& group = *plans_[static_cast<size_t>(g - groups_.data())];
  const cuda::MemorySlot slot = group.plan.add(name, cuda::MemoryCategory::activations, bytes);
  layer_bytes_[static_cast<size_t>(layer)] += bytes;
  if (module && std::find(group.reruns.begin(), group.reruns.end(), std::make_pair(layer, *module)) ==
                    group.reruns.end()) {
    group.reruns.push_back({layer, *module});
  }
  return slot;
}

bool RecomputeLayout::reruns(int layer, graph::Module module) const {
  const RecomputeGroup* g = group_of(layer);
  if (g == nullptr) return false;
  const Group& group = *plans_[static_cast<size_t>(g - groups_.data())];
  return std::find(group.reruns.begin(), group.reruns.end(), std::make_pair(layer, module)) != group.reruns.end();
}

void RecomputeLayout::plan(cuda::MemoryPlan& plan) {
  SG_CHECK(!planned_, "RecomputeLayout::plan called twice");
  planned_ = true;
  if (groups_.empty()) return;
  const bool any_full = std::any_of(groups_.begin(), groups_.end(), [](const RecomputeGroup& g) { return g.full; });
  std::vector<size_t> bytes(any_full ? 2 : 1, 0);
  for (size_t g = 0; g < groups_.size(); ++g) {
    plans_[g]->layout = plans_[g]->plan.layout();
    size_t& b = bytes[static_cast<size_t>(groups_[g].buffer)];
    b = std::max(b, plans_[g]->layout.total_bytes);
  }
  for (size_t b = 0; b < bytes.size(); ++b) {
    buffer_slots_.push_back(plan.add(strprintf("act.recompute.%zu", b), cuda::MemoryCategory::activations, bytes[b]));
  }
  buffer_ptrs_.assign(bytes.size(), nullptr);
}

size_t RecomputeLayout::buffer_bytes() const {
  SG_CHECK(planned_, "RecomputeLayout::buffer_bytes before plan");
  size_t sum = 0;
  std::vector<size_t> bytes(buffer_slots_.size(), 0);
  for (size_t g = 0; g < groups_.size(); ++g) {
    size_t& b = bytes[static_cast<size_t>(groups_[g].buffer)];
    b = std::max(b, plans_[g]->layout.total_bytes);
  }
  for (size_t b : bytes) sum += b;
  return sum;
}

size_t RecomputeLayout::layer_bytes(int layer) const { return layer_bytes_.at(static_cast<size_t>(layer)); }

void RecomputeLayout::bind(const cuda::Arena& arena) {
  SG_CHECK(planned_, "RecomputeLayout::bind before plan");
  for (size_t b = 0; b < buffer_slots_.size(); ++b) {
    buffer_ptrs_[b] = static_cast<unsigned char*>(arena.raw(buffer_slots_[b]));
  }
}

bool RecomputeLayout::owns(cuda::MemorySlot slot) const {
  return std::any_of(plans_.begin(), plans_.end(), [&](const auto& g) { return g->plan.id() == slot.plan_id; });
}

void* RecomputeLayout::get(cuda::MemorySlot slot) const {
  for (size_t g = 0; g < plans_.size(); ++g) {
    if (plans_[g]->plan.id() != slot.plan_id) continue;
    const unsigned char* base = buffer_ptrs_.at(static_cast<size_t>(groups_[g].buffer));
    SG_CHECK(base != nullptr, "a recompute buffer used before bind");
    const size_t offset = plans_[g]->layout.allocations.at(slot.index).offset;
    return const_cast<unsigned char*>(base) + offset;
  }
  SG_CHECK(false, "RecomputeLayout::get: a slot that is not in a recompute buffer");
  return nullptr;
}

BoundarySlots plan_boundaries(cuda::MemoryPlan& plan, RecomputeLayout& recompute, int64_t num_layers, int64_t tokens,
                              int64_t hidden) {
  using cuda::MemoryCategory;
  const size_t th = static_cast<size_t>(tokens * hidden) * sizeof(bf16);
  BoundarySlots out;
  for (int64_t k = 0; k <= num_layers; ++k) {
    const int b = static_cast<int>(k);
    const std::string resid = strprintf("act.resid%d", b), norm = strprintf("act.norm%d", b);
    out.resid.push_back(recompute.recomputes_residual(b) ? recompute.add(b, std::nullopt, resid, th)
                                                         : plan.add(resid, MemoryCategory::activations, th));
    out.norm.push_back(recompute.recomputes_norm(b) ? recompute.add(b, std::nullopt, norm, th)
                                                    : plan.add(norm, MemoryCategory::activations, th));
    out.rstd.push_back(
        plan.add_array<float>(strprintf("act.rstd%d", b), MemoryCategory::activations, static_cast<size_t>(tokens)));
  }
  return out;
}

}  // namespace sg::model
