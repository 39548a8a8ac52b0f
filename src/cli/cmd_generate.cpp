// stepgraph generate CHECKPOINT --prompt TEXT [--max-new-tokens N --temperature T --top-k K --top-p P
//                   --seed S --cpu --no-graphs --ignore-eos --tokenizer DIR --prompt-tokens IDS --json --profile]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/kernel_profile.h"
#include "bench/kernel_timer.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/signal_name.h"
#include "core/strings.h"
#include "cuda/device.h"
#include "generate/generator.h"
#include "generate/text_continuation.h"
#include "graph/registry.h"
#include "model/hf_families.h"
#include "reference/sampling.h"

namespace sg::cli {
namespace {

// Seconds between a stop signal and the watchdog's exit: one decoding chunk and the printing; longer when a step is
// measured slower (stop_grace_seconds).
constexpr double kStopGraceSeconds = 30.0;

// The grace for a decoder whose steps take `seconds_per_step`: a chunk (about a second, or one slower step) twice
// over and the printing, and never less than kStopGraceSeconds.
double stop_grace_seconds(double seconds_per_step) {
  return std::max(kStopGraceSeconds, 2.0 * seconds_per_step + 10.0);
}

const graph::StopGraceText kGenerateGraceText{
    .covers = "the decoding step in flight and printing what was generated; a prompt's prefill is not cut short",
    .gives_up = "without printing what was generated"};

// The text as it is, a NUL character included (a byte-level tokenizer decodes token "\x00" to one; printf's %s
// would end the text there and drop the rest of the chunk).
void print_text(const std::string& text) { std::fwrite(text.data(), 1, text.size(), stdout); }

struct GenerateArgs {
  generate::GenerateOptions options;
  std::vector<std::string> prompt_tokens;  // "1,2,3" per prompt
  float temperature = 0.0f;
  int64_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 1234;  // read through seed_number(): CLI11 alone would wrap -1 and saturate 2^64
  bool no_graphs = false;
  bool json = false;
  bool profile = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  for (const auto& part : split(text, ',')) {
    const std::string t = trim(part);
    SG_REQUIRE(!t.empty(), "--prompt-tokens '" + text +
                               "': an empty id between commas (give comma-separated "
                               "non-negative integers, e.g. 1,40,41)");
    char* end = nullptr;
    const long v = std::strtol(t.c_str(), &end, 10);
    SG_REQUIRE(end != nullptr && *end == '\0' && v >= 0 && v <= INT32_MAX,
               "--prompt-tokens: '" + t + "' is not a token id (give comma-separated non-negative integers)");
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

// The flags into options, checked before any file is read: a usage error (exit status 2), with the flag's
// own message and CLI11's "Run with --help" line.
void apply_flags(GenerateArgs& args) {
  generate::GenerateOptions& o = args.options;
  if (o.prompts.empty() && args.prompt_tokens.empty()) {
    throw CLI::ValidationError("--prompt", "give a prompt: --prompt TEXT (or --prompt-tokens IDS)");
  }
  if (!o.prompts.empty() && !args.prompt_tokens.empty()) {
    throw CLI::ValidationError("--prompt",
                               "give the prompt as text (--prompt) or as token ids (--prompt-tokens), "
                               "not both");
  }
  for (size_t i = 0; i < o.prompts.size(); ++i) {
    if (o.prompts[i].empty()) {
      throw CLI::ValidationError("--prompt",
                                 strprintf("%san empty prompt: give some text (the model continues it)",
                                           o.prompts.size() > 1 ? strprintf("(prompt %zu) ", i + 1).c_str() : ""));
    }
  }
  // The tokenizer reads UTF-8: an invalid byte (a Latin-1 terminal, a file in another encoding) would become U+FFFD
  // in the JSON to it, and the model would continue a prompt that is not the one given.
  for (size_t i = 0; i < o.prompts.size(); ++i) {
    const std::string& text = o.prompts[i];
    if (const auto bad = generate::first_invalid_utf8(text)) {
      const std::string which = o.prompts.size() > 1 ? strprintf("(prompt %zu) ", i + 1) : "";
      throw CLI::ValidationError(
          "--prompt",
          strprintf("%s'%s': byte %zu (0x%02X) is not valid UTF-8, the encoding the tokenizer reads; give the "
                    "prompt as UTF-8 (convert a Latin-1 text with `iconv -f latin1 -t utf-8`)",
                    which.c_str(), generate::escaped_excerpt(text, *bad).c_str(), *bad,
                    static_cast<unsigned>(static_cast<unsigned char>(text[*bad]))));
    }
  }
  try {
    for (const auto& list : args.prompt_tokens) o.prompt_tokens.push_back(parse_ids(list));
    o.sampling.temperature = args.temperature;
    o.sampling.top_k = args.top_k;
    o.sampling.top_p = args.top_p;
    o.sampling.seed = args.seed;
    ref::check_sampling_config(o.sampling);
    // Greedy decoding ignores top-k and top-p: asking for them without sampling is a mistake, not a no-op.
    SG_REQUIRE(o.sampling.temperature > 0.0f || (args.top_k == 0 && args.top_p == 1.0f),
               "--top-k/--top-p shape sampling, and --temperature 0 (the default) decodes greedily; add "
               "--temperature T > 0 to sample, or drop --top-k/--top-p");
  } catch (const Error& e) {
    throw CLI::ValidationError(e.what());
  }
  o.use_graphs = !args.no_graphs;
  if (args.profile && o.force_cpu) {
    throw CLI::ValidationError("--profile",
                               "times the GPU decoder's kernels, and --cpu runs the CPU decoder; drop one");
  }
}

// --profile: CUPTI traces the decoding steps (not the prefill); the table goes to stderr and into the JSON.
struct DecodeProfiler {
  std::unique_ptr<bench::KernelTimer> timer;  // made before the decoder captures its graph (CUPTI must be attached)
  std::vector<bench::ActivityRecord> records;
};

int run_generate_command(GenerateArgs& args) {
  generate::GenerateOptions& o = args.options;
  const bool streaming = !args.json && o.prompts.size() == 1;
  // The prompt is echoed with the first generated text, not before: an error while loading the model or the
  // tokenizer then prints only the error. The generated text is what the tokens add after the prompt (the space
  // between them included, GenerateResult::texts), so prompt + text reads as the model's continuation.
  bool echoed = false;
  const auto echo_prompt = [&] {
    if (echoed) return;
    print_text(o.prompts[0]);
    echoed = true;
  };
  if (streaming) {
    o.on_text = [&](const std::string& text) {
      echo_prompt();
      print_text(text);
      std::fflush(stdout);
    };
  }
  // A stop signal ends the decoding between chunks: what was generated so far is printed (the JSON too), and the
  // exit status says which signal (128 + N), as train's does. A second signal exits at once.
  graph::install_stop_handlers(kStopGraceSeconds, kGenerateGraceText);
  o.on_step_time = [](double seconds_per_step) {
    graph::install_stop_handlers(stop_grace_seconds(seconds_per_step), kGenerateGraceText);
  };
  o.stop_requested = [] { return graph::stop_requested(); };
  DecodeProfiler profiler;
  if (args.profile) {
    SG_REQUIRE(cuda::device_count() > 0, "--profile times the GPU decoder's kernels, and this machine has no GPU");
    profiler.timer = std::make_unique<bench::KernelTimer>();
    o.on_decode_begin = [&profiler] { profiler.timer->begin(/*keep_names=*/true); };
    o.on_decode_end = [&profiler] { profiler.records = profiler.timer->end(); };
  }
  const generate::GenerateResult r = generate::run_generate(o);
  const int64_t steps = r.decode_steps;
  const bench::KernelProfile profile = bench::profile_kernels(profiler.records);
  if (args.json) {
    nlohmann::json j;
    j["model"] = r.model;
    j["backend"] = r.backend;
    j["prompt_tokens"] = r.prompt_tokens;
    j["tokens"] = r.tokens;
    j["texts"] = r.texts;
    j["eos_ids"] = r.eos_ids;
    j["prefill_tokens"] = r.prefill_tokens;
    j["prefill_ms"] = r.prefill_ms;
    j["decode_steps"] = r.decode_steps;
    j["decode_tokens"] = r.decode_tokens;
    j["decode_ms"] = r.decode_ms;
    j["decode_tokens_per_s"] = r.decode_tokens_per_s();
    j["capture_ms"] = r.capture_ms;
    j["stopped_by_signal"] = r.stopped ? nlohmann::json(graph::stop_signal()) : nlohmann::json(nullptr);
    if (args.profile) {
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& row : profile.rows) {
        rows.push_back({{"kernel", row.name},
                        {"launches", row.launches},
                        {"total_ns", row.total_ns},
                        {"longest_ns", row.longest_ns}});
      }
      j["profile"] = {{"steps", steps}, {"busy_ns", profile.summary.busy_ns}, {"kernels", rows}};
    }
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else if (streaming) {
    echo_prompt();  // no text was generated (an end-of-sequence token first)
    std::printf("\n");
  } else {
    for (size_t b = 0; b < r.tokens.size(); ++b) {
      if (r.tokens.size() > 1) std::printf("--- sequence %zu\n", b + 1);
      if (b < r.texts.size()) {
        if (b < o.prompts.size()) print_text(o.prompts[b]);
        print_text(r.texts[b] + "\n");
      } else {
        std::vector<std::string> ids;
        for (int32_t t : r.tokens[b]) ids.push_back(std::to_string(t));
        std::printf("%s\n", join(ids, ",").c_str());
      }
    }
  }
  // The text's last line before the report on stderr, also where both go to one pipe (stdout is block-buffered there).
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n%s\n", r.model.c_str(), r.backend.c_str());
  std::fprintf(
      stderr, "prefill: %lld prompt tokens in %.1f ms | decode: %lld tokens in %lld steps, %.1f ms = %.1f tokens/s%s\n",
      static_cast<long long>(r.prefill_tokens), r.prefill_ms, static_cast<long long>(r.decode_tokens),
      static_cast<long long>(r.decode_steps), r.decode_ms, r.decode_tokens_per_s(),
      r.capture_ms >= 0 ? strprintf(" (the first step captured the graph: %.1f ms)", r.capture_ms).c_str() : "");
  if (args.profile && steps > 0) {
    std::fprintf(stderr, "%s",
                 bench::format_kernel_profile(profile, steps, "decoding step", r.decode_ms / static_cast<double>(steps))
                     .c_str());
    std::fprintf(stderr, "(measured under CUPTI tracing, which adds host time to eager launches)\n");
  } else if (args.profile) {
    std::fprintf(stderr, "--profile: no decoding step ran (every sequence ended at its first token)\n");
  }
  if (r.stopped) {
    std::fprintf(stderr, "stopped by %s: the tokens above are those generated before it\n",
                 signal_name(graph::stop_signal()).c_str());
  }
  return graph::exit_code_for_stop();
}

const CommandRegistration kRegistration{
    "generate", 35, [](CLI::App& app, int& exit_code) {
      auto args = std::make_shared<GenerateArgs>();
      CLI::App* cmd = app.add_subcommand(
          "generate",
          "Generate text from a checkpoint (a stepgraph checkpoint folder, or a Hugging Face " SG_HF_FAMILIES
          " folder) with a KV cache: greedy when --temperature is 0, else sampled (top-k, top-p) with a seeded "
          "Philox stream. On a GPU the bf16 decoder runs every layer kind (attention, MLP, MoE, Mamba), its "
          "decoding step as one CUDA graph; without a GPU, or with --cpu, the CPU fp32 decoder runs. The tokenizer is "
          "the checkpoint's tokenizer.json (Hugging Face tokenizers, through python3). Prints the text "
          "and tokens/s. Exit status: 0 generated, 1 an error (checkpoint, tokenizer, memory), 2 a usage error.");
      cmd->add_option("checkpoint", args->options.checkpoint,
                      "checkpoint directory (its latest iteration), an iter_N folder, or a Hugging Face " SG_HF_FAMILIES
                      " folder")
          ->required();
      // One value a flag (CLI11 would take every following word): a prompt's unquoted words or the checkpoint after
      // it would otherwise become more prompts.
      cmd->add_option("--prompt", args->options.prompts,
                      "prompt text (quote it: one word after the flag); repeat the flag for a batch of prompts")
          ->allow_extra_args(false);
      cmd->add_option("--prompt-tokens", args->prompt_tokens,
                      "a prompt as comma-separated token ids instead of text; repeat the flag for a batch")
          ->allow_extra_args(false);
      cmd->add_option(
             "--max-new-tokens", args->options.max_new_tokens,
             "tokens to generate per prompt (default 64); with LongRoPE (Phi-3.5, Phi-4-mini) the longest prompt plus "
             "this picks the factor list: the long one past the folder's original_max_position_embeddings")
          ->check(positive_number());
      cmd->add_option("--temperature", args->temperature, "0 = greedy (default); 1e-5 or more samples");
      cmd->add_option("--top-k", args->top_k, "sample among the k most likely tokens (0 = all, default)");
      cmd->add_option("--top-p", args->top_p,
                      "sample from the smallest set holding this probability (1 = off, default)");
      cmd->add_option("--seed", args->seed, "seed of the sampling draws (default 1234)")->check(seed_number());
      cmd->add_option("--tokenizer", args->options.tokenizer_dir, "tokenizer folder (default: the checkpoint's)");
      cmd->add_flag("--cpu", args->options.force_cpu,
                    "use the CPU fp32 decoder even when a GPU is present (slow; it runs every shape)");
      cmd->add_flag("--no-graphs", args->no_graphs, "GPU: run every decoding step eagerly");
      cmd->add_flag("--ignore-eos", args->options.ignore_eos, "always generate --max-new-tokens tokens");
      cmd->add_flag("--json", args->json, "print the result (token ids, text, timings) as JSON");
      cmd->add_flag("--profile", args->profile,
                    "GPU: trace the decoding steps with CUPTI and print each kernel's time per step (stderr; with "
                    "--json also under \"profile\")");
      cmd->callback([args, &exit_code] {
        apply_flags(*args);
        exit_code = run_generate_command(*args);
      });
    }};

}  // namespace
}  // namespace sg::cli
