// safetensors round trip, the header layout checked by an independent parser, refusal of files
// whose tensors differ from what is expected, corrupt-file errors, config.json and the train state.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/hf_config.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/train_state.h"
#include "checkpoint_test_util.h"
#include "core/error.h"
#include "model/stack.h"

namespace sg::checkpoint {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}

void write_all(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void expect_error_contains(const std::function<void()>& fn,
                           const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an sg::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles)
      EXPECT_NE(msg.find(n), std::string::npos) << "missing \"" << n << "\" in:\n" << msg;
  }
}

// Every supported dtype, a scalar and an empty tensor.
struct MixedTensors {
  std::vector<float> f32{1.5f, -2.25f, 3.0f, 0.0f, 1e-30f, -7.0f};
  std::vector<uint16_t> bf16{0x3f80, 0xc000, 0x7f80, 0x0001};
  std::vector<int32_t> i32{-1, 2, INT32_MAX};
  std::vector<int64_t> i64{INT64_MIN, 5};
  float scalar = 42.0f;
  std::vector<TensorRef> refs() const {
    return {{"w.f32", TensorDtype::F32, {2, 3}, f32.data()},
            {"w.bf16", TensorDtype::BF16, {4}, bf16.data()},
            {"step.i32", TensorDtype::I32, {3, 1}, i32.data()},
            {"pos.i64", TensorDtype::I64, {2}, i64.data()},
            {"scalar", TensorDtype::F32, {}, &scalar},
            {"empty", TensorDtype::F32, {0, 5}, nullptr}};
  }
};

TEST(Safetensors, RoundTripEveryDtype) {
  test::ScratchDir dir("st_roundtrip");
  const std::string path = dir.str() + "/t.safetensors";
  MixedTensors in;
  write_safetensors(path, in.refs(), {{"note", "hello"}});

  SafetensorsFile file(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "hello");
  ASSERT_EQ(file.tensors().size(), 6u);
  for (const TensorRef& r : in.refs()) {
    const auto* e = file.find(r.name);
    ASSERT_NE(e, nullptr) << r.name;
    EXPECT_EQ(e->dtype, r.dtype);
    EXPECT_EQ(e->shape, r.shape);
    ASSERT_EQ(e->nbytes, static_cast<uint64_t>(num_elements(r.shape)) * dtype_size(r.dtype));
    if (e->nbytes > 0) {
      EXPECT_EQ(std::memcmp(e->data, r.data, e->nbytes), 0) << r.name;
    }
  }

  MixedTensors out;
  std::fill(out.f32.begin(), out.f32.end(), -1.0f);
  std::fill(out.bf16.begin(), out.bf16.end(), 0);
  std::fill(out.i32.begin(), out.i32.end(), 0);
  std::fill(out.i64.begin(), out.i64.end(), 0);
  out.scalar = 0.0f;
  std::vector<TensorDest> dests;
  for (const TensorRef& r : out.refs())
    dests.push_back({r.name, r.dtype, r.shape, const_cast<void*>(r.data)});
  file.load_into(dests);
  EXPECT_EQ(out.f32, in.f32);
  EXPECT_EQ(out.bf16, in.bf16);
  EXPECT_EQ(out.i32, in.i32);
  EXPECT_EQ(out.i64, in.i64);
  EXPECT_EQ(out.scalar, 42.0f);
}

