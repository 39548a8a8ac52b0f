// The 16 configuration rules (docs/configuration.md). Rules 1-15 are Megatron's CUDA-graph
// restrictions; rule 16 is shape consistency plus "not implemented yet" notes. Normalization
// happens here too, so `config show` prints exactly what validate accepted.
#include "config/validate.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "config/graph_keys.h"
#include "config/lr_decay.h"
#include "config/mixed_precision.h"
#include "config/model_config.h"
#include "config/moe_layer_freq.h"
#include "config/moment_dtype.h"
#include "config/num_epochs.h"
#include "config/schedule_lengths.h"
#include "config/training_samples.h"
#include "core/strings.h"
#include "graph/scope_plan.h"
#include "model/layer_registry.h"
#include "model/recompute.h"

namespace sg::config {
namespace {

// The spellings and the impl/scope rules are the graph layer's (graph/scope_plan.h), written once.
const std::vector<std::string> kImpls = graph::graph_impl_names();
const std::vector<std::string> kScopes = graph::graph_scope_names();

// The rule number (docs/configuration.md) of each impl/scope problem.
int rule_number(graph::ScopeRule rule) {
  switch (rule) {
    case graph::ScopeRule::unknown_impl:
    case graph::ScopeRule::unknown_scope: return 1;
    case graph::ScopeRule::full_iteration_not_alone:
    case graph::ScopeRule::local_with_module_scopes:
    case graph::ScopeRule::full_iteration_without_local: return 4;
    case graph::ScopeRule::moe_with_moe_router:
    case graph::ScopeRule::moe_preprocess_without_router: return 6;
  }
  return 1;
}

bool contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

class Validator {
 public:
  explicit Validator(const Config& config) { report_.config = config; }

  ValidationReport run() {
    detail::apply_mixed_precision(report_.config, report_.notes);  // first: later rules see the values it copies
    resolve_defaults();
    detail::resolve_tokenizer(report_.config, report_.violations, report_.notes);
    count_layers();
    rule1_known_values();
    rule2_impl_none();
    rule3_rng_tracker();
    rule4_impl_and_scope();
    rules5_to_15();
    detail::check_shapes(report_.config, report_.violations, report_.notes);
    check_lr_warmup_fraction(report_.config, report_.violations, report_.notes);
    check_lr_schedule(report_.config, report_.violations, report_.notes);
    detail::check_user_data(report_.config, report_.violations, report_.notes);
    detail::check_recompute(report_.config, report_.violations, report_.notes);
    detail::check_bridge_inert_keys(report_.config, report_.violations, report_.notes);
    rule16_unimplemented();
    // Report in rule order; within a rule, in the order found.
    std::stable_sort(report_.violations.begin(), report_.violations.end(),
                     [](const Violation& a, const Violation& b) { return a.rule < b.rule; });
    std::stable_sort(report_.notes.begin(), report_.notes.end(),
                     [](const Note& a, const Note& b) { return a.rule < b.rule; });
    return std::move(report_);
  }

 private:
  Config& c() { return report_.config; }
  ModelConfig& m() { return report_.config.model; }

  std::vector<KeyValue> values(const std::vector<std::string>& keys) { return detail::key_values(c(), keys); }
  void violation(int rule, std::string message, const std::vector<std::string>& keys,
                 std::string fix) {
    report_.violations.push_back({rule, std::move(message), values(keys), std::move(fix)});
  }
  void note(int rule, std::string message, const std::vector<std::string>& keys) {
    report_.notes.push_back({rule, std::move(message), values(keys)});
  }
  bool has_scope(graph::GraphScope scope) const { return graph_scope_listed(report_.config.model, scope); }
  bool impl_is(graph::GraphImpl impl) const { return graph_impl_is(report_.config.model, impl); }
  // Whether model.recompute_modules names `module`.
  bool recomputes(model::RecomputeModule module) const {
    return contains(report_.config.model.recompute_modules, model::recompute_module_name(module));
  }

