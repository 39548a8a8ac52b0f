#pragma once
// `stepgraph generate`: a checkpoint (a Hugging Face folder of a family model/hf_families.h names, or a stepgraph
// checkpoint) and prompts in, generated text out. Loads config.json and the model weights
// (checkpoint/hf_import.h), encodes with the checkpoint's tokenizer (generate/tokenizer_process.h), runs a
// decoder (model/decoder.h: the GPU one with the decoding step as one CUDA graph, or the CPU fp32 one; both
// run every layer kind), stops each sequence at an end-of-sequence token, and measures the throughput.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/spec.h"
#include "reference/sampling.h"

namespace sg::generate {

struct GenerateOptions {
  std::string checkpoint;                           // model folder or checkpoint root
  std::vector<std::string> prompts;                 // text prompts (need a tokenizer) ...
  std::vector<std::vector<int32_t>> prompt_tokens;  // ... or prompts as token ids
  std::string tokenizer_dir;                        // "" = the checkpoint's own tokenizer.json
  int64_t max_new_tokens = 64;
  ref::SamplingConfig sampling;  // greedy when temperature == 0
  bool force_cpu = false;        // the CPU reference decoder even with a GPU
  bool use_graphs = true;        // GPU: capture the decoding step as one graph
  bool ignore_eos = false;       // always generate max_new_tokens
  int64_t chunk_steps = 16;      // the most decoding steps between host checks (EOS, the stream, a stop)
  // The longest a chunk should take: after the first chunk (one step), each holds as many steps as fit this at the
  // measured time a step (next_chunk_steps), so a stop is answered within about this long even on a slow (CPU)
  // decoder; a GPU step fits chunk_steps many times.
  double chunk_seconds = 1.0;
  // Streams the text of sequence 0 as it grows (single prompt with a tokenizer): the new part of texts[0] (see
  // GenerateResult), held back while it ends inside a character; may be empty.
  std::function<void(const std::string& new_text)> on_text;
  // Polled between decoding chunks (a stop signal): true ends the decoding with what was generated so far.
  std::function<bool()> stop_requested;
  // Called after each decoding chunk with the seconds a step took in it: `generate` sizes its stop grace by it.
  std::function<void(double seconds_per_step)> on_step_time;
  // Called just before the first decoding step and just after the last (not around the prefill): the window
  // `generate --profile` traces.
  std::function<void()> on_decode_begin;
  std::function<void()> on_decode_end;
};

struct GenerateResult {
  std::string model;    // "DIR: model.safetensors (BF16)"
  std::string backend;  // the decoder's description
  std::vector<std::vector<int32_t>> prompt_tokens;
  std::vector<std::vector<int32_t>> tokens;  // generated per sequence, up to and including its EOS
  // The text the generated tokens add after the prompt (empty without a tokenizer): decode(prompt + generated)
  // past decode(prompt), so the space a SentencePiece decoder drops at the start of a decode is kept
  // (generate/text_continuation.h has the rule when the two do not line up).
  std::vector<std::string> texts;
  std::vector<int64_t> eos_ids;              // what stopped a sequence
  int64_t prefill_tokens = 0;                // prompt tokens run through the model
  double prefill_ms = 0.0;                   // prefill and the first token
  int64_t decode_steps = 0;                  // decoding steps run (every sequence takes part in each)
  int64_t decode_tokens = 0;                 // the tokens kept from them, all sequences (none past a sequence's EOS)
  double decode_ms = 0.0;
  double capture_ms = -1.0;  // the step that captured the decoding graph; < 0: none
  bool stopped = false;      // stop_requested() ended the decoding before max_new_tokens or EOS
  double decode_tokens_per_s() const { return decode_ms > 0 ? decode_tokens / (decode_ms / 1e3) : 0.0; }
};

// sg::Error naming the argument for anything the user must fix.
GenerateResult run_generate(const GenerateOptions& options);

// The steps of the next decoding chunk: as many as take `chunk_seconds` at `seconds_per_step`, at least 1 and at most
// `max_steps`.
int64_t next_chunk_steps(double seconds_per_step, double chunk_seconds, int64_t max_steps);

enum class DecoderBackend { gpu, cpu };
// The GPU decoder when a GPU is there and --cpu is not given; for a shape it does not take
// (model::gpu_decoder_refusal: hidden_size not a multiple of 8, an attention head_dim over 256) without --cpu,
// sg::Error naming the model (`what`), the reason and the fix: never a silent switch to the much slower CPU.
DecoderBackend choose_decoder_backend(const model::ModelSpec& model, const std::string& what, int gpus,
                                      bool force_cpu);

}  // namespace sg::generate
