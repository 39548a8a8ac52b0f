#include "generate/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <set>

#include "checkpoint/hf_import.h"
#include "core/available_memory.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/device.h"
#include "generate/text_continuation.h"
#include "generate/tokenizer_process.h"
#include "model/cpu_decoder.h"
#include "model/gpu_decoder.h"
#include "model/layer_registry.h"

namespace sg::generate {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The tokens up to and including the first EOS.
size_t length_to_eos(const std::vector<int32_t>& tokens, const std::set<int64_t>& eos) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (eos.count(tokens[i]) != 0) return i + 1;
  }
  return tokens.size();
}

std::vector<int32_t> without_eos(std::vector<int32_t> tokens, const std::set<int64_t>& eos) {
  if (!tokens.empty() && eos.count(tokens.back()) != 0) tokens.pop_back();
  return tokens;
}

// New text of a growing decode, held back while it ends inside a multi-byte character (U+FFFD).
class TextStream {
 public:
  explicit TextStream(std::function<void(const std::string&)> sink) : sink_(std::move(sink)) {}
  // `final`: the generation is over, print the rest even if it ends in U+FFFD.
  void update(const std::string& text, bool final = false) {
    if (!sink_) return;
    // Only extensions of what was printed are printed (a decode grows at its end). A decoder that rewrites text
    // already printed (a clean-up across tokens) cannot be followed on a stream: said at the end, not hidden.
    if (final && text.compare(0, printed_.size(), printed_) != 0) {
      log::warn(strprintf("the tokenizer's decoder changed text it had already given (the streamed text ends with "
                          "\"%s\"; the final decode reads \"%s\"): the streamed text stops there; --json prints "
                          "the final text",
                          escaped_excerpt(printed_, printed_.size(), 32).c_str(),
                          escaped_excerpt(text, printed_.size(), 32).c_str()));
      return;
    }
    if (text.size() <= printed_.size() || text.compare(0, printed_.size(), printed_) != 0) return;
    const std::string fresh = text.substr(printed_.size());
    static const std::string kReplacement = "\xEF\xBF\xBD";
    if (!final && fresh.size() >= 3 && fresh.compare(fresh.size() - 3, 3, kReplacement) == 0) return;
    sink_(fresh);
    printed_ = text;
  }

 private:
  std::function<void(const std::string&)> sink_;
  std::string printed_;
};

// --prompt-tokens ids the model has no embedding for: named by the flag (the decoder's own check, reached only by a
// tokenizer that does not fit, says less).
void check_prompt_token_ids(const std::vector<std::vector<int32_t>>& prompts, int64_t vocab_size,
                            const std::string& folder) {
  for (size_t b = 0; b < prompts.size(); ++b) {
    for (const int32_t id : prompts[b]) {
      if (id >= vocab_size) {
        throw Error(
            strprintf("--prompt-tokens: %sid %d is outside the model's vocabulary: %s/config.json has "
                      "vocab_size %lld, so ids run from 0 to %lld",
                      prompts.size() > 1 ? strprintf("prompt %zu has ", b + 1).c_str() : "", id, folder.c_str(),
                      static_cast<long long>(vocab_size), static_cast<long long>(vocab_size - 1)));
      }
    }
  }
}

}  // namespace

