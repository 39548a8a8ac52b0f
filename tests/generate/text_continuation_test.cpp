// generate/text_continuation.h: the text generated tokens add after a prompt, and the UTF-8 check of a
// prompt.
//   * continuation_text: decode(prompt + generated) past decode(prompt), so the space a SentencePiece
//     decoder puts between prompt and continuation is kept; a byte-level decode (plain concatenation)
//     gives exactly decode(generated); when decode(prompt) is not a prefix, the text starts where the two
//     agree, on a whole character, and says so;
//   * first_invalid_utf8: the offset of the first byte outside well-formed UTF-8 (RFC 3629), or none;
//   * escaped_excerpt: invalid bytes and control characters as \xNN, UTF-8 kept.
#include "generate/text_continuation.h"

#include <gtest/gtest.h>

#include <string>

namespace sg::generate {
namespace {

TEST(ContinuationText, KeepsTheSpaceAfterThePrompt) {
  // A Metaspace decoder: "▁The ▁river" -> "The river"; with "▁156m ▁flour" after them -> "The river 156m flour";
  // the generated tokens alone decode to "156m flour" (the leading "▁" dropped).
  const Continuation c = continuation_text("The river", "The river 156m flour");
  EXPECT_EQ(c.text, " 156m flour");
  EXPECT_FALSE(c.prompt_rewritten);
  EXPECT_EQ(continuation_text("The river", "The river").text, "");  // nothing generated (or only EOS)
}

TEST(ContinuationText, ByteLevelIsTheGeneratedDecode) {
  // A byte-level decode is the concatenation of the tokens' bytes: the continuation is decode(generated).
  const std::string prompt = "caf\xC3\xA9 au";
  const std::string generated = " lait \xE2\x82\xAC";
  const Continuation c = continuation_text(prompt, prompt + generated);
  EXPECT_EQ(c.text, generated);
  EXPECT_FALSE(c.prompt_rewritten);
}

TEST(ContinuationText, APromptEndingInsideACharacter) {
  // --prompt-tokens ending with the first byte of "é" (C3 A9): alone it decodes to U+FFFD, with the next token to
  // "é". The text starts at that character, and the rule is reported.
  const Continuation c = continuation_text("caf\xEF\xBF\xBD", "caf\xC3\xA9 noir");
  EXPECT_EQ(c.text, "\xC3\xA9 noir");
  EXPECT_TRUE(c.prompt_rewritten);
  // Two decodes that share the first byte of different characters ("é" C3 A9, "è" C3 A8): never half a character.
  const Continuation d = continuation_text("x\xC3\xA9", "x\xC3\xA8y");
  EXPECT_EQ(d.text, "\xC3\xA8y");
  EXPECT_TRUE(d.prompt_rewritten);
  // A decoder that joins across the boundary (a clean-up): from where the two agree.
  const Continuation e = continuation_text("it '", "it's fine");
  EXPECT_EQ(e.text, "'s fine");
  EXPECT_TRUE(e.prompt_rewritten);
}

TEST(FirstInvalidUtf8, FindsTheFirstBadByte) {
  EXPECT_EQ(first_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("The river"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("caf\xE9"), 3u);                    // Latin-1 é
  EXPECT_EQ(first_invalid_utf8("ab\xE9z"), 2u);
  EXPECT_EQ(first_invalid_utf8("ok \xC3"), 3u);                    // truncated at the end
  EXPECT_EQ(first_invalid_utf8("\xE2\x82x"), 0u);                  // truncated inside
  EXPECT_EQ(first_invalid_utf8("a\x80"), 1u);                      // a lone continuation byte
  EXPECT_EQ(first_invalid_utf8("\xC0\xAF"), 0u);                   // overlong "/"
  EXPECT_EQ(first_invalid_utf8("\xE0\x80\xAF"), 0u);               // overlong
  EXPECT_EQ(first_invalid_utf8("\xF0\x80\x80\xAF"), 0u);           // overlong
  EXPECT_EQ(first_invalid_utf8("x\xED\xA0\x80"), 1u);              // a surrogate (U+D800)
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);           // past U+10FFFF
  EXPECT_EQ(first_invalid_utf8("\xFF"), 0u);
  EXPECT_EQ(first_invalid_utf8("\xC3\xA9\xC3\xA9\xE9"), 4u);
}

TEST(EscapedExcerpt, ShowsBadBytesAsHex) {
  EXPECT_EQ(escaped_excerpt("caf\xE9", 3), "caf\\xE9");
  EXPECT_EQ(escaped_excerpt("caf\xC3\xA9\n\x01", 0), "caf\xC3\xA9\\x0A\\x01");
  const std::string long_text = std::string(100, 'a') + "\xE9" + std::string(100, 'b');
  const std::string e = escaped_excerpt(long_text, 100, 20);
  EXPECT_EQ(e, "..." + std::string(10, 'a') + "\\xE9" + std::string(9, 'b') + "...");
  // The window never starts inside a character.
  const std::string u = escaped_excerpt(std::string(10, 'a') + "\xC3\xA9" + "\xE9" + std::string(10, 'b'), 12, 2);
  EXPECT_EQ(u.rfind("...\xC3\xA9", 0), 0u) << u;
}

}  // namespace
}  // namespace sg::generate
