#pragma once
// The text that generated tokens add after a prompt, and UTF-8 checks of the prompt text.
//
// A tokenizer's decoder is not a plain concatenation of per-token strings: SentencePiece-style
// decoders (Metaspace: Llama 2, Mistral, T5; Llama 2's Replace + Strip) drop the "▁" (space) that
// starts the decoded text, so the generated tokens decoded on their own lose the space between the
// prompt and their first word ("The river" + "▁156m" would print "The river156m"). As Hugging Face's
// text-generation pipeline does, the generated text is instead
//   decode(prompt + generated) with decode(prompt) cut off its front.
// For a byte-level BPE tokenizer (GPT-2, Llama 3, tools/train_tokenizer.py) this is exactly
// decode(generated) whenever the prompt's tokens decode to whole characters (any text prompt).
//
// The rule when decode(prompt) is not a prefix of decode(prompt + generated) (the decoder rewrote
// the prompt's end once tokens followed it: --prompt-tokens ending inside a multi-byte character,
// which then decodes as U+FFFD alone and as the whole character with the next token; a WordPiece
// clean-up): the text starts where the two decodes stop agreeing, moved back to the start of that
// UTF-8 character, and `prompt_rewritten` says so (generate warns).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sg::generate {

// Byte offset of the first byte of `text` that does not start a well-formed UTF-8 character
// (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF, no truncated sequence);
// nullopt when all of `text` is UTF-8.
std::optional<size_t> first_invalid_utf8(std::string_view text);

// `text` for an error message: valid UTF-8 and printable ASCII as they are, anything else
// (invalid bytes, control characters) as \xNN; at most about `max_bytes` of it around `focus`
// (the rest elided as "...").
std::string escaped_excerpt(std::string_view text, size_t focus, size_t max_bytes = 48);

struct Continuation {
  std::string text;               // what the generated tokens add after the prompt
  bool prompt_rewritten = false;  // decode(prompt) is not a prefix of decode(prompt + generated)
};

// The text after the prompt: `full_text` (decode(prompt + generated)) past `prompt_text`
// (decode(prompt)), by the rule above.
Continuation continuation_text(std::string_view prompt_text, std::string_view full_text);

}  // namespace sg::generate
