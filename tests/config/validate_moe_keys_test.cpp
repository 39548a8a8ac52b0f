// Megatron-Bridge's MoE and Mamba keys in validation: what the experts compute, Megatron's own refusals
// (top-1 softmax after the top-k), the values Megatron has and stepgraph accepts (every dispatcher on one GPU,
// pre_softmax with sigmoid) or does not implement ("not implemented", not "unknown"), and notes for keys that
// no layer reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "model/layers/moe_layer.h"
#include "reference/moe_router.h"
#include "test_util.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool names(const std::vector<KeyValue>& values, const std::string& key) {
  return std::any_of(values.begin(), values.end(), [&](const KeyValue& kv) { return kv.key == key; });
}

// The violations / notes naming `key`.
std::vector<Violation> violations_naming(const ValidationReport& r, const std::string& key) {
  std::vector<Violation> out;
  std::copy_if(r.violations.begin(), r.violations.end(), std::back_inserter(out),
               [&](const Violation& v) { return names(v.values, key); });
  return out;
}
std::vector<Note> notes_naming(const ValidationReport& r, const std::string& key) {
  std::vector<Note> out;
  std::copy_if(r.notes.begin(), r.notes.end(), std::back_inserter(out),
               [&](const Note& n) { return names(n.values, key); });
  return out;
}

const std::vector<std::string> kSquaredRelu = {"model.activation_func=squared_relu", "model.gated_linear_unit=false"};
// hybrid/tiny_hybrid (squared-ReLU MLPs) with MoE layers.
const std::vector<std::string> kHybridMoe = {"model.hybrid_override_pattern=M*-EM*E-", "model.num_layers=8",
                                             "model.num_moe_experts=4", "model.moe_ffn_hidden_size=128"};

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The experts (routed and shared) take the model's MLP activation, as Megatron's: SwiGLU (Mixtral) or
// squared ReLU (Nemotron-H), in a GPT stack or a hybrid pattern; any other pair is refused once.
TEST(MoeKeys, TheExpertsTakeTheModelsActivation) {
  for (const ValidationReport& r :
       {check_recipe("moe/tiny_moe", kSquaredRelu), check_recipe("hybrid/tiny_hybrid", kHybridMoe),
        check_recipe("hybrid/tiny_hybrid",
                     plus(kHybridMoe, {"model.activation_func=silu", "model.gated_linear_unit=true"})),
        check_recipe("llama/tiny", kSquaredRelu), check_recipe("hybrid/tiny_hybrid"),
        check_recipe("hybrid/tiny_hybrid_moe")}) {
    EXPECT_TRUE(r.ok()) << describe(r);
  }
  const ValidationReport r = check_recipe("moe/tiny_moe", {"model.activation_func=gelu"});
  const std::vector<Violation> v = violations_naming(r, "model.activation_func");
  ASSERT_EQ(v.size(), 1u) << describe(r);
  EXPECT_EQ(v[0].rule, 16);
  EXPECT_TRUE(names(v[0].values, "model.gated_linear_unit")) << describe(r);
  EXPECT_TRUE(contains(v[0].message, "is not supported")) << v[0].message;
  EXPECT_TRUE(contains(v[0].fix, "squared_relu")) << v[0].fix;
}

TEST(MoeKeys, TopOneWithTheSoftmaxAfterTheTopKIsRefusedAsMegatronDoes) {
  const ValidationReport r = check_recipe("moe/tiny_moe", {"model.moe_router_topk=1"});
  const std::vector<Violation> v = violations_naming(r, "model.moe_router_pre_softmax");
  ASSERT_EQ(v.size(), 1u) << describe(r);
  EXPECT_TRUE(names(v[0].values, "model.moe_router_topk")) << describe(r);
  EXPECT_TRUE(contains(v[0].fix, "model.moe_router_pre_softmax=true")) << v[0].fix;
  EXPECT_TRUE(contains(v[0].message, "Please use --moe-router-pre-softmax when topk is 1")) << v[0].message;
  // A softmax over all experts, or sigmoid scores, give the router a gradient.
  for (const std::vector<std::string>& ok :
       {std::vector<std::string>{"model.moe_router_topk=1", "model.moe_router_pre_softmax=true"},
        std::vector<std::string>{"model.moe_router_topk=1", "model.moe_router_score_function=sigmoid"}}) {
    const ValidationReport passes = check_recipe("moe/tiny_moe", ok);
    EXPECT_TRUE(passes.ok()) << describe(passes);
  }
}