TEST(Safetensors, LayoutMatchesTheSpec) {
  // Parsed here by hand: 8-byte little-endian length, JSON header, data in header-offset order.
  test::ScratchDir dir("st_layout");
  const std::string path = dir.str() + "/t.safetensors";
  MixedTensors in;
  write_safetensors(path, in.refs());
  const auto bytes = read_all(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  EXPECT_EQ((8 + n) % 8, 0u) << "tensor data starts 8-byte aligned";
  ASSERT_LE(8 + n, bytes.size());
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  EXPECT_EQ(header.front(), '{');
  const auto j = nlohmann::json::parse(header);
  EXPECT_EQ(j["__metadata__"]["format"], "pt");
  uint64_t total = 0;
  for (const TensorRef& r : in.refs()) {
    const auto& e = j.at(r.name);
    EXPECT_EQ(e["dtype"], dtype_name(r.dtype));
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), r.shape);
    const uint64_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    EXPECT_EQ(begin, total) << r.name << ": tensors are contiguous in order";
    total = end;
    const uint64_t nbytes = end - begin;
    if (nbytes > 0) {
      EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + begin, r.data, nbytes), 0) << r.name;
    }
  }
  EXPECT_EQ(8 + n + total, bytes.size());
}

TEST(Safetensors, RefusesDifferentNamesShapesAndDtypes) {
  test::ScratchDir dir("st_mismatch");
  const std::string path = dir.str() + "/model.safetensors";
  const auto spec = test::tiny_llama_spec();
  const auto saved = test::tiny_llama_tensors(spec);
  write_safetensors(path, saved.refs());

  // What a model with other shapes expects: ffn 96 instead of 64, no lm_head, an extra tensor,
  // and one tensor expected in BF16.
  auto other = spec;
  other.ffn_hidden_size = 96;
  other.share_embeddings_and_output_weights = true;
  auto expected = test::tiny_llama_tensors(other);
  expected.names.push_back("model.extra.weight");
  expected.shapes.push_back({3});
  expected.bytes.push_back(std::vector<uint8_t>(12));
  expected.fill(0xAB);
  auto dests = expected.dests();
  dests[1].dtype = TensorDtype::BF16;  // model.layers.0.input_layernorm.weight

  SafetensorsFile file(path);
  expect_error_contains(
      [&] { file.load_into(dests); },
      {path, "does not match the model config", "9 tensors differ",
       "different  model.layers.0.mlp.gate_proj.weight: checkpoint F32 [64, 32], expected F32 [96, "
       "32]",
       "different  model.layers.1.mlp.down_proj.weight: checkpoint F32 [32, 64], expected F32 [32, "
       "96]",
       "different  model.layers.0.input_layernorm.weight: checkpoint F32 [32], expected BF16 [32]",
       "missing    model.extra.weight: expected F32 [3]",
       "unexpected lm_head.weight: checkpoint F32 [256, 32]"});
  for (const auto& b : expected.bytes)
    for (const uint8_t v : b) ASSERT_EQ(v, 0xAB) << "a refused load writes nothing";

  // The matching expectation loads and reproduces the bytes.
  auto same = test::tiny_llama_tensors(spec);
  same.fill(0);
  file.load_into(same.dests());
  EXPECT_EQ(same.bytes, saved.bytes);
}

TEST(Safetensors, CorruptFilesAreClearErrors) {
  test::ScratchDir dir("st_corrupt");
  const std::string good = dir.str() + "/good.safetensors";
  MixedTensors in;
  write_safetensors(good, in.refs());
  const auto bytes = read_all(good);
  const std::string bad = dir.str() + "/bad.safetensors";
  auto open_bad = [&] { SafetensorsFile f(bad); };

  expect_error_contains([&] { SafetensorsFile f(dir.str() + "/none.safetensors"); },
                        {"none.safetensors", "cannot open"});

  write_all(bad, {1, 2, 3});
  expect_error_contains(open_bad, {bad, "truncated"});

  auto truncated = bytes;
  truncated.resize(truncated.size() - 4);  // data cut
  write_all(bad, truncated);
  expect_error_contains(open_bad, {bad, "truncated"});

  auto huge_len = bytes;
  huge_len[6] = 0x7f;  // header length far beyond the file
  write_all(bad, huge_len);
  expect_error_contains(open_bad, {bad, "header length"});

  // Rewrite the header (same length, spaces as padding) to inject errors.
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  auto with_header = [&](std::string h) {
    ASSERT_LE(h.size(), n);
    h.append(n - h.size(), ' ');
    auto b = bytes;
    std::memcpy(b.data() + 8, h.data(), n);
    write_all(bad, b);
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string h = header;
    const size_t at = h.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    h.replace(at, from.size(), to);
    return h;
  };
  with_header(replace("{", "["));
  expect_error_contains(open_bad, {bad, "not valid JSON"});
  with_header(replace("\"BF16\"", "\"F64\" "));  // a dtype stepgraph does not read (F16 it widens)
  expect_error_contains(open_bad, {bad, "w.bf16 (F64)", "cannot read", "F32, BF16 or F16"});
  with_header(replace("[4]", "[5]"));
  expect_error_contains(open_bad, {bad, "w.bf16", "needs 10 bytes"});
  auto j = nlohmann::json::parse(header);
  j["w.f32"]["data_offsets"] = {4, 28};  // shifted by 4: overlaps its neighbour, leaves a gap
  j["w.bf16"]["data_offsets"] = {28, 36};
  with_header(j.dump());
  expect_error_contains(open_bad, {bad, "overlap or leave a gap"});
}