  // Bridge's meaning of unset keys (model_config.h's resolved_*), written out so `config show` prints the
  // values that run. Only from valid sizes: an invalid one is reported under its own key.
  void resolve_defaults() {
    if (!m().ffn_hidden_size && m().hidden_size > 0 && m().hidden_size <= kMaxSize) {
      m().ffn_hidden_size = resolved_ffn_hidden_size(m());
      derived("model.ffn_hidden_size");
    }
    if (!m().num_query_groups && m().num_attention_heads > 0) {
      m().num_query_groups = resolved_num_query_groups(m());
      derived("model.num_query_groups");
    }
    if (m().num_moe_experts.value_or(0) > 0 && !m().moe_ffn_hidden_size && m().ffn_hidden_size) {
      m().moe_ffn_hidden_size = resolved_moe_ffn_hidden_size(m());
      derived("model.moe_ffn_hidden_size");
    }
    if (m().hybrid_override_pattern && m().hybrid_override_pattern->empty()) {
      m().hybrid_override_pattern.reset();
    }
    // Not a derived key for a run's config.yaml: it depends on the ranks, and a run resumed at another world size
    // keeps its global batch (the extra microbatches accumulate).
    if (!c().train.global_batch_size && c().train.micro_batch_size) {
      c().train.global_batch_size = *c().train.micro_batch_size * std::max<int64_t>(1, c().data_parallel_size);
    }
    // train.num_epochs and train.train_samples: train_iters and the decay length from them, before the decay
    // defaults to train_iters.
    resolve_num_epochs(c(), report_.violations, report_.notes);
    resolve_sample_based_lengths(c(), report_.violations, report_.notes);
    if (c().optimizer.use_distributed_optimizer != c().ddp.use_distributed_optimizer) {
      // Bridge's rule: either flag turns the distributed optimizer on in both places.
      note(16, "optimizer.use_distributed_optimizer and ddp.use_distributed_optimizer are one setting: both set "
               "to true",
           {"optimizer.use_distributed_optimizer", "ddp.use_distributed_optimizer"});
      c().optimizer.use_distributed_optimizer = true;
      c().ddp.use_distributed_optimizer = true;
    }
    read_bridge_moment_dtypes(c().optimizer, report_.notes);  // torch.float32 is fp32 (config/moment_dtype.h)
    // Bridge's other names of the activations (relu2): rewritten, so the config (and its checkpoint hash) is one.
    if (const std::string activation = resolved_activation_func(m()); activation != m().activation_func) {
      note(16,
           strprintf("activation_func %s is Megatron-Bridge's other name of %s", m().activation_func.c_str(),
                     activation.c_str()),
           {"model.activation_func"});
      m().activation_func = activation;
    }
    resolve_max_steps(c(), report_.violations, report_.notes);  // Bridge's max_steps is the decay's length
    // An invalid train_iters is reported once, under its own key, not again as the decay it would default.
    if (!c().scheduler.lr_decay_iters && c().train.train_iters && *c().train.train_iters >= 1) {
      c().scheduler.lr_decay_iters = resolved_lr_decay_iters(c());
      derived("scheduler.lr_decay_iters");
    }
    if (!c().dataset.seq_length) {
      c().dataset.seq_length = m().seq_length;
      derived("dataset.seq_length");
    }
  }
  void derived(const std::string& key) {
    if (!contains(c().derived_keys, key)) c().derived_keys.push_back(key);
  }

