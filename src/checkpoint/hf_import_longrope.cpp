// config.json's LongRoPE (rope_type "longrope"; Phi-3.5-mini's and Phi-4-mini's RoPE), read as transformers reads it
// (modeling_rope_utils' longrope parameters): two per-pair factor lists, the context length that picks between them and
// the attention factor on cos and sin.
#include <cmath>
#include <string>
#include <vector>

#include "checkpoint/hf_config_reader.h"
#include "reference/rope_frequencies.h"

namespace sg::checkpoint {

namespace detail {

namespace {

// One factor list: rotated_dims / 2 positive finite numbers, kept as fp32 like transformers' tensor of them.
std::vector<float> read_factors(const ConfigReader& c, const nlohmann::json& scaling, const std::string& object_key,
                                const char* name, int64_t pairs) {
  const std::string key = object_key + "." + name;
  if (!scaling.contains(name)) c.fail(key, "is missing (longrope needs it)");
  const nlohmann::json& list = scaling[name];
  if (!list.is_array() || static_cast<int64_t>(list.size()) != pairs) {
    c.fail(key, strprintf("= %s: expected a list of %lld numbers, one per pair of the %lld dimensions RoPE rotates",
                          list.is_array() ? strprintf("a list of %zu", list.size()).c_str() : list.dump().c_str(),
                          static_cast<long long>(pairs), static_cast<long long>(2 * pairs)));
  }
  std::vector<float> out;
  for (size_t i = 0; i < list.size(); ++i) {
    const nlohmann::json& v = list[i];
    const float f = v.is_number() ? static_cast<float>(v.get<double>()) : 0.0f;
    if (!v.is_number() || !(f > 0.0f) || !std::isfinite(f)) {
      c.fail(strprintf("%s[%zu]", key.c_str(), i),
             strprintf("= %s: each factor must be a positive finite number", v.dump().c_str()));
    }
    out.push_back(f);
  }
  return out;
}

}  // namespace

model::LongRope read_longrope(const ConfigReader& c, const nlohmann::json& scaling, const std::string& key,
                              int64_t rotated_dims, int64_t max_position_embeddings, bool phi3) {
  const int64_t pairs = rotated_dims / 2;
  if (pairs > ref::kMaxLongRopePairs) {
    c.fail(key, strprintf("is longrope with %lld rotated pairs: stepgraph's RoPE kernels take LongRoPE factors for at "
                          "most %d pairs (%d rotated dimensions)",
                          static_cast<long long>(pairs), ref::kMaxLongRopePairs, 2 * ref::kMaxLongRopePairs));
  }
  model::LongRope r;
  r.short_factor = read_factors(c, scaling, key, "short_factor", pairs);
  r.long_factor = read_factors(c, scaling, key, "long_factor", pairs);
  // Phi3Config always has the attribute (default 4096), and transformers lets it override the object's value.
  if (phi3) {
    r.original_max_position_embeddings = c.integer("original_max_position_embeddings", 4096);
  } else if (scaling.contains("original_max_position_embeddings") &&
             !scaling["original_max_position_embeddings"].is_null()) {
    const nlohmann::json& v = scaling["original_max_position_embeddings"];
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      c.fail(key + ".original_max_position_embeddings", "= " + v.dump() + ": expected a positive integer");
    }
    r.original_max_position_embeddings = v.get<int64_t>();
  } else {
    r.original_max_position_embeddings = max_position_embeddings;
  }
  const double original = static_cast<double>(r.original_max_position_embeddings);
  const double factor =
      c.number(scaling, "factor", static_cast<double>(max_position_embeddings) / original);  // for the default below
  if (scaling.contains("attention_factor") && !scaling["attention_factor"].is_null()) {
    r.attention_factor = c.number(scaling, "attention_factor", std::nullopt);
    if (!(r.attention_factor > 0.0) || !std::isfinite(r.attention_factor)) {
      c.fail(key + ".attention_factor", strprintf("= %g: must be positive and finite", r.attention_factor));
    }
  } else if (factor > 1.0) {
    // LongRoPE's (and transformers') default: keeps the attention's entropy as the context grows by `factor`.
    r.attention_factor = std::sqrt(1.0 + std::log(factor) / std::log(original));
    if (!std::isfinite(r.attention_factor)) {
      c.fail(key, strprintf("gives no finite attention factor: sqrt(1 + ln(factor %g) / ln(original_max_position_"
                            "embeddings %g)); set attention_factor",
                            factor, original));
    }
  }
  return r;
}

}  // namespace detail

}  // namespace sg::checkpoint