TEST(MoeKeys, EveryDispatcherRunsOnOneGpuAndFlexSaysItsBackendsAreNotUsed) {
  const std::string key = "model.moe_token_dispatcher_type";
  // Bridge's default (and Config's): a Bridge MoE config that does not set the key.
  const ValidationReport by_default =
      check_recipe("moe/tiny_moe", {key + "=" + ModelConfig{}.moe_token_dispatcher_type});
  EXPECT_TRUE(by_default.ok()) << describe(by_default);
  for (const std::string& dispatcher : moe_token_dispatcher_type_values().implemented) {
    SCOPED_TRACE(dispatcher);
    const ValidationReport r = check_recipe("moe/tiny_moe", {key + "=" + dispatcher});
    EXPECT_TRUE(r.ok()) << describe(r);
    const std::vector<Note> notes = notes_naming(r, key);
    if (dispatcher == "flex") {
      ASSERT_EQ(notes.size(), 1u) << describe(r);
      EXPECT_TRUE(contains(notes[0].message, "DeepEP")) << notes[0].message;
    } else {
      EXPECT_TRUE(notes.empty()) << describe(r);
    }
  }
  const ValidationReport typo = check_recipe("moe/tiny_moe", {key + "=all2all"});
  const std::vector<Violation> v = violations_naming(typo, key);
  ASSERT_EQ(v.size(), 1u) << describe(typo);
  EXPECT_TRUE(contains(v[0].message, "unknown")) << v[0].message;
  EXPECT_TRUE(contains(v[0].fix, join(moe_token_dispatcher_type_values().implemented, ", "))) << v[0].fix;
}

TEST(MoeKeys, PreSoftmaxWithSigmoidIsANoteAndTheRouterIgnoresIt) {
  // Bridge's DeepSeek-V3 / Moonlight pair.
  const std::vector<std::string> deepseek = {"model.moe_router_score_function=sigmoid",
                                             "model.moe_router_enable_expert_bias=true"};
  const ValidationReport with = check_recipe("moe/tiny_moe", plus(deepseek, {"model.moe_router_pre_softmax=true"}));
  ASSERT_TRUE(with.ok()) << describe(with);
  const std::vector<Note> notes = notes_naming(with, "model.moe_router_pre_softmax");
  ASSERT_EQ(notes.size(), 1u) << describe(with);
  EXPECT_TRUE(contains(notes[0].message, "no effect")) << notes[0].message;
  const ValidationReport without = check_recipe("moe/tiny_moe", deepseek);
  ASSERT_TRUE(without.ok()) << describe(without);
  EXPECT_TRUE(notes_naming(without, "model.moe_router_pre_softmax").empty()) << describe(without);

  // The router the model builds takes the pair (its plan-time check refuses pre_softmax with sigmoid) and routes
  // as sigmoid alone.
  const int64_t T = 3;
  const ref::MoeRouting routing = model::moe_shapes(model_spec(with.config), T).routing;
  const ref::MoeRouting plain = model::moe_shapes(model_spec(without.config), T).routing;
  const int64_t E = routing.E, k = routing.k;
  std::vector<float> logits(static_cast<size_t>(T * E));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.37f * static_cast<float>((i * 7) % 11) - 1.5f;
  std::vector<int32_t> map(static_cast<size_t>(T * k)), plain_map(map.size());
  std::vector<float> probs(map.size()), plain_probs(map.size());
  ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr, routing);
  ref::moe_router_forward(plain_map.data(), plain_probs.data(), logits.data(), nullptr, plain);
  EXPECT_EQ(map, plain_map);
  EXPECT_EQ(probs, plain_probs);
  // With softmax, pre_softmax is Megatron's: the router gets it.
  EXPECT_TRUE(model_spec(check_recipe("moe/tiny_moe", {"model.moe_router_pre_softmax=true"}).config).moe.pre_softmax);
}