  // The graphable modules of the model's layers (model/layer_kind.h), for the scope rules.
  void count_layers() {
    if (m().num_layers > kMaxLayers) return;  // reported by rule 16; no pattern to build
    try {
      for (const auto kind : layer_pattern(c())) {
        for (const graph::Module module : model::layer_kind_info(kind).modules) {
          if (!has_module(module)) modules_.push_back(module);
        }
      }
      layers_known_ = true;
    } catch (const ConfigError& e) {
      if (std::string_view(e.what()).rfind("model.moe_layer_freq", 0) == 0) {
        violation(16, e.what(), {"model.moe_layer_freq", "model.num_layers"},
                  "give model.moe_layer_freq as an integer or one 0/1 per block");
      } else {
        const bool separators = m().hybrid_override_pattern &&
                                m().hybrid_override_pattern->find_first_of("|/") != std::string::npos;
        violation(16, e.what(), {"model.hybrid_override_pattern"},
                  separators ? "remove Megatron's '|' stage separators and the '/' MTP part, as the message says"
                             : "use only M (Mamba), * (attention), - (MLP) and E (MoE), one character per layer");
      }
    }
  }
  bool has_module(graph::Module module) const {
    return std::find(modules_.begin(), modules_.end(), module) != modules_.end();
  }
  // Whether any layer marks a module that `scope` graphs (graph::scope_modules).
  bool scope_has_layers(graph::GraphScope scope) const {
    const std::vector<graph::Module> modules = graph::scope_modules(scope);
    return std::any_of(modules.begin(), modules.end(), [this](graph::Module m) { return has_module(m); });
  }

  void rule1_known_values() {
    detail::read_megatron_graph_spellings(report_.config, report_.violations, report_.notes);
    // A full_iteration impl left as it is was refused there with its scope (the name itself is Megatron's).
    const auto problem = m().cuda_graph_impl == graph::graph_scope_name(graph::GraphScope::full_iteration)
                             ? std::nullopt
                             : graph::check_graph_impl_name(m().cuda_graph_impl);
    if (problem) {
      violation(1, problem->message, {"model.cuda_graph_impl"}, problem->fix);
    }
    impl_known_ = contains(kImpls, m().cuda_graph_impl);
    graphs_on_ = impl_known_ && !impl_is(graph::GraphImpl::none);
    std::vector<std::string> unique;
    for (const auto& scope : m().cuda_graph_scope) {
      if (const auto problem = graph::check_graph_scope_name(scope)) {
        violation(1, problem->message, {"model.cuda_graph_scope"}, problem->fix);
      }
      if (!contains(unique, scope)) unique.push_back(scope);
    }
    if (unique.size() != m().cuda_graph_scope.size()) {
      note(1, "repeated cuda_graph_scope entries are listed once", {"model.cuda_graph_scope"});
      m().cuda_graph_scope = unique;
    }
  }

  void rule2_impl_none() {
    if (impl_is(graph::GraphImpl::none) && !m().cuda_graph_scope.empty()) {
      note(2, "cuda_graph_impl none graphs nothing: cuda_graph_scope cleared",
           {"model.cuda_graph_impl", "model.cuda_graph_scope"});
      m().cuda_graph_scope.clear();
    }
  }

  void rule3_rng_tracker() {
    const std::vector<std::string> keys = {"model.cuda_graph_impl", "model.use_te_rng_tracker",
                                           "rng.te_rng_tracker"};
    if (graphs_on_) {
      if (!m().use_te_rng_tracker || !c().rng.te_rng_tracker) {
        violation(3, "cuda_graph_impl " + m().cuda_graph_impl + " needs the graph-safe RNG tracker",
                  keys,
                  "set model.use_te_rng_tracker=true rng.te_rng_tracker=true (one setting, kept in "
                  "two places; both must be true), or model.cuda_graph_impl=none");
      }
    } else if (m().use_te_rng_tracker != c().rng.te_rng_tracker) {
      note(3, "model.use_te_rng_tracker and rng.te_rng_tracker are one setting: both set to true",
           {"model.use_te_rng_tracker", "rng.te_rng_tracker"});
      m().use_te_rng_tracker = true;
      c().rng.te_rng_tracker = true;
    }
  }

  // The module scopes that graph whole layers of this model, for transformer_engine with no scope.
  std::vector<std::string> whole_layer_scopes() {
    using S = graph::GraphScope;
    const std::vector<S> moe_scopes =
        drop_and_pad_moe() ? std::vector<S>{S::moe} : std::vector<S>{S::moe_router, S::moe_preprocess};
    std::vector<std::string> names;
    const auto add = [&](graph::Module module, const std::vector<S>& scopes) {
      if (!has_module(module)) return;
      for (const S scope : scopes) names.emplace_back(graph::graph_scope_name(scope));
    };
    add(graph::Module::attn, {S::attn});
    add(graph::Module::mlp, {S::mlp});
    add(graph::Module::moe, moe_scopes);
    add(graph::Module::mamba, {S::mamba});
    return names;
  }