// Found by tests/fuzz/safetensors_fuzz.cpp: nlohmann::json::parse throws out_of_range, not parse_error, for a
// number past double's range, and it escaped the reader as a foreign exception.
TEST(Safetensors, AHeaderNumberPastDoubleIsAClearError) {
  test::ScratchDir dir("st_number_overflow");
  const std::string path = dir.str() + "/big.safetensors";
  const std::string header = R"({"w": {"dtype": "F32", "shape": [1e999], "data_offsets": [0, 4]}})";
  std::vector<uint8_t> bytes(8);
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + 4);
  write_all(path, bytes);
  expect_error_contains([&] { SafetensorsFile f(path); }, {path, "not valid JSON", "number overflow", "1e999"});
}

// Found with tests/fuzz/safetensors_fuzz.cpp's harness: a zero dimension made the byte count 0, so [2^62, 2^62, 0]
// passed the offsets check, and num_elements (finite_check, the loaders) then overflowed int64 multiplying 2^62 by
// 2^62 (undefined behaviour); a dimension past 2^63 - 1 was read as a negative one.
TEST(Safetensors, ShapesWhoseDimensionsOverflowInt64AreRefused) {
  test::ScratchDir dir("st_shape_overflow");
  const std::string path = dir.str() + "/shape.safetensors";
  const auto write_header = [&](const std::string& shape) {
    const std::string header = R"({"w": {"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": [0, 0]}})";
    std::vector<uint8_t> bytes(8);
    const uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    bytes.insert(bytes.end(), header.begin(), header.end());
    write_all(path, bytes);
  };
  write_header("[4611686018427387904, 4611686018427387904, 0]");
  expect_error_contains([&] { SafetensorsFile f(path); },
                        {path, "tensor w has a bad shape [4611686018427387904,4611686018427387904,0]",
                         "its dimensions multiply past 2^63 - 1"});
  write_header("[0, 18446744073709551615]");
  expect_error_contains([&] { SafetensorsFile f(path); },
                        {path, "tensor w has a bad shape [0,18446744073709551615]", "from 0 to 2^63 - 1"});
  write_header("[0, 9223372036854775807]");  // empty, and its dimensions fit: read
  EXPECT_EQ(SafetensorsFile(path).tensors().at(0).shape, (std::vector<int64_t>{0, INT64_MAX}));
}