// Megatron's sqrtsoftplus score function (DeepSeek-V4's) is accepted with the expert bias, as sigmoid is, and reaches
// the router; the bias with softmax is refused naming both; pre_softmax with it is a note, as with sigmoid.
TEST(MoeKeys, SqrtSoftplusRoutesWithTheExpertBiasAsSigmoidDoes) {
  const std::vector<std::string> v4 = {"model.moe_router_score_function=sqrtsoftplus",
                                       "model.moe_router_enable_expert_bias=true"};
  const ValidationReport ok = check_recipe("moe/tiny_moe", v4);
  ASSERT_TRUE(ok.ok()) << describe(ok);
  const model::ModelSpec spec = model_spec(ok.config);
  EXPECT_EQ(spec.moe.score_function, ref::MoeScoreFunction::sqrtsoftplus);
  EXPECT_TRUE(spec.moe.enable_expert_bias);
  EXPECT_EQ(model::moe_shapes(spec, 3).routing.score_function, ref::MoeScoreFunction::sqrtsoftplus);
  const ValidationReport pre = check_recipe("moe/tiny_moe", plus(v4, {"model.moe_router_pre_softmax=true"}));
  ASSERT_TRUE(pre.ok()) << describe(pre);
  ASSERT_EQ(notes_naming(pre, "model.moe_router_pre_softmax").size(), 1u) << describe(pre);
  EXPECT_TRUE(contains(notes_naming(pre, "model.moe_router_pre_softmax")[0].message, "sqrtsoftplus"));
  const ValidationReport softmax_bias = check_recipe("moe/tiny_moe", {"model.moe_router_enable_expert_bias=true"});
  const std::vector<Violation> v = violations_naming(softmax_bias, "model.moe_router_score_function");
  ASSERT_EQ(v.size(), 1u) << describe(softmax_bias);
  EXPECT_TRUE(contains(v[0].message, "sigmoid or sqrtsoftplus")) << v[0].message;
}

// Keys this configuration ignores (as Megatron does) are said, not silently dropped.
TEST(MoeKeys, AnAuxLossWithoutLoadBalancingAndADropPolicyWithoutDropsAreNotes) {
  const ValidationReport none =
      check_recipe("moe/tiny_moe", {"model.moe_router_load_balancing_type=none", "model.moe_aux_loss_coeff=0.01"});
  ASSERT_TRUE(none.ok()) << describe(none);
  const std::vector<Note> aux = notes_naming(none, "model.moe_aux_loss_coeff");
  ASSERT_EQ(aux.size(), 1u) << describe(none);
  EXPECT_TRUE(contains(aux[0].message, "no effect")) << aux[0].message;
  EXPECT_TRUE(notes_naming(check_recipe("moe/tiny_moe", {"model.moe_aux_loss_coeff=0.01"}), "model.moe_aux_loss_coeff")
                  .empty());
  const ValidationReport position = check_recipe("moe/tiny_moe", {"model.moe_token_drop_policy=position"});
  ASSERT_TRUE(position.ok()) << describe(position);
  const std::vector<Note> drop = notes_naming(position, "model.moe_token_drop_policy");
  ASSERT_EQ(drop.size(), 1u) << describe(position);
  EXPECT_TRUE(contains(drop[0].message, "dropless")) << drop[0].message;
  EXPECT_TRUE(notes_naming(check_recipe("moe/tiny_moe", {"model.moe_token_drop_policy=position",
                                                         "model.moe_expert_capacity_factor=1.5"}),
                           "model.moe_token_drop_policy")
                  .empty());
}

