#include "model/param_layout.h"

#include "core/error.h"
#include "core/strings.h"

namespace sg::model {

namespace {

int64_t align_up(int64_t n) { return (n + kParamAlignment - 1) / kParamAlignment * kParamAlignment; }

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += "]";
  return out;
}

}  // namespace

void validate_dense_llama(const ModelSpec& s) {
  auto positive = [](const char* key, int64_t v) {
    SG_CHECK(v > 0, strprintf("model.%s = %lld: must be positive", key, static_cast<long long>(v)));
  };
  positive("vocab_size", s.vocab_size);
  positive("num_layers", s.num_layers);
  positive("hidden_size", s.hidden_size);
  positive("ffn_hidden_size", s.ffn_hidden_size);
  positive("num_attention_heads", s.num_attention_heads);
  positive("num_query_groups", s.num_query_groups);
  positive("seq_length", s.seq_length);
  SG_CHECK(s.hidden_size % s.num_attention_heads == 0,
           strprintf("model.hidden_size = %lld is not a multiple of model.num_attention_heads = %lld: pick "
                     "heads that divide the hidden size",
                     static_cast<long long>(s.hidden_size), static_cast<long long>(s.num_attention_heads)));
  SG_CHECK(s.num_attention_heads % s.num_query_groups == 0,
           strprintf("model.num_attention_heads = %lld is not a multiple of model.num_query_groups = %lld: "
                     "grouped-query attention needs whole groups",
                     static_cast<long long>(s.num_attention_heads), static_cast<long long>(s.num_query_groups)));
  SG_CHECK(s.head_dim() % 2 == 0,
           strprintf("head_dim = hidden_size / num_attention_heads = %lld is odd: rotate-half RoPE needs an "
                     "even head_dim",
                     static_cast<long long>(s.head_dim())));
  SG_CHECK(s.num_moe_experts == 0,
           strprintf("model.num_moe_experts = %lld: the dense Llama step has no MoE layers; set it to 0",
                     static_cast<long long>(s.num_moe_experts)));
  SG_CHECK(s.init_method_std > 0.0, "model.init_method_std must be positive");
  SG_CHECK(s.layernorm_epsilon > 0.0, "model.layernorm_epsilon must be positive");
  SG_CHECK(s.attention_dropout >= 0.0f && s.attention_dropout < 1.0f,
           strprintf("model.attention_dropout = %g: must be in [0, 1)", static_cast<double>(s.attention_dropout)));
  SG_CHECK(s.hidden_dropout >= 0.0f && s.hidden_dropout < 1.0f,
           strprintf("model.hidden_dropout = %g: must be in [0, 1)", static_cast<double>(s.hidden_dropout)));
}

ParamLayout::ParamLayout(const ModelSpec& spec) : spec_(spec) {
  validate_dense_llama(spec);
  const int64_t V = spec.vocab_size, H = spec.hidden_size, F = spec.ffn_hidden_size, L = spec.num_layers;
  const int64_t KV = spec.kv_dim();
  int64_t cursor = 0;
  auto take = [&](int64_t n) {
    const int64_t at = cursor;
    cursor = align_up(cursor + n);
    return at;
  };
  layers_.resize(static_cast<size_t>(L));
  // Matrices (weight decay).
  embedding_ = take(V * H);
  for (auto& l : layers_) {
    l.qkv = take(spec.qkv_dim() * H);
    l.o_proj = take(H * H);
    l.gate_up = take(2 * F * H);
    l.down_proj = take(H * F);
  }
  lm_head_ = tied() ? embedding_ : take(V * H);
  num_decay_ = cursor;
  // Norm weights (no decay).
  for (auto& l : layers_) {
    l.input_norm = take(H);
    l.post_norm = take(H);
  }
  final_norm_ = take(H);
  total_ = cursor;

  auto add = [&](std::string name, std::vector<int64_t> shape, int64_t offset, bool output_projection) {
    ParamTensor t;
    t.name = std::move(name);
    t.numel = 1;
    for (int64_t d : shape) t.numel *= d;
    t.shape = std::move(shape);
    t.offset = offset;
    t.weight_decay = t.shape.size() == 2;
    t.is_output_projection = output_projection;
    tensors_.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", {V, H}, embedding_, false);
  for (int64_t i = 0; i < L; ++i) {
    const auto& l = layers_[static_cast<size_t>(i)];
    const std::string p = strprintf("model.layers.%lld.", static_cast<long long>(i));
    add(p + "self_attn.q_proj.weight", {H, H}, l.qkv, false);
    add(p + "self_attn.k_proj.weight", {KV, H}, l.qkv + H * H, false);
    add(p + "self_attn.v_proj.weight", {KV, H}, l.qkv + (H + KV) * H, false);
    add(p + "self_attn.o_proj.weight", {H, H}, l.o_proj, true);
    add(p + "mlp.gate_proj.weight", {F, H}, l.gate_up, false);
    add(p + "mlp.up_proj.weight", {F, H}, l.gate_up + F * H, false);
    add(p + "mlp.down_proj.weight", {H, F}, l.down_proj, true);
    add(p + "input_layernorm.weight", {H}, l.input_norm, false);
    add(p + "post_attention_layernorm.weight", {H}, l.post_norm, false);
  }
  add("model.norm.weight", {H}, final_norm_, false);
  if (!tied()) add("lm_head.weight", {V, H}, lm_head_, false);
}

int64_t ParamLayout::num_parameters() const {
  int64_t n = 0;
  for (const auto& t : tensors_) n += t.numel;
  return n;
}

const ParamTensor& ParamLayout::find(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& t : tensors_) {
    if (t.name == name) return t;
    names.push_back(t.name);
  }
  const std::string near = closest_match(name, names);
  throw Error(strprintf("no parameter tensor named '%s' in this model%s", name.c_str(),
                        near.empty() ? "" : (" (did you mean '" + near + "'?)").c_str()));
}

std::string ParamLayout::describe() const {
  std::string out;
  for (const auto& t : tensors_) {
    out += strprintf("%-52s %-14s offset %lld%s\n", t.name.c_str(), shape_string(t.shape).c_str(),
                     static_cast<long long>(t.offset), t.weight_decay ? "" : " (no decay)");
  }
  out += strprintf("flat buffer: %lld elements (%lld parameters), weight decay on [0, %lld)\n",
                   static_cast<long long>(total_), static_cast<long long>(num_parameters()),
                   static_cast<long long>(num_decay_));
  return out;
}

}  // namespace sg::model
