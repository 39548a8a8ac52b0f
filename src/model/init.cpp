#include "model/init.h"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/philox.h"

namespace sg::model {

namespace {
// Counter word 3 for initialisation draws (kInitTag + 1 for the uniform ones). A dropout stream's word 3 is the
// low half of the generator offset and its key the same rng.seed, so the hidden dropout of the global microbatch
// at offset kInitTag (6679; 6680, and reference/mamba_init's 0x3a3b = 14907) draws the words that initialised the
// tensor whose index is its site: the tag keeps them apart from every other microbatch only. Left so: separating
// them would change either every model's initial weights or every run's dropout masks.
constexpr uint32_t kInitTag = 0x1a17u;
}  // namespace

float init_normal(uint64_t seed, uint32_t stream, uint64_t index) {
  const rng::Philox4x32Counter r = rng::philox4x32_10(
      rng::Philox4x32Counter{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream, kInitTag}},
      rng::Philox4x32Key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
  // Two 53-bit uniforms; u1 in (0, 1] so the log is finite.
  const uint64_t a = (static_cast<uint64_t>(r.v[0]) << 32 | r.v[1]) >> 11;
  const uint64_t b = (static_cast<uint64_t>(r.v[2]) << 32 | r.v[3]) >> 11;
  const double u1 = (static_cast<double>(a) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(b) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

float init_uniform(uint64_t seed, uint32_t stream, uint64_t index) {
  // Its own counter word 3, so a tensor's uniforms are independent of its normals.
  const rng::Philox4x32Counter r = rng::philox4x32_10(
      rng::Philox4x32Counter{
          {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), stream, kInitTag + 1}},
      rng::Philox4x32Key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
  // 24 random bits: every value is exactly representable and below 1.
  return static_cast<float>(r.v[0] >> 8) * 0x1.0p-24f;
}

void init_parameters(const ModelLayout& model, uint64_t seed, float* out, int threads) {
  const ModelSpec& spec = model.spec;
  std::fill(out, out + model.total(), 0.0f);  // alignment gaps
  // Megatron's output_layer_init_method: scaled_init_method_normal with multiplier 1 for a hybrid model, else 2.
  const double multiplier = spec.is_hybrid_model ? 1.0 : 2.0;
  const double output_scale = 1.0 / std::sqrt(multiplier * static_cast<double>(spec.num_layers));
  const auto& tensors = model.tensors();
  // Work items: (tensor, element range) chunks, spread over threads; each element's value depends only
  // on (seed, tensor index, element index).
  struct Chunk {
    size_t tensor;
    int64_t begin, end;
  };
  std::vector<Chunk> chunks;
  constexpr int64_t kChunk = 1 << 20;
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (int64_t b = 0; b < tensors[t].numel; b += kChunk) chunks.push_back({t, b, std::min(tensors[t].numel, b + kChunk)});
  }
  auto fill = [&](const Chunk& c) {
    const ParamTensor& t = tensors[c.tensor];
    const auto stream = static_cast<uint32_t>(c.tensor);
    float* dst = out + t.offset;
    switch (t.init) {
      case ParamInit::ones: std::fill(dst + c.begin, dst + c.end, 1.0f); return;
      case ParamInit::zeros: std::fill(dst + c.begin, dst + c.end, 0.0f); return;
      case ParamInit::custom: {
        const InitStreams streams{[&](uint64_t i) { return init_normal(seed, stream, i); },
                                  [&](uint64_t i) { return init_uniform(seed, stream, i); }, seed, stream};
        t.custom(t, dst, c.begin, c.end, streams);
        return;
      }
      case ParamInit::normal:
      case ParamInit::output_projection: break;
    }
    const double std_dev = spec.init_method_std * (t.init == ParamInit::output_projection ? output_scale : 1.0);
    for (int64_t i = c.begin; i < c.end; ++i) {
      dst[i] = static_cast<float>(std_dev * init_normal(seed, stream, static_cast<uint64_t>(i)));
    }
  };
  int n_threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(n_threads), chunks.size()));
  if (n_threads <= 1) {
    for (const auto& c : chunks) fill(c);
    return;
  }
  std::vector<std::thread> pool;
  for (int w = 0; w < n_threads; ++w) {
    pool.emplace_back([&, w] {
      for (size_t c = static_cast<size_t>(w); c < chunks.size(); c += static_cast<size_t>(n_threads)) fill(chunks[c]);
    });
  }
  for (auto& th : pool) th.join();
}

}  // namespace sg::model