// Megatron's values stepgraph does not implement are "not implemented in stepgraph", with the values it has; a
// typo stays "unknown".
TEST(MoeKeys, MegatronValuesNotImplementedAreNotCalledUnknown) {
  for (const KeyValues* values : {&moe_router_score_function_values(), &moe_router_load_balancing_type_values(),
                                  &moe_token_drop_policy_values(), &moe_token_dispatcher_type_values(),
                                  &position_embedding_type_values()}) {
    const std::string key = values->key;
    std::vector<std::string> tried = values->megatron_only;
    tried.push_back("typo" + values->implemented[0]);
    for (const std::string& value : tried) {
      SCOPED_TRACE(key + "=" + value);
      const ValidationReport r = check_recipe("moe/tiny_moe", {key + "=" + value});
      const std::vector<Violation> v = violations_naming(r, key);
      ASSERT_EQ(v.size(), 1u) << describe(r);
      const bool megatron = value.rfind("typo", 0) != 0;
      EXPECT_EQ(contains(v[0].message, "Megatron's '" + value + "' is not implemented in stepgraph"), megatron)
          << v[0].message;
      EXPECT_EQ(contains(v[0].message, "unknown"), !megatron) << v[0].message;
      EXPECT_TRUE(contains(v[0].fix, "use one of: " + join(values->implemented, ", "))) << v[0].fix;
    }
  }
}

// Newer Megatron takes a list of load-balancing types (their losses combined): a list of one is that type, a longer
// list is refused as not implemented, with its values to pick from; in a recipe and in an override alike.
TEST(MoeKeys, ALoadBalancingTypeListOfOneIsItsValueAndALongerOneIsNotImplemented) {
  const std::string key = "model.moe_router_load_balancing_type";
  EXPECT_EQ(load_config_yaml("model:\n  moe_router_load_balancing_type: [seq_aux_loss]\n", "r.yaml")
                .model.moe_router_load_balancing_type,
            "seq_aux_loss");
  EXPECT_EQ(load_config_yaml("model:\n  moe_router_load_balancing_type:\n    - none\n", "r.yaml")
                .model.moe_router_load_balancing_type,
            "none");
  const ValidationReport one = check_recipe("moe/tiny_moe", {key + "=[seq_aux_loss]"});
  EXPECT_EQ(one.config.model.moe_router_load_balancing_type, "seq_aux_loss");
  EXPECT_TRUE(violations_naming(one, key).empty()) << describe(one);
  // The element is judged as the value would be: a typo is still "unknown".
  const ValidationReport typo = check_recipe("moe/tiny_moe", {key + "=[aux_los]"});
  ASSERT_EQ(violations_naming(typo, key).size(), 1u) << describe(typo);

  std::string msg = test::thrown_message([] {
    (void)load_config_yaml("model:\n  moe_router_load_balancing_type: [aux_loss, seq_aux_loss]\n", "r.yaml");
  });
  EXPECT_TRUE(contains(msg, "r.yaml:2:35: model.moe_router_load_balancing_type = [aux_loss, seq_aux_loss]: "
                            "combining several load-balancing losses (Megatron's list form) is not implemented; "
                            "pick one of the list's values (aux_loss or seq_aux_loss)"))
      << msg;
  msg = test::thrown_message([&] { (void)load_config("moe/tiny_moe", {key + "=[aux_loss,seq_aux_loss]"}); });
  EXPECT_TRUE(contains(msg, key + " = [aux_loss, seq_aux_loss]: combining several load-balancing losses")) << msg;
  msg = test::thrown_message([&] { (void)load_config("moe/tiny_moe", {key + "=[]"}); });
  EXPECT_TRUE(contains(msg, key + " = []: the list is empty; give one value")) << msg;
  // Its coefficient, a list in the same Megatron versions: one is the number, several are refused alike.
  EXPECT_EQ(load_config_yaml("model:\n  moe_aux_loss_coeff: [0.02]\n", "r.yaml").model.moe_aux_loss_coeff, 0.02);
  EXPECT_EQ(load_config("moe/tiny_moe", {"model.moe_aux_loss_coeff=[0.03]"}).model.moe_aux_loss_coeff, 0.03);
  msg = test::thrown_message([] { (void)load_config("moe/tiny_moe", {"model.moe_aux_loss_coeff=[0.01,0.001]"}); });
  EXPECT_TRUE(contains(msg, "model.moe_aux_loss_coeff = [0.01, 0.001]: one coefficient per load-balancing type "
                            "(Megatron's list form) is not implemented; pick one of the list's values (0.01 or 0.001)"))
      << msg;
}