  // Token-drop MoE padded to capacity (static expert sizes): transformer_engine's default scope graphs the
  // whole layer (moe) there, and only moe_router,moe_preprocess otherwise. Every MoE layer can take moe.
  bool drop_and_pad_moe() { return m().moe_expert_capacity_factor.has_value() && m().moe_pad_expert_input_to_capacity; }

  // Rule 7's fix for moe scopes on a model without MoE layers: what would make some layer MoE.
  std::string moe_layers_fix(std::vector<std::string>& keys) {
    const bool experts = m().num_moe_experts.value_or(0) > 0;
    std::vector<std::string> steps;
    if (!experts) steps.push_back("set model.num_moe_experts > 0");
    if (m().hybrid_override_pattern) {
      if (m().hybrid_override_pattern->find('E') == std::string::npos) {
        steps.push_back("add E (MoE) layers to model.hybrid_override_pattern");
      }
    } else if (!freq_marks_moe_blocks()) {
      keys.push_back("model.moe_layer_freq");
      steps.push_back("mark MoE blocks with 1s in model.moe_layer_freq (1: every block)");
    }
    return "make the model MoE: " + join(steps, " and ");
  }
  bool freq_marks_moe_blocks() {
    try {
      const std::vector<int> freq = expand_moe_layer_freq(m().moe_layer_freq, m().num_layers);
      return std::find(freq.begin(), freq.end(), 1) != freq.end();
    } catch (const ConfigError&) {
      return true;  // malformed: rule 16 reports it
    }
  }

  // Rules 4 and 6 (graph/scope_plan.h writes them), and the defaults of an empty scope.
  void rule4_impl_and_scope() {
    const std::vector<std::string> keys = {"model.cuda_graph_impl", "model.cuda_graph_scope"};
    if (impl_is(graph::GraphImpl::local) && m().cuda_graph_scope.empty()) {
      m().cuda_graph_scope = {graph::graph_scope_name(graph::GraphScope::full_iteration)};
      note(4,
           "cuda_graph_impl local with no scope means full_iteration: the whole step (Megatron's local with no "
           "modules graphs each whole layer; transformer_engine does that here)",
           keys);
    } else if (impl_is(graph::GraphImpl::transformer_engine) && m().cuda_graph_scope.empty() && layers_known_) {
      m().cuda_graph_scope = whole_layer_scopes();
      // Megatron's default for a dropless MoE layer is its router and preprocess; say so, and how to have more.
      const bool dropless_moe = has_module(graph::Module::moe) && !drop_and_pad_moe();
      // The whole layer is `moe` in place of the router and preprocess scopes (rule 6: moe excludes moe_router).
      std::vector<std::string> whole;
      for (const std::string& scope : m().cuda_graph_scope) {
        if (scope == graph::graph_scope_name(graph::GraphScope::moe_router)) {
          whole.push_back(graph::graph_scope_name(graph::GraphScope::moe));
        } else if (scope != graph::graph_scope_name(graph::GraphScope::moe_preprocess)) {
          whole.push_back(scope);
        }
      }
      note(4,
           "cuda_graph_impl transformer_engine with no scope graphs whole layers" +
               std::string(dropless_moe ? " (a dropless MoE layer: its router and preprocess, as Megatron does; "
                                          "model.cuda_graph_scope=" +
                                              join(whole, ",") + " graphs the whole layer)"
                                        : "") +
               ": scope set to " + format_value(c(), "model.cuda_graph_scope"),
           keys);
    }
    const auto impl = graph::find_graph_impl(m().cuda_graph_impl);
    if (!impl) return;  // rule 1
    std::vector<graph::GraphScope> known;
    for (const auto& scope : m().cuda_graph_scope) {
      if (const auto s = graph::find_graph_scope(scope)) known.push_back(*s);
    }
    for (const graph::ScopeProblem& problem : graph::check_scope_rules(*impl, known)) {
      const int rule = rule_number(problem.rule);
      violation(rule, problem.message, rule == 4 ? keys : std::vector<std::string>{"model.cuda_graph_scope"},
                problem.fix);
    }
  }