TEST(HfConfig, LlamaConfigFields) {
  auto spec = test::tiny_llama_spec(true);
  spec.rotary_base = 500000.0;
  spec.layernorm_epsilon = 1e-6;
  const auto c = hf_llama_config(spec, "bfloat16");
  EXPECT_EQ(c["architectures"], nlohmann::json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(c["model_type"], "llama");
  EXPECT_EQ(c["hidden_size"], 32);
  EXPECT_EQ(c["intermediate_size"], 64);
  EXPECT_EQ(c["num_hidden_layers"], 2);
  EXPECT_EQ(c["num_attention_heads"], 4);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["head_dim"], 8);
  EXPECT_EQ(c["vocab_size"], 256);
  EXPECT_EQ(c["max_position_embeddings"], 64);
  EXPECT_EQ(c["rms_norm_eps"], 1e-6);
  EXPECT_EQ(c["rope_theta"], 500000.0);
  EXPECT_EQ(c["tie_word_embeddings"], true);
  EXPECT_EQ(c["torch_dtype"], "bfloat16");
  EXPECT_EQ(c["hidden_act"], "silu");
  EXPECT_EQ(c["attention_bias"], false);
  EXPECT_EQ(c["mlp_bias"], false);
  auto moe = spec;
  moe.num_moe_experts = 4;
  EXPECT_THROW(hf_llama_config(moe), Error);
  EXPECT_THROW(hf_llama_config(spec, "float16"), Error);
  // model.kv_channels: heads that do not divide hidden_size, described by head_dim (transformers reads it).
  auto wide_heads = spec;
  wide_heads.hidden_size = 24;
  wide_heads.num_attention_heads = 5;
  wide_heads.num_query_groups = 5;
  wide_heads.kv_channels = 8;
  const auto w = hf_llama_config(wide_heads, "bfloat16");
  EXPECT_EQ(w["head_dim"], 8);
  EXPECT_EQ(w["num_attention_heads"], 5);
  wide_heads.num_query_groups = 2;  // groups that do not divide the heads describe no attention
  expect_error_contains([&] { hf_llama_config(wide_heads, "bfloat16"); }, {"the groups must divide the heads"});
}

// model.qk_layernorm makes a Qwen3 (Llama's keys, plus full attention in every layer), with experts a Qwen3-MoE.
TEST(HfConfig, Qwen2ConfigFields) {
  auto spec = test::tiny_llama_spec(false);
  spec.add_qkv_bias = true;
  EXPECT_EQ(model::hf_architecture(spec), "Qwen2ForCausalLM");
  const auto c = hf_model_config(spec, "bfloat16");
  EXPECT_EQ(c["architectures"], nlohmann::json::array({"Qwen2ForCausalLM"}));
  EXPECT_EQ(c["model_type"], "qwen2");
  EXPECT_EQ(c["head_dim"], 8);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["use_sliding_window"], false);
  EXPECT_EQ(c["max_window_layers"], 2);
  EXPECT_FALSE(c.contains("attention_bias"));  // Qwen2's q, k and v always have one; o_proj never
  EXPECT_FALSE(c.contains("mlp_bias"));
  expect_error_contains([&] { hf_llama_config(spec, "bfloat16"); }, {"not a Llama model"});
  auto llama = spec;
  llama.add_qkv_bias = false;
  expect_error_contains([&] { hf_qwen2_config(llama, "bfloat16"); }, {"not a Qwen2 model (model.add_qkv_bias=false)"});
  // No transformers class has the bias with the query and key norms, or with Mixtral's experts: no config.json.
  auto with_norms = spec;
  with_norms.qk_layernorm = true;
  std::string why;
  EXPECT_EQ(model::hf_architecture(with_norms, &why), "");
  EXPECT_NE(why.find("model.add_qkv_bias=true"), std::string::npos) << why;
  EXPECT_TRUE(hf_model_config(with_norms, "bfloat16").is_null());
  auto moe = spec;
  moe.num_moe_experts = 4;
  moe.moe_ffn_hidden_size = 16;
  EXPECT_EQ(model::hf_architecture(moe, &why), "");
  EXPECT_NE(why.find("model.add_qkv_bias=false"), std::string::npos) << why;
}

