#include "model/cpu_decoder.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/strings.h"
#include "model/layer_registry.h"
#include "reference/decode_state.h"
#include "reference/embedding.h"
#include "reference/linear.h"
#include "reference/rmsnorm.h"

namespace sg::model {

namespace {
size_t sz(int64_t n) {
  return static_cast<size_t>(n);
}
}  // namespace

double CpuDecoder::state_bytes(const ModelSpec& model, const DecodeSpec& decode) {
  return decode_state_bytes(model, decode);
}

CpuDecoder::CpuDecoder(const ModelSpec& model, std::vector<float> weights, const DecodeSpec& decode)
    : model_(model), layers_(make_cpu_decode_layers(model)), decode_(decode), weights_(std::move(weights)) {
  layout_ = declare_model(model, [this](size_t i, LayerDeclarations& d) { layers_[i]->declare(d); });
  SG_CHECK(static_cast<int64_t>(weights_.size()) == layout_.total(),
           strprintf("CpuDecoder: %zu weights for a model whose flat buffer has %lld", weights_.size(),
                     static_cast<long long>(layout_.total())));
  check_decode_request(model, decode, std::vector<std::vector<int32_t>>(sz(decode.batch), std::vector<int32_t>{0}));
  for (auto& layer : layers_) layer->plan(model, decode);
  const int64_t rows = decode.max_rows();
  logits_.assign(sz(decode.batch * model.vocab_size), 0.0f);
  tokens_.assign(sz(decode.batch), 0);
  positions_.assign(sz(decode.batch), 0);
  history_.assign(sz(decode.batch * decode.max_new_tokens), 0);
  for (auto* v : {&x_, &n_, &delta_}) v->resize(sz(rows * model.hidden_size));
  rstd_.resize(sz(rows));
}

std::string CpuDecoder::description() const {
  return strprintf("CPU fp32 reference decoder: %lld sequence(s) of up to %lld positions, %s",
                   static_cast<long long>(decode_.batch), static_cast<long long>(decode_.capacity()),
                   describe_stack(model_).c_str());
}

void CpuDecoder::forward(const int32_t* tokens, const int32_t* positions, int64_t T, int64_t rows_per_slot,
                         int64_t first_slot, int64_t out_rows, int64_t first_out) {
  const int64_t H = model_.hidden_size, V = model_.vocab_size;
  const float eps = static_cast<float>(model_.layernorm_epsilon);
  const float* W = weights_.data();
  const auto norm_weight = [&](int64_t boundary) { return W + layout_.offset(layout_.norm_before(boundary)); };
  // As the training step: each residual add is fused with the norm that follows it, the last one with
  // model.norm, so n_ always holds the next norm's output.
  ref::embedding_forward(x_.data(), tokens, W + layout_.offset(layout_.embedding), T, H);
  ref::rmsnorm_forward(n_.data(), rstd_.data(), x_.data(), norm_weight(0), T, H, eps);
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->forward(
        {.layout = layout_,
         .weights = W,
         .input = n_.data(),
         .output = delta_.data(),
         .rows = {.T = T, .rows_per_slot = rows_per_slot, .first_slot = first_slot, .positions = positions}});
    ref::residual_rmsnorm_forward(x_.data(), n_.data(), rstd_.data(), x_.data(), delta_.data(),
                                  norm_weight(static_cast<int64_t>(i) + 1), T, H, eps);
  }
  ref::linear_forward(logits_.data() + first_out * V, n_.data() + (T - out_rows) * H,
                      W + layout_.offset(layout_.lm_head), out_rows, H, V);
}

void CpuDecoder::sample_and_advance() {
  const int64_t B = decode_.batch;
  ref::sample_tokens(tokens_.data(), logits_.data(), B, decode_.sampled_vocab(model_.vocab_size), model_.vocab_size,
                     decode_.sampling, static_cast<uint64_t>(step_));
  ref::decode_advance(history_.data(), decode_.max_new_tokens, tokens_.data(), positions_.data(), &step_, B);
}

void CpuDecoder::start(const std::vector<std::vector<int32_t>>& prompts) {
  check_decode_request(model_, decode_, prompts);
  for (auto& layer : layers_) layer->reset();
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