size_t padded_rows_violations(const std::string& factor) {
  const ValidationReport r = check_recipe(
      "moe/tiny_moe", {"model.moe_expert_capacity_factor=" + factor, "model.moe_pad_expert_input_to_capacity=true"});
  return violations_naming(r, "model.moe_expert_capacity_factor").size();
}

TEST(MoeKeys, AnInvalidCapacityFactorSaysNullIsDropless) {
  for (const char* factor : {"-1", "0"}) {
    const ValidationReport r =
        check_recipe("moe/tiny_moe", {std::string("model.moe_expert_capacity_factor=") + factor});
    const std::vector<Violation> v = violations_naming(r, "model.moe_expert_capacity_factor");
    ASSERT_EQ(v.size(), 1u) << describe(r);
    EXPECT_TRUE(contains(v[0].fix, "null for token-dropless")) << v[0].fix;
  }
}

// A "never drop" factor: unpadded, the capacity is clamped to the tokens of a microbatch (reference/moe_permute.h),
// so any factor is fine; padded, the capacity is every expert's rows, and E x capacity rows past int32 are refused
// before any GPU work, naming the factor, with the largest one that fits. tiny_moe: T = 4 x 256, k = 2, E = 8,
// capacity 256 x factor.
TEST(MoeKeys, APaddedCapacityPastInt32RowsIsRefusedNamingTheFactor) {
  for (const char* factor : {"1e9", "1e300"}) {
    SCOPED_TRACE(factor);
    const std::string key = std::string("model.moe_expert_capacity_factor=") + factor;
    const ValidationReport unpadded = check_recipe("moe/tiny_moe", {key});
    EXPECT_TRUE(unpadded.ok()) << describe(unpadded);
    const ValidationReport padded = check_recipe("moe/tiny_moe", {key, "model.moe_pad_expert_input_to_capacity=true"});
    const std::vector<Violation> v = violations_naming(padded, "model.moe_expert_capacity_factor");
    ASSERT_EQ(v.size(), 1u) << describe(padded);
    EXPECT_TRUE(names(v[0].values, "model.moe_pad_expert_input_to_capacity")) << describe(padded);
    EXPECT_TRUE(contains(v[0].message, "exceed the kernels' int32 row ids")) << v[0].message;
    EXPECT_TRUE(contains(v[0].message, "T = micro_batch_size x seq_length = 1024 tokens")) << v[0].message;
    // (2^31 - 1) / 8 rows per expert: factor at most 268435455 x 8 / 2048 = 1048575.99, rounded down.
    EXPECT_TRUE(contains(v[0].fix, "lower model.moe_expert_capacity_factor to at most 1.04e+06")) << v[0].fix;
    EXPECT_TRUE(contains(v[0].fix, "model.moe_pad_expert_input_to_capacity=false")) << v[0].fix;
  }
  EXPECT_EQ(padded_rows_violations("1.04e6"), 0u);
  EXPECT_EQ(padded_rows_violations("1.05e6"), 1u);
}