// model.add_bias_linear: Llama's attention_bias and mlp_bias (with or without add_qkv_bias, which it implies). No
// transformers class has them with the query and key norms or with experts, and NemotronH's attention has no biases.
TEST(HfConfig, LlamaBiasFields) {
  auto spec = test::tiny_llama_spec(false);
  EXPECT_EQ(hf_llama_config(spec, "bfloat16")["attention_bias"], false);
  spec.add_bias_linear = true;
  for (const bool qkv : {false, true}) {
    spec.add_qkv_bias = qkv;
    EXPECT_EQ(model::hf_architecture(spec), "LlamaForCausalLM");
    const auto c = hf_model_config(spec, "bfloat16");
    EXPECT_EQ(c["model_type"], "llama");
    EXPECT_EQ(c["attention_bias"], true);
    EXPECT_EQ(c["mlp_bias"], true);
  }
  std::string why;
  auto with_norms = spec;
  with_norms.qk_layernorm = true;
  EXPECT_EQ(model::hf_architecture(with_norms, &why), "");
  EXPECT_NE(why.find("model.add_bias_linear=true"), std::string::npos) << why;
  auto hybrid = test::tiny_llama_spec(false);
  hybrid.hybrid_layer_pattern = "M*-";
  hybrid.num_layers = 3;
  hybrid.position_embedding = model::PositionEmbedding::none;
  hybrid.mlp_activation = model::MlpActivation::squared_relu;
  hybrid.add_bias_linear = true;
  EXPECT_EQ(model::hf_architecture(hybrid, &why), "");
  EXPECT_NE(why.find("NemotronHForCausalLM's attention has no biases"), std::string::npos) << why;
  EXPECT_TRUE(hf_model_config(hybrid, "bfloat16").is_null());
  // Megatron's expert biases: Mixtral's experts have none, so no config.json (the reason names the key).
  auto experts = spec;
  experts.qk_layernorm = false;
  experts.num_moe_experts = 4;
  experts.moe_ffn_hidden_size = 16;
  EXPECT_EQ(model::hf_architecture(experts, &why), "");
  EXPECT_NE(why.find("experts with biases"), std::string::npos) << why;
  EXPECT_NE(why.find("model.add_bias_linear=true"), std::string::npos) << why;
  EXPECT_TRUE(hf_model_config(experts, "bfloat16").is_null());
}

// A gated shared expert (model.moe_shared_expert_gate) with softmax routing makes a Qwen2-MoE, with or without the
// QKV bias; the query and key norms, the sigmoid router or a Mixtral without the gate have no such class.
TEST(HfConfig, Qwen2MoeConfigFields) {
  auto spec = test::tiny_llama_spec(false);
  spec.num_moe_experts = 4;
  spec.moe_ffn_hidden_size = 16;
  spec.moe_router_topk = 2;
  spec.moe.shared_expert_intermediate_size = 40;
  spec.moe.shared_expert_gate = true;
  for (const bool qkv : {true, false}) {
    spec.add_qkv_bias = qkv;
    EXPECT_EQ(model::hf_architecture(spec), "Qwen2MoeForCausalLM");
    const auto c = hf_model_config(spec, "bfloat16");
    EXPECT_EQ(c["architectures"], nlohmann::json::array({"Qwen2MoeForCausalLM"}));
    EXPECT_EQ(c["model_type"], "qwen2_moe");
    EXPECT_EQ(c["qkv_bias"], qkv);
    EXPECT_EQ(c["num_experts"], 4);
    EXPECT_EQ(c["moe_intermediate_size"], 16);
    EXPECT_EQ(c["shared_expert_intermediate_size"], 40);
    EXPECT_EQ(c["intermediate_size"], 64);  // the dense blocks' MLP
    EXPECT_EQ(c["norm_topk_prob"], true);
  }
  std::string why;
  auto with_norms = spec;
  with_norms.qk_layernorm = true;
  EXPECT_EQ(model::hf_architecture(with_norms, &why), "");
  EXPECT_NE(why.find("model.qk_layernorm=true"), std::string::npos) << why;
  auto sigmoid = spec;
  sigmoid.moe.score_function = ref::MoeScoreFunction::sigmoid;
  EXPECT_EQ(model::hf_architecture(sigmoid, &why), "");
  EXPECT_NE(why.find("softmax"), std::string::npos) << why;
  auto ungated = spec;
  ungated.add_qkv_bias = false;
  ungated.moe.shared_expert_gate = false;
  EXPECT_EQ(model::hf_architecture(ungated, &why), "");
  EXPECT_NE(why.find("model.moe_shared_expert_gate=true"), std::string::npos) << why;
  expect_error_contains([&] { hf_qwen2_moe_config(ungated, "bfloat16"); }, {"model.moe_shared_expert_gate=true"});
}