  void rules5_to_15();

  void rule16_unimplemented() {
    for (const auto& item : detail::find_unimplemented(c())) {
      note(16,
           "not implemented yet: " + item.what + "; validate checks the rules, train refuses it",
           item.keys);
    }
    if (!m().gradient_accumulation_fusion) {
      note(16,
           "gradient_accumulation_fusion false has no effect: weight gradients always accumulate "
           "into the main_grad",
           {"model.gradient_accumulation_fusion"});
    }
    if (!m().recompute_granularity && m().recompute_modules != ModelConfig{}.recompute_modules) {
      note(16, "recompute_modules applies only with recompute_granularity selective",
           {"model.recompute_granularity", "model.recompute_modules"});
    }
    if (m().recompute_granularity == "selective" && m().recompute_modules.empty()) {
      note(16,
           "recompute_granularity selective with an empty recompute_modules recomputes nothing (null is Megatron's "
           "default, [core_attn])",
           {"model.recompute_granularity", "model.recompute_modules"});
    }
    // bf16 keeps 8 significant bits: where (1 - beta2) is below its relative spacing, beta2 * v rounds
    // back to v and a small g^2 adds nothing, so the stored second moment stops following the gradients.
    if (c().optimizer.exp_avg_sq_dtype == "bf16" && c().optimizer.adam_beta2 > 1.0 - 1.0 / 256) {
      note(16,
           strprintf("exp_avg_sq_dtype bf16 with adam_beta2 = %g: a step changes the second moment by less than "
                     "bf16 resolves (1 - beta2 < 2^-8), so it stops decaying. Use fp32 for it, or adam_beta2 <= 0.996",
                     c().optimizer.adam_beta2),
           {"optimizer.exp_avg_sq_dtype", "optimizer.adam_beta2"});
    }
    if (c().checkpoint.save_interval && !c().checkpoint.save) {
      note(16, "checkpoint.save_interval without checkpoint.save: no checkpoints are written",
           {"checkpoint.save", "checkpoint.save_interval"});
    }
    if (c().checkpoint.most_recent_k >= 1 && !c().checkpoint.save) {
      note(16, "checkpoint.most_recent_k without checkpoint.save: no checkpoints are written, so none are removed",
           {"checkpoint.save", "checkpoint.most_recent_k"});
    }
    keys_without_layers();
  }

  // MoE and Mamba keys set away from Config's defaults on a model without such layers. Notes, not errors: Megatron
  // raises only for moe_ffn_hidden_size without experts, and a Bridge config that keeps a family's settings while
  // its layers change (a dense or attention-only variant) trains as written; the note says what is not used.
  void keys_without_layers() {
    if (!layers_known_ || modules_.empty()) return;  // no stack: its error says why
    std::vector<std::string> moe = changed_model_keys(c(), "moe_");
    const bool gpt = !m().hybrid_override_pattern, experts = m().num_moe_experts.value_or(0) > 0;
    if (!has_module(graph::Module::moe)) {
      // A GPT stack with experts is dense by its moe_layer_freq: that key is the reason, not unused.
      if (gpt && experts) std::erase(moe, "model.moe_layer_freq");
      if (experts) moe.insert(moe.begin(), "model.num_moe_experts");
      if (!moe.empty()) {
        note(16, "no layer is MoE, so these keys have no effect (MoE layers: model.num_moe_experts > 0 with E in "
                 "model.hybrid_override_pattern, or 1s in model.moe_layer_freq)", moe);
      }
    } else if (!gpt && contains(moe, "model.moe_layer_freq")) {
      note(16, "moe_layer_freq has no effect with a hybrid_override_pattern: its E layers are the MoE layers",
           {"model.moe_layer_freq", "model.hybrid_override_pattern"});
    }
    if (has_module(graph::Module::moe) && m().moe_shared_expert_gate &&
        m().moe_shared_expert_intermediate_size.value_or(0) <= 0) {
      note(16,
           "moe_shared_expert_gate has no effect without a shared expert (Megatron builds no gate then); set "
           "model.moe_shared_expert_intermediate_size for one",
           {"model.moe_shared_expert_gate", "model.moe_shared_expert_intermediate_size"});
    }
    const std::vector<std::string> mamba = changed_model_keys(c(), "mamba_");
    if (!has_module(graph::Module::mamba) && !mamba.empty()) {
      note(16, "the model has no Mamba layers, so these keys have no effect (set model.hybrid_override_pattern with "
               "M layers to have some)", mamba);
    }
  }