GenerateResult run_generate(const GenerateOptions& options) {
  SG_REQUIRE(options.prompts.empty() != options.prompt_tokens.empty(),
             "generate: give the prompt as text (--prompt) or as token ids (--prompt-tokens), not both");
  SG_REQUIRE(options.max_new_tokens > 0,
             strprintf("--max-new-tokens %lld: must be positive", static_cast<long long>(options.max_new_tokens)));
  SG_CHECK(options.chunk_steps > 0 && options.chunk_seconds > 0.0,
           "generate: chunk_steps and chunk_seconds must be positive");
  ref::check_sampling_config(options.sampling);
  GenerateResult result;

  const char* what = "generate CHECKPOINT";
  const std::string folder = checkpoint::resolve_model_folder(options.checkpoint, what);
  const checkpoint::HfModelConfig config = checkpoint::read_hf_config(folder);
  model::ModelSpec spec = config.spec;  // a LongRoPE folder's scaling is set below, for the sequences' length
  // Before the weights are read.
  const DecoderBackend backend =
      choose_decoder_backend(spec,
                             strprintf("%s %s (%s, %s)", what, folder.c_str(), config.architecture.c_str(),
                                       model::describe_stack(spec).c_str()),
                             cuda::device_count(), options.force_cpu);
  // Everything the user may have got wrong (the tokenizer, the prompts, the lengths) is checked before the weights
  // are read: on a large model that read takes minutes.
  // The tokenizer: required for text prompts, used for the output text whenever one is found. Only its absence
  // is optional: a tokenizer.json that is there but does not load (damaged, a server that fails) is an error.
  std::unique_ptr<TokenizerProcess> tokenizer;
  if (!options.prompts.empty() || !options.tokenizer_dir.empty()) {
    tokenizer = std::make_unique<TokenizerProcess>(find_tokenizer_dir(options.tokenizer_dir, folder));
  } else {
    std::string tokenizer_dir;
    try {
      tokenizer_dir = find_tokenizer_dir("", folder);  // throws only when neither folder has tokenizer.json
    } catch (const Error&) {
      log::info(
          strprintf("no tokenizer.json in %s or its parent: the output is token ids (--tokenizer DIR gives "
                    "text)",
                    folder.c_str()));
    }
    if (!tokenizer_dir.empty()) tokenizer = std::make_unique<TokenizerProcess>(tokenizer_dir);
  }
  if (tokenizer && tokenizer->vocab_size() > spec.vocab_size) {
    throw Error(
        strprintf("the tokenizer %s has %lld tokens but the model's vocab_size is %lld: they do not belong "
                  "together",
                  tokenizer->dir().c_str(), static_cast<long long>(tokenizer->vocab_size()),
                  static_cast<long long>(spec.vocab_size)));
  }
  result.prompt_tokens = options.prompt_tokens;
  check_prompt_token_ids(options.prompt_tokens, spec.vocab_size, folder);
  for (const auto& text : options.prompts) result.prompt_tokens.push_back(tokenizer->encode(text));

  std::set<int64_t> eos;
  if (!options.ignore_eos) {
    eos.insert(config.eos_token_ids.begin(), config.eos_token_ids.end());
    if (tokenizer && tokenizer->eos_id()) eos.insert(*tokenizer->eos_id());
  }
  result.eos_ids.assign(eos.begin(), eos.end());

  model::DecodeSpec decode;
  decode.batch = static_cast<int64_t>(result.prompt_tokens.size());
  for (const auto& p : result.prompt_tokens) {
    decode.max_prompt_tokens = std::max<int64_t>(decode.max_prompt_tokens, static_cast<int64_t>(p.size()));
  }
  decode.max_new_tokens = options.max_new_tokens;
  if (tokenizer) decode.sample_vocab = tokenizer->vocab_size();  // never an id it cannot decode
  decode.sampling = options.sampling;
  model::check_decode_request(spec, decode, result.prompt_tokens);
  if (config.sliding_window && decode.capacity() > *config.sliding_window) {
    throw Error(strprintf(
        "prompt + --max-new-tokens = %lld positions exceed %s's sliding_window = %lld (%s): past that many tokens its "
        "attention sees only the last %lld, stepgraph's decoders every earlier one, so the text would not be the "
        "model's; shorten the prompt or lower --max-new-tokens to %lld positions in all",
        static_cast<long long>(decode.capacity()), config.architecture.c_str(),
        static_cast<long long>(*config.sliding_window), config.path.c_str(),
        static_cast<long long>(*config.sliding_window), static_cast<long long>(*config.sliding_window)));
  }
  if (spec.longrope.enabled()) {
    // One set of factors for every position of every sequence, as in a forward pass of transformers over the whole
    // sequence. Its generate starts with the short factors and, once a sequence passes the original context,
    // recomputes it with the long ones; stepgraph uses the long ones from the start where a sequence can get there.
    const int64_t original = spec.longrope.original_max_position_embeddings;
    const bool long_factors = decode.capacity() > original;
    spec.rope_scaling = spec.longrope.scaling_for(decode.capacity());
    log::info(strprintf(
        "LongRoPE: the %s factors (prompt + --max-new-tokens = %lld positions, original_max_position_embeddings "
        "%lld), attention factor %g%s",
        long_factors ? "long" : "short", static_cast<long long>(decode.capacity()), static_cast<long long>(original),
        spec.longrope.attention_factor,
        long_factors && decode.max_prompt_tokens <= original
            ? "; transformers would use the short ones until a sequence is longer than that"
            : ""));
  }
  if (decode.capacity() > config.max_position_embeddings) {
    log::warn(
        strprintf("prompt + --max-new-tokens = %lld positions exceed the model's max_position_embeddings = "
                  "%lld: the positions past it were never trained",
                  static_cast<long long>(decode.capacity()), static_cast<long long>(config.max_position_embeddings)));
  }

  if (backend == DecoderBackend::cpu) {
    // A large --max-new-tokens would otherwise end in std::bad_alloc or the OOM killer.
    const double cache_bytes = model::CpuDecoder::state_bytes(spec, decode);
    const AvailableHostMemory available = available_host_memory();
    if (!available.source.empty() && cache_bytes > available.bytes) {
      throw Error(
          strprintf("the CPU decoder's KV caches and Mamba states for %lld sequence(s) of %lld positions (the "
                    "prompt plus --max-new-tokens %lld) need %s, but only %s of host memory is available (%s): "
                    "lower --max-new-tokens",
                    static_cast<long long>(decode.batch), static_cast<long long>(decode.capacity()),
                    static_cast<long long>(decode.max_new_tokens), bytes_text(cache_bytes).c_str(),
                    bytes_text(available.bytes).c_str(), available.source.c_str()));
    }
  }

  const model::ModelLayout layout = model::model_layout(spec);
  std::unique_ptr<model::Decoder> decoder;
  model::GpuDecoder* gpu = nullptr;
  if (backend == DecoderBackend::gpu) {
    // Planned and allocated before the weights are read: a cache too large for the GPU is refused now.
    auto g = std::make_unique<model::GpuDecoder>(spec, decode, options.use_graphs);
    gpu = g.get();
    // The weights stay in their mapped files (file-backed pages, no host copy) and are uploaded a chunk at a time;
    // the files are unmapped once the device holds them.
    checkpoint::MappedHfWeights mapped =
        checkpoint::map_hf_weights(folder, layout, checkpoint::WeightSource::model, what);
    result.model = folder + ": " + mapped.description;
    gpu->upload_weights(mapped.view);
    mapped = {};
    decoder = std::move(g);
  } else {
    // The CPU decoder keeps every weight in fp32 host memory: a model larger than the host would otherwise end in
    // std::bad_alloc or the OOM killer.
    const double weight_bytes = static_cast<double>(layout.total()) * sizeof(float);
    const AvailableHostMemory host = available_host_memory();
    if (!host.source.empty() && weight_bytes > host.bytes) {
      throw Error(strprintf(
          "%s %s: its %lld parameters need %s of host memory in fp32 (the CPU decoder keeps every weight there), "
          "but only %s is available (%s)",
          what, folder.c_str(), static_cast<long long>(layout.num_parameters()), bytes_text(weight_bytes).c_str(),
          bytes_text(host.bytes).c_str(), host.source.c_str()));
    }
    std::vector<float> weights;
    result.model =
        folder + ": " + checkpoint::load_hf_weights(folder, layout, weights, checkpoint::WeightSource::model, what);
    if (!options.force_cpu) log::info("no GPU found: generating on the CPU with the fp32 reference decoder");
    decoder = std::make_unique<model::CpuDecoder>(spec, std::move(weights), decode);
  }
  result.backend = decoder->description();

  const int64_t B = decode.batch;
  for (const auto& p : result.prompt_tokens) result.prefill_tokens += static_cast<int64_t>(p.size());
  auto t0 = Clock::now();
  decoder->start(result.prompt_tokens);
  std::vector<std::vector<int32_t>> tokens = decoder->generated();
  result.prefill_ms = ms_since(t0);

  // The text of a sequence: what its generated tokens add after its prompt (text_continuation.h), not the
  // generated tokens decoded alone (a SentencePiece decoder would drop the space after the prompt).
  // A --prompt-tokens id past the tokenizer's vocabulary (a model whose vocab_size is padded) has no text: that
  // prompt's generated tokens are decoded on their own, and generate says so.
  std::vector<std::optional<std::string>> prompt_texts;
  if (tokenizer) {
    for (size_t b = 0; b < result.prompt_tokens.size(); ++b) {
      const auto& p = result.prompt_tokens[b];
      const auto unknown =
          std::find_if(p.begin(), p.end(), [&](int32_t id) { return id < 0 || id >= tokenizer->vocab_size(); });
      if (unknown == p.end()) {
        prompt_texts.push_back(tokenizer->decode(p));
        continue;
      }
      prompt_texts.push_back(std::nullopt);
      log::warn(strprintf("prompt %zu has token id %d, outside the tokenizer's %lld tokens (%s): its generated "
                          "tokens are decoded on their own (a SentencePiece tokenizer then drops a space at their "
                          "start)",
                          b + 1, *unknown, static_cast<long long>(tokenizer->vocab_size()),
                          tokenizer->dir().c_str()));
    }
  }
  bool warned_rewritten = false;
  const auto text_of = [&](size_t b, const std::vector<int32_t>& generated) {
    const std::vector<int32_t> body = without_eos(generated, eos);
    if (!prompt_texts[b]) return tokenizer->decode(body);
    std::vector<int32_t> all = result.prompt_tokens[b];
    all.insert(all.end(), body.begin(), body.end());
    const std::string full = tokenizer->decode(all);
    const std::string& prompt_text = *prompt_texts[b];
    Continuation c = continuation_text(prompt_text, full);
    if (c.prompt_rewritten && !warned_rewritten) {
      warned_rewritten = true;
      log::warn(strprintf(
          "prompt %zu decodes to text ending \"%s\" alone but to \"%s\" once generated tokens follow it (its "
          "last tokens end inside a character, or the decoder joins them with what follows): the generated text "
          "is given from where the two agree",
          b + 1, escaped_excerpt(prompt_text, prompt_text.size(), 24).c_str(),
          escaped_excerpt(full, prompt_text.size(), 24).c_str()));
    }
    return std::move(c.text);
  };

  TextStream stream(B == 1 && tokenizer ? options.on_text : nullptr);
  auto finished = [&] {  // every sequence has produced an EOS
    for (const auto& t : tokens) {
      if (std::none_of(t.begin(), t.end(), [&](int32_t id) { return eos.count(id) != 0; })) return false;
    }
    return true;
  };
  // Decoding in chunks: after each, the host reads the tokens (EOS check, streamed text, a stop). Only the
  // decoder's time counts (not the tokenizer's). The first chunk is one step, which measures a step.
  int64_t done = 1, chunk = 1;
  if (options.on_decode_begin) options.on_decode_begin();
  while (done < decode.max_new_tokens && !finished()) {
    if (options.stop_requested && options.stop_requested()) {
      result.stopped = true;
      break;
    }
    if (tokenizer && B == 1 && options.on_text) stream.update(text_of(0, tokens[0]));
    const int64_t n = std::min(chunk, decode.max_new_tokens - done);
    t0 = Clock::now();
    decoder->decode(n);
    tokens = decoder->generated();
    const double chunk_ms = ms_since(t0);
    result.decode_ms += chunk_ms;
    done += n;
    const double seconds_per_step = chunk_ms / 1e3 / static_cast<double>(n);
    chunk = next_chunk_steps(seconds_per_step, options.chunk_seconds, options.chunk_steps);
    if (options.on_step_time) options.on_step_time(seconds_per_step);
  }
  if (options.on_decode_end) options.on_decode_end();
  result.decode_steps = done - 1;
  if (gpu != nullptr && gpu->graphs().size() > 0) result.capture_ms = gpu->graphs().stats().capture_step_ms;

  // A sequence's first token comes from the prefill; the ones it keeps after it from decoding steps (a step past a
  // sequence's EOS computes a token that is dropped, and does not count).
  for (auto& t : tokens) {
    t.resize(length_to_eos(t, eos));
    result.decode_tokens += static_cast<int64_t>(t.size()) - 1;
  }
  result.tokens = tokens;
  if (tokenizer) {
    for (size_t b = 0; b < tokens.size(); ++b) result.texts.push_back(text_of(b, tokens[b]));
    if (B == 1) stream.update(result.texts[0], /*final=*/true);
  }
  return result;
}

int64_t next_chunk_steps(double seconds_per_step, double chunk_seconds, int64_t max_steps) {
  if (!(seconds_per_step > 0.0)) return max_steps;
  const double fit = std::floor(chunk_seconds / seconds_per_step);
  return fit < 1.0 ? 1 : fit >= static_cast<double>(max_steps) ? max_steps : static_cast<int64_t>(fit);
}

DecoderBackend choose_decoder_backend(const model::ModelSpec& model, const std::string& what, int gpus,
                                      bool force_cpu) {
  if (gpus <= 0 || force_cpu) return DecoderBackend::cpu;
  const std::string refusal = model::gpu_decoder_refusal(model);
  if (refusal.empty()) return DecoderBackend::gpu;
  throw Error(what + ": " + refusal +
              "; add --cpu to generate with the CPU fp32 decoder, which runs every shape, much "
              "slower");
}

}  // namespace sg::generate