TEST(HfConfig, Qwen3ConfigFields) {
  auto spec = test::tiny_llama_spec(true);
  spec.qk_layernorm = true;
  EXPECT_EQ(model::hf_architecture(spec), "Qwen3ForCausalLM");
  const auto c = hf_model_config(spec, "bfloat16");
  EXPECT_EQ(c["architectures"], nlohmann::json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(c["model_type"], "qwen3");
  EXPECT_EQ(c["head_dim"], 8);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["use_sliding_window"], false);
  EXPECT_EQ(c["max_window_layers"], 2);
  EXPECT_EQ(c["attention_bias"], false);
  EXPECT_EQ(c["tie_word_embeddings"], true);
  EXPECT_FALSE(c.contains("mlp_bias"));
  expect_error_contains([&] { hf_llama_config(spec, "bfloat16"); }, {"not a Llama model"});
  auto llama = spec;
  llama.qk_layernorm = false;
  expect_error_contains([&] { hf_qwen3_config(llama, "bfloat16"); }, {"not a Qwen3 model (model.qk_layernorm=false)"});
  // With experts: Qwen3-MoE, its routing from Megatron's (norm_topk_prob unless the softmax came first), the dense
  // blocks listed; a shared expert has no Qwen3-MoE form.
  auto moe = spec;
  moe.num_moe_experts = 4;
  moe.moe_router_topk = 2;
  moe.moe_ffn_hidden_size = 16;
  moe.moe.layer_freq = {0, 1};
  ASSERT_EQ(model::hf_architecture(moe), "Qwen3MoeForCausalLM");
  const auto m = hf_model_config(moe, "bfloat16");
  EXPECT_EQ(m["model_type"], "qwen3_moe");
  EXPECT_EQ(m["num_experts"], 4);
  EXPECT_EQ(m["num_experts_per_tok"], 2);
  EXPECT_EQ(m["moe_intermediate_size"], 16);
  EXPECT_EQ(m["intermediate_size"], 64);
  EXPECT_EQ(m["norm_topk_prob"], true);
  EXPECT_EQ(m["mlp_only_layers"], nlohmann::json::array({0}));
  moe.moe.pre_softmax = true;
  EXPECT_EQ(hf_model_config(moe, "bfloat16")["norm_topk_prob"], false);
  moe.moe.shared_expert_intermediate_size = 32;
  std::string why;
  EXPECT_EQ(model::hf_architecture(moe, &why), "");
  EXPECT_NE(why.find("Qwen3MoeForCausalLM has no shared expert"), std::string::npos) << why;
  EXPECT_TRUE(hf_model_config(moe, "bfloat16").is_null());
}

// transformers warns when rope_scaling's original_max_position_embeddings is not an integer (8192.0).
TEST(HfConfig, IntegersAreWrittenAsIntegers) {
  auto spec = test::tiny_llama_spec();
  spec.rope_scaling.factor = 8.0;  // Megatron's Llama 3 constants otherwise: an original context of 8192
  const auto c = hf_llama_config(spec, "bfloat16");
  const nlohmann::json& original = c["rope_scaling"]["original_max_position_embeddings"];
  EXPECT_TRUE(original.is_number_integer()) << original.dump();
  EXPECT_EQ(original, 8192);
  EXPECT_EQ(c.dump().find("8192.0"), std::string::npos) << c.dump();
  for (const char* key : {"max_position_embeddings", "vocab_size", "hidden_size", "num_key_value_heads"}) {
    EXPECT_TRUE(c[key].is_number_integer()) << key;
  }
  spec.rope_scaling.original_max_position_embeddings = 8192.5;
  expect_error_contains([&] { hf_llama_config(spec, "bfloat16"); },
                        {"original_max_position_embeddings = 8192.5 is not a positive integer"});
}

