#include "model/cpu_decoder.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/strings.h"
#include "model/layer_registry.h"
#include "reference/decode_attention.h"
#include "reference/decode_state.h"
#include "reference/embedding.h"
#include "reference/linear.h"
#include "reference/rmsnorm.h"
#include "reference/rope.h"
#include "reference/swiglu.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}
}  // namespace

double CpuDecoder::kv_cache_bytes(const ModelSpec& model, const DecodeSpec& decode) {
  return 2.0 * static_cast<double>(model.num_layers) * static_cast<double>(decode.batch) *
         static_cast<double>(model.num_query_groups) * static_cast<double>(decode.capacity()) *
         static_cast<double>(model.head_dim()) * sizeof(float);
}

CpuDecoder::CpuDecoder(const ModelSpec& model, std::vector<float> weights, const DecodeSpec& decode)
    : model_(model),
      layout_(model_layout(model)),
      offsets_(decoder_offsets(model, layout_)),
      decode_(decode),
      weights_(std::move(weights)) {
  SG_CHECK(static_cast<int64_t>(weights_.size()) == layout_.total(),
           strprintf("CpuDecoder: %zu weights for a model whose flat buffer has %lld", weights_.size(),
                     static_cast<long long>(layout_.total())));
  check_decode_request(model, decode, std::vector<std::vector<int32_t>>(sz(decode.batch), std::vector<int32_t>{0}));
  const int64_t rows = std::max(decode.max_prompt_tokens, decode.batch);
  const int64_t H = model.hidden_size, F = model.ffn_hidden_size;
  const int64_t cache = decode.batch * model.num_query_groups * decode.capacity() * model.head_dim();
  k_cache_.assign(sz(model.num_layers), std::vector<float>(sz(cache)));
  v_cache_.assign(sz(model.num_layers), std::vector<float>(sz(cache)));
  logits_.assign(sz(decode.batch * model.vocab_size), 0.0f);
  tokens_.assign(sz(decode.batch), 0);
  positions_.assign(sz(decode.batch), 0);
  history_.assign(sz(decode.batch * decode.max_new_tokens), 0);
  for (auto* v : {&x_, &n_, &attn_, &delta_, &h_}) v->resize(sz(rows * H));
  rstd_.resize(sz(rows));
  qkv_.resize(sz(rows * model.qkv_dim()));
  gate_up_.resize(sz(rows * 2 * F));
  act_.resize(sz(rows * F));
}

std::string CpuDecoder::description() const {
  return strprintf("CPU fp32 reference decoder: %lld sequence(s), KV cache of %lld positions each",
                   static_cast<long long>(decode_.batch), static_cast<long long>(decode_.capacity()));
}