// A violation prints moe_layer_freq as config show does.
TEST(MoeKeys, MoeLayerFreqPrintsInViolationsAsConfigShowPrintsIt) {
  for (const char* freq : {"[1,0]", "3", "([1]*3+[0])*2"}) {
    SCOPED_TRACE(freq);
    const Config c = load_config("moe/tiny_moe", {std::string("model.moe_layer_freq=") + freq});
    const std::string yaml = emit_yaml(c);
    const std::string line = "  moe_layer_freq: ";
    const size_t at = yaml.find(line);
    ASSERT_NE(at, std::string::npos);
    const std::string shown = yaml.substr(at + line.size(), yaml.find('\n', at) - at - line.size());
    EXPECT_EQ(format_value(c, "model.moe_layer_freq"), shown);
  }
  const ValidationReport r = check_recipe("moe/tiny_moe", {"model.moe_layer_freq=[1,0]"});  // 2 entries, 4 blocks
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(describe(r), "model.moe_layer_freq = [1, 0]")) << describe(r);
}

TEST(MoeKeys, MoeKeysOnAModelWithoutMoeLayersAreOneNote) {
  const std::string no_moe = "no layer is MoE";
  const auto moe_notes = [&](const ValidationReport& r) {
    std::vector<Note> out;
    for (const Note& n : r.notes) {
      if (contains(n.message, no_moe)) out.push_back(n);
    }
    return out;
  };
  // A dense recipe with MoE keys.
  const ValidationReport dense =
      check_recipe("llama/tiny", {"model.moe_ffn_hidden_size=512", "model.moe_router_topk=4"});
  ASSERT_TRUE(dense.ok()) << describe(dense);
  std::vector<Note> notes = moe_notes(dense);
  ASSERT_EQ(notes.size(), 1u) << describe(dense);
  EXPECT_TRUE(names(notes[0].values, "model.moe_ffn_hidden_size")) << describe(dense);
  EXPECT_TRUE(names(notes[0].values, "model.moe_router_topk")) << describe(dense);
  // Bridge's keys that never have an effect here (config/bridge_inert_keys.h) have their own note, not this one.
  EXPECT_TRUE(moe_notes(check_recipe("llama/tiny", {"model.moe_grouped_gemm=true"})).empty());

  // An MoE recipe made dense: the keys it sets away from the defaults, not those at them.
  const Config tiny_moe = load_config("moe/tiny_moe");
  ASSERT_EQ(tiny_moe.model.moe_router_topk, ModelConfig{}.moe_router_topk);
  ASSERT_NE(tiny_moe.model.moe_ffn_hidden_size, ModelConfig{}.moe_ffn_hidden_size);
  for (const char* zero : {"model.num_moe_experts=0", "model.num_moe_experts=null"}) {
    const ValidationReport r = check_recipe("moe/tiny_moe", {zero});
    notes = moe_notes(r);
    ASSERT_EQ(notes.size(), 1u) << describe(r);
    EXPECT_TRUE(names(notes[0].values, "model.moe_ffn_hidden_size")) << describe(r);
    EXPECT_FALSE(names(notes[0].values, "model.moe_router_topk")) << describe(r);
  }
  // Experts, but moe_layer_freq makes every block dense: the experts are unused, the frequency is the reason.
  const ValidationReport zeros = check_recipe("moe/tiny_moe", {"model.moe_layer_freq=[0,0,0,0]"});
  notes = moe_notes(zeros);
  ASSERT_EQ(notes.size(), 1u) << describe(zeros);
  EXPECT_TRUE(names(notes[0].values, "model.num_moe_experts")) << describe(zeros);
  EXPECT_FALSE(names(notes[0].values, "model.moe_layer_freq")) << describe(zeros);
  // Experts on a hybrid pattern without E.
  notes = moe_notes(check_recipe("hybrid/tiny_hybrid", {"model.num_moe_experts=8"}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(names(notes[0].values, "model.num_moe_experts"));

  // The pattern decides the MoE layers: moe_layer_freq has no effect.
  const std::vector<std::string> hybrid_moe =
      plus(kHybridMoe, {"model.activation_func=silu", "model.gated_linear_unit=true"});
  const ValidationReport freq = check_recipe("hybrid/tiny_hybrid", plus(hybrid_moe, {"model.moe_layer_freq=2"}));
  ASSERT_TRUE(freq.ok()) << describe(freq);
  EXPECT_TRUE(moe_notes(freq).empty()) << describe(freq);
  ASSERT_EQ(notes_naming(freq, "model.moe_layer_freq").size(), 1u) << describe(freq);

  // Models with MoE layers, or dense ones without MoE keys: no such note.
  for (const ValidationReport& r :
       {check_recipe("moe/tiny_moe"), check_recipe("llama/tiny"), check_recipe("hybrid/tiny_hybrid", hybrid_moe)}) {
    EXPECT_TRUE(moe_notes(r).empty()) << describe(r);
    EXPECT_TRUE(notes_naming(r, "model.moe_layer_freq").empty()) << describe(r);
  }
}

TEST(MambaKeys, MambaKeysOnAModelWithoutMambaLayersAreOneNote) {
  const auto mamba_notes = [](const ValidationReport& r) {
    std::vector<Note> out;
    for (const Note& n : r.notes) {
      if (contains(n.message, "no Mamba layers")) out.push_back(n);
    }
    return out;
  };
  // Even a value the scan refuses: no layer runs it.
  const ValidationReport gpt = check_recipe("llama/tiny", {"model.mamba_num_groups=4", "model.mamba_state_dim=48"});
  ASSERT_TRUE(gpt.ok()) << describe(gpt);
  std::vector<Note> notes = mamba_notes(gpt);
  ASSERT_EQ(notes.size(), 1u) << describe(gpt);
  EXPECT_TRUE(names(notes[0].values, "model.mamba_num_groups")) << describe(gpt);
  EXPECT_TRUE(names(notes[0].values, "model.mamba_state_dim")) << describe(gpt);
  EXPECT_TRUE(contains(notes[0].message, "model.hybrid_override_pattern")) << notes[0].message;
  // A pattern without M.
  notes = mamba_notes(
      check_recipe("hybrid/tiny_hybrid", {"model.hybrid_override_pattern=*-*-*-*-", "model.mamba_expand=4"}));
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(names(notes[0].values, "model.mamba_expand"));
  // Mamba layers, or no mamba_* key away from its default: no note.
  for (const ValidationReport& r :
       {check_recipe("hybrid/tiny_hybrid", {"model.mamba_expand=4"}), check_recipe("llama/tiny")}) {
    EXPECT_TRUE(mamba_notes(r).empty()) << describe(r);
  }
}

TEST(MambaKeys, ADerivedHeadCountNamesTheKeysItComesFrom) {
  const ValidationReport derived = check_recipe("hybrid/tiny_hybrid", {"model.mamba_num_groups=3"});
  const std::vector<Violation> v = violations_naming(derived, "model.mamba_num_groups");
  ASSERT_EQ(v.size(), 1u) << describe(derived);
  for (const char* key : {"model.mamba_expand", "model.hidden_size", "model.mamba_head_dim"}) {
    EXPECT_TRUE(names(v[0].values, key)) << key << "\n" << describe(derived);
  }
  EXPECT_TRUE(contains(v[0].message, "mamba_expand * hidden_size / mamba_head_dim")) << v[0].message;
  // A head count given as a key is that key alone.
  const ValidationReport given =
      check_recipe("hybrid/tiny_hybrid", {"model.mamba_num_heads=6", "model.mamba_num_groups=4"});
  const std::vector<Violation> g = violations_naming(given, "model.mamba_num_groups");
  ASSERT_EQ(g.size(), 1u) << describe(given);
  EXPECT_TRUE(names(g[0].values, "model.mamba_num_heads")) << describe(given);
  EXPECT_FALSE(names(g[0].values, "model.mamba_expand")) << describe(given);
}

}  // namespace
}  // namespace sg::config