// What a run from pretrained weights keeps of its source's config.json (train/checkpointing.cpp decides when).
TEST(HfConfig, SourceContextAndSpecialTokenIds) {
  auto c = hf_llama_config(test::tiny_llama_spec(), "bfloat16");
  set_hf_special_token_ids(c, nlohmann::json(128000), nlohmann::json::array({128001, 128008, 128009}));
  EXPECT_EQ(c["bos_token_id"], 128000);
  EXPECT_EQ(c["eos_token_id"], nlohmann::json::array({128001, 128008, 128009}));
  set_hf_special_token_ids(c, nullptr, nlohmann::json(2));
  EXPECT_TRUE(c["bos_token_id"].is_null());
  EXPECT_EQ(c["eos_token_id"], 2);
  set_hf_special_token_ids(c, nullptr, nullptr);  // a tokenizer without BOS and EOS
  EXPECT_TRUE(c["bos_token_id"].is_null());
  EXPECT_TRUE(c["eos_token_id"].is_null());
  for (const auto& bad : {nlohmann::json("</s>"), nlohmann::json(-1), nlohmann::json(2.0), nlohmann::json::array(),
                          nlohmann::json::array({1, "x"})}) {
    EXPECT_FALSE(is_hf_token_id_value(bad)) << bad.dump();
    EXPECT_THROW(set_hf_special_token_ids(c, nullptr, bad), Error) << bad.dump();
  }
  EXPECT_EQ(c["max_position_embeddings"], 64);  // model.seq_length
  set_hf_max_position_embeddings(c, 131072);
  EXPECT_EQ(c["max_position_embeddings"], 131072);
  nlohmann::json none;  // no transformers class: no config.json
  set_hf_max_position_embeddings(none, 131072);
  set_hf_special_token_ids(none, nlohmann::json(1), nlohmann::json(2));
  EXPECT_TRUE(none.is_null());
}

TEST(TrainState, JsonRoundTripAndErrors) {
  TrainState s;
  s.iteration = 1234;
  s.data_position = {4936, {1000, 3936}};
  s.rng_state = {0x00, 0xff, 0x10, 0xab};
  s.config_hash = config_hash_hex("model:\n  hidden_size: 32\n");
  s.extra = {{"loss_scale", 1.0}};
  const TrainState back = TrainState::from_json(nlohmann::json::parse(s.to_json().dump()), "x");
  EXPECT_EQ(back, s);
  EXPECT_EQ(s.to_json()["rng_state"], "00ff10ab");
  EXPECT_EQ(s.config_hash.size(), 16u);
  EXPECT_NE(config_hash_hex("a"), config_hash_hex("b"));
  EXPECT_EQ(config_hash_hex(""), "cbf29ce484222325");  // FNV-1a 64 offset basis

  // Each damaged file is sealed again (as another tool writing it would): the field checks name the field.
  auto j = s.to_json();
  j.erase("data_position");
  seal_train_state_json(j);
  expect_error_contains([&] { TrainState::from_json(j, "ts.json"); }, {"ts.json", "data_position"});
  j = s.to_json();
  j["rng_state"] = "abc";
  seal_train_state_json(j);
  expect_error_contains([&] { TrainState::from_json(j, "ts.json"); }, {"ts.json", "odd length"});
  j = s.to_json();
  j["version"] = 99;  // a newer format is named as such, before its checksum is looked at
  expect_error_contains([&] { TrainState::from_json(j, "ts.json"); }, {"ts.json", "version"});
}

}  // namespace
}  // namespace sg::checkpoint