void CpuDecoder::forward(const int32_t* tokens, const int32_t* positions, int64_t T, int64_t rows_per_slot,
                         int64_t first_slot, int64_t out_rows, int64_t first_out) {
  const ModelSpec& m = model_;
  const int64_t H = m.hidden_size, F = m.ffn_hidden_size, QKV = m.qkv_dim(), V = m.vocab_size;
  const float eps = static_cast<float>(m.layernorm_epsilon);
  const float* W = weights_.data();
  const ref::DecodeAttentionShape shape{.T = T,
                                        .rows_per_slot = rows_per_slot,
                                        .first_slot = first_slot,
                                        .slots = decode_.batch,
                                        .capacity = decode_.capacity(),
                                        .heads = m.num_attention_heads,
                                        .kv_heads = m.num_query_groups,
                                        .head_dim = m.head_dim()};

  // As the training step: each residual add is fused with the norm that follows it, the last one with
  // model.norm, so n_ always holds the next norm's output.
  ref::embedding_forward(x_.data(), tokens, W + offsets_.embedding, T, H);
  ref::rmsnorm_forward(n_.data(), rstd_.data(), x_.data(), W + offsets_.layers[0].input_norm, T, H, eps);
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const DecoderLayerOffsets& o = offsets_.layers[sz(l)];
    ref::linear_forward(qkv_.data(), n_.data(), W + o.qkv, T, H, QKV);
    // q and k heads are contiguous in a QKV row: one rotation covers both.
    ref::rope_forward(qkv_.data(), T, 1, m.num_attention_heads + m.num_query_groups, m.head_dim(), QKV, m.rotary_base,
                      m.rope_scaling, positions);
    ref::kv_cache_append(k_cache_[sz(l)].data(), v_cache_[sz(l)].data(), qkv_.data(), positions, shape);
    ref::decode_attention_forward(attn_.data(), qkv_.data(), k_cache_[sz(l)].data(), v_cache_[sz(l)].data(), positions,
                                  shape);
    ref::linear_forward(delta_.data(), attn_.data(), W + o.o_proj, T, H, H);
    ref::residual_rmsnorm_forward(h_.data(), n_.data(), rstd_.data(), x_.data(), delta_.data(), W + o.post_norm, T, H,
                                  eps);
    ref::linear_forward(gate_up_.data(), n_.data(), W + o.gate_up, T, H, 2 * F);
    ref::swiglu_forward(act_.data(), gate_up_.data(), T, F);
    ref::linear_forward(delta_.data(), act_.data(), W + o.down_proj, T, F, H);
    const int64_t next_norm = l + 1 < m.num_layers ? offsets_.layers[sz(l + 1)].input_norm : offsets_.final_norm;
    ref::residual_rmsnorm_forward(x_.data(), n_.data(), rstd_.data(), h_.data(), delta_.data(), W + next_norm, T, H,
                                  eps);
  }
  ref::linear_forward(logits_.data() + first_out * V, n_.data() + (T - out_rows) * H, W + offsets_.lm_head, out_rows, H,
                      V);
}

void CpuDecoder::sample_and_advance() {
  const int64_t B = decode_.batch;
  ref::sample_tokens(tokens_.data(), logits_.data(), B, decode_.sampled_vocab(model_.vocab_size), model_.vocab_size,
                     decode_.sampling, static_cast<uint64_t>(step_));
  ref::decode_advance(history_.data(), decode_.max_new_tokens, tokens_.data(), positions_.data(), &step_, B);
}

void CpuDecoder::start(const std::vector<std::vector<int32_t>>& prompts) {
  check_decode_request(model_, decode_, prompts);
  for (auto& c : k_cache_) std::fill(c.begin(), c.end(), 0.0f);
  for (auto& c : v_cache_) std::fill(c.begin(), c.end(), 0.0f);
  std::vector<int32_t> positions;
  for (int64_t b = 0; b < decode_.batch; ++b) {
    const auto& prompt = prompts[sz(b)];
    const auto P = static_cast<int64_t>(prompt.size());
    positions.resize(sz(P));
    std::iota(positions.begin(), positions.end(), 0);
    forward(prompt.data(), positions.data(), P, P, b, 1, b);
    positions_[sz(b)] = static_cast<int32_t>(P - 1);  // the advance moves it to P: the first new token's place
  }
  step_ = 0;
  sample_and_advance();
}

void CpuDecoder::decode(int64_t steps) {
  SG_CHECK(step_ > 0, "CpuDecoder::decode before start()");
  SG_CHECK(steps >= 0 && step_ + steps <= decode_.max_new_tokens,
           strprintf("decode: %lld more steps after %lld exceed max_new_tokens = %lld", static_cast<long long>(steps),
                     static_cast<long long>(step_), static_cast<long long>(decode_.max_new_tokens)));
  for (int64_t i = 0; i < steps; ++i) {
    forward(tokens_.data(), positions_.data(), decode_.batch, 1, 0, decode_.batch, 0);
    sample_and_advance();
  }
}

std::vector<std::vector<int32_t>> CpuDecoder::generated() {
  std::vector<std::vector<int32_t>> out(sz(decode_.batch));
  for (int64_t b = 0; b < decode_.batch; ++b) {
    const int32_t* row = history_.data() + b * decode_.max_new_tokens;
    out[sz(b)].assign(row, row + std::min(step_, decode_.max_new_tokens));
  }
  return out;
}

}  // namespace sg::model