  static constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();
  // The graph runtime counts steps in int: the capture step, warmup + 1, must fit (rule 15's summary: 2^31 - 2).
  static constexpr int64_t kMaxWarmupSteps = std::numeric_limits<int32_t>::max() - 1;

  ValidationReport report_;
  bool impl_known_ = false;
  bool graphs_on_ = false;
  bool layers_known_ = false;
  std::vector<graph::Module> modules_;  // every module the model's layers mark
};

void Validator::rules5_to_15() {
  using S = graph::GraphScope;
  using R = model::RecomputeModule;
  const std::string scope_key = "model.cuda_graph_scope";
  // Rule 5: Megatron refuses host-side NaN checks with a whole-step graph because its checks read
  // host values mid-step. stepgraph's checks read non-finite flags that kernels inside the graph
  // write, copied to the host with the step's metrics, so they work in every mode (a note).
  if (impl_is(graph::GraphImpl::local) && has_scope(S::full_iteration) &&
      (c().rerun_state_machine.check_for_nan_in_loss || c().ddp.check_for_nan_in_grad)) {
    std::vector<std::string> keys = {"model.cuda_graph_impl", scope_key};
    if (c().rerun_state_machine.check_for_nan_in_loss) {
      keys.push_back("rerun_state_machine.check_for_nan_in_loss");
    }
    if (c().ddp.check_for_nan_in_grad) keys.push_back("ddp.check_for_nan_in_grad");
    note(5,
         "NaN checks with a whole-step graph: the non-finite flags are computed on the device inside the "
         "graph and read with the step's metrics, so a NaN stops the run within two steps (Megatron "
         "refuses this combination)",
         keys);
  }

  // Rule 6: with rule 4 (rule4_impl_and_scope).

  // Rule 7: a scope must have layers to graph (a layer marking one of graph::scope_modules(scope)).
  if (layers_known_) {
    std::vector<std::string> pattern_keys = {scope_key};
    if (m().hybrid_override_pattern) pattern_keys.push_back("model.hybrid_override_pattern");
    std::vector<std::string> moe_scopes;
    bool moe_layers = false;
    for (const S s : {S::moe, S::moe_router, S::moe_preprocess}) {
      if (!has_scope(s)) continue;
      moe_scopes.emplace_back(graph::graph_scope_name(s));
      moe_layers = moe_layers || scope_has_layers(s);
    }
    if (!moe_scopes.empty() && (m().num_moe_experts.value_or(0) <= 0 || !moe_layers)) {
      auto keys = pattern_keys;
      keys.push_back("model.num_moe_experts");
      const std::string fix = moe_layers_fix(keys);
      violation(7, "scope " + join(moe_scopes, ",") + " needs an MoE model, and this model has no MoE layers", keys,
                "remove " + join(moe_scopes, ", ") + " from model.cuda_graph_scope, or " + fix);
    }
    if (has_scope(S::mlp) && !scope_has_layers(S::mlp)) {
      auto keys = pattern_keys;
      keys.push_back("model.num_moe_experts");
      violation(7, "scope mlp needs dense MLP layers, and this model has none (its MLPs are MoE)", keys,
                "remove mlp from model.cuda_graph_scope; graph MoE layers with moe (the whole layer, dropless or "
                "token-drop) or moe_router,moe_preprocess (the router only)");
    }
    if (has_scope(S::mamba) && !scope_has_layers(S::mamba)) {
      auto keys = pattern_keys;
      if (!m().hybrid_override_pattern) keys.push_back("model.hybrid_override_pattern");
      violation(7, "scope mamba needs Mamba layers, and this model has none", keys,
                "remove mamba from model.cuda_graph_scope, or add M layers to "
                "model.hybrid_override_pattern");
    }
    if (has_scope(S::attn) && !scope_has_layers(S::attn)) {
      auto keys = pattern_keys;
      if (!m().hybrid_override_pattern) keys.push_back("model.hybrid_override_pattern");
      violation(7, "scope attn needs attention layers, and this model has none", keys,
                "remove attn from model.cuda_graph_scope, or add * layers to "
                "model.hybrid_override_pattern");
    }
  }

  // Rule 8 (a note; Megatron refuses it): dropless routing (no capacity factor) has data-dependent expert
  // sizes, but on one GPU the permuted buffer always has tokens x topk rows, and stepgraph's dispatch and
  // grouped GEMM read the per-expert sizes from device memory, so the whole MoE layer graphs. Only for a
  // model with MoE layers under transformer_engine (rules 4 and 7 refuse the scope otherwise); a set factor is
  // token-drop (rule 16 checks its value).
  if (impl_is(graph::GraphImpl::transformer_engine) && has_scope(S::moe) && layers_known_ && scope_has_layers(S::moe) &&
      m().num_moe_experts.value_or(0) > 0 && !m().moe_expert_capacity_factor) {
    note(8,
         "scope moe with token-dropless MoE: Megatron refuses it; stepgraph graphs it (expert sizes stay on the "
         "device, the grouped GEMM reads them there)",
         {scope_key, "model.moe_expert_capacity_factor"});
  }

  // Rule 9.
  const DatasetConfig& d = c().dataset;
  if (graphs_on_ && d.packed_sequence && (!d.pad_to_max_length || !d.pad_cu_seqlens)) {
    violation(9, "CUDA graphs need static shapes, and packed sequences vary in length",
              {"model.cuda_graph_impl", "dataset.packed_sequence", "dataset.pad_to_max_length",
               "dataset.pad_cu_seqlens"},
              "set dataset.pad_to_max_length=true dataset.pad_cu_seqlens=true, or "
              "model.cuda_graph_impl=none");
  }

  // Rule 10.
  if (graphs_on_ && m().cpu_offloading) {
    violation(10, "cpu_offloading is incompatible with CUDA graphs",
              {"model.cuda_graph_impl", "model.cpu_offloading"},
              "set model.cpu_offloading=false, or model.cuda_graph_impl=none");
  }

  const bool scoped = impl_is(graph::GraphImpl::transformer_engine);
  const auto granularity = recompute_granularity(m());
  // Rule 11.
  if (scoped && granularity == model::RecomputeGranularity::full) {
    violation(
        11, "full activation recompute cannot run with transformer_engine scoped graphs",
        {"model.cuda_graph_impl", scope_key, "model.recompute_granularity"},
        "(1) recompute selectively: model.recompute_granularity=selective "
        "model.recompute_modules=core_attn (or other modules); (2) turn graphs off: "
        "model.cuda_graph_impl=none; or (3) graph the whole step: model.cuda_graph_impl=local "
        "model.cuda_graph_scope=full_iteration");
  }
  // Rule 12.
  if (scoped && granularity == model::RecomputeGranularity::selective && recomputes(R::moe) &&
      has_scope(S::moe_router)) {
    violation(
        12, "recomputing the MoE layer (recompute_modules moe) conflicts with a graphed moe_router",
        {"model.cuda_graph_impl", scope_key, "model.recompute_modules"},
        "remove moe from model.recompute_modules (moe_act recomputes only the expert "
        "activation), or remove moe_router and moe_preprocess from model.cuda_graph_scope");
  }
  // Rule 13: Megatron refuses dropout in a graphed module that is recomputed, because replaying its
  // graph would redraw the masks. stepgraph's masks are a function of (generator state, site) with the
  // state in device memory, advanced only after each microbatch, and the cuDNN attention seeds are
  // written once per microbatch: the recompute inside the graph draws the forward's masks (a note).
  if (scoped && granularity == model::RecomputeGranularity::selective) {
    std::vector<std::string> keys;
    if (m().attention_dropout != 0.0 && recomputes(R::core_attn) && has_scope(S::attn)) {
      keys.push_back("model.attention_dropout");
    }
    const bool graphed_mlp = (recomputes(R::mlp) && has_scope(S::mlp)) || (recomputes(R::moe) && has_scope(S::moe));
    if (m().hidden_dropout != 0.0 && graphed_mlp) keys.push_back("model.hidden_dropout");
    if (!keys.empty()) {
      keys.push_back("model.recompute_modules");
      keys.push_back(scope_key);
      note(13,
           "a graphed module is recomputed with dropout on: its recompute draws the forward's masks "
           "(device-resident Philox state, advanced after each microbatch; Megatron refuses this combination)",
           keys);
    }
  }
  // Rule 14.
  if (m().delay_wgrad_compute && (has_scope(S::attn) || has_scope(S::moe_router)) &&
      (!m().gradient_accumulation_fusion || m().add_bias_linear || m().add_qkv_bias)) {
    std::vector<std::string> keys = {"model.delay_wgrad_compute", scope_key};
    std::vector<std::string> fixes;
    if (!m().gradient_accumulation_fusion) {
      keys.push_back("model.gradient_accumulation_fusion");
      fixes.push_back("model.gradient_accumulation_fusion=true");
    }
    if (m().add_bias_linear) {
      keys.push_back("model.add_bias_linear");
      fixes.push_back("model.add_bias_linear=false");
    }
    if (m().add_qkv_bias) {
      keys.push_back("model.add_qkv_bias");
      fixes.push_back("model.add_qkv_bias=false");
    }
    violation(
        14,
        "delay_wgrad_compute with attn or moe_router graphed needs gradient_accumulation_fusion "
        "and no linear biases",
        keys, "set " + join(fixes, " ") + ", or model.delay_wgrad_compute=false");
  }
  // Rule 15: the capture step (warmup + 1) must fit the int step counters of the graph runtime.
  const int64_t warmup = m().cuda_graph_warmup_steps;
  if (warmup < 0 || warmup > kMaxWarmupSteps) {
    violation(
        15,
        strprintf("cuda_graph_warmup_steps must be an integer from 0 to %lld", static_cast<long long>(kMaxWarmupSteps)),
        {"model.cuda_graph_warmup_steps"},
        strprintf("set model.cuda_graph_warmup_steps between 0 and %lld (default 3: eager steps before "
                  "capture; fewer than train.train_iters, or the graph is never captured)",
                  static_cast<long long>(kMaxWarmupSteps)));
  } else if (graphs_on_ && c().train.train_iters && *c().train.train_iters >= 1 && warmup >= *c().train.train_iters) {
    note(15,
         strprintf("cuda_graph_warmup_steps %lld >= train_iters %lld: every step runs eagerly and the graph is "
                   "never captured (set model.cuda_graph_warmup_steps below train.train_iters to use it)",
                   static_cast<long long>(warmup), static_cast<long long>(*c().train.train_iters)),
         {"model.cuda_graph_warmup_steps", "train.train_iters"});
  }
}

}  // namespace

ValidationReport validate(const Config& config) { return Validator(config).run(); }

namespace detail {
std::vector<KeyValue> key_values(const Config& config, const std::vector<std::string>& keys) {
  std::vector<KeyValue> out;
  for (const std::string& key : keys) out.push_back({key, format_value(config, key)});
  return out;
}
}  // namespace detail

}  // namespace sg::config
