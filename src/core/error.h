#pragma once
// Errors a user can act on: what failed, where, and how to fix it.
#include <stdexcept>
#include <string>

namespace sg {

// Thrown for every user-facing failure (bad config, bad data, CUDA error). The message is complete:
// callers print what() and exit; they never need to add context the thrower already had.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// SG_CHECK(cond, message-expression): throws sg::Error naming file:line when cond is false.
// SG_REQUIRE(cond, message-expression): the same without file:line, for what a user gave (a flag, a
// prompt): the message names the flag and the fix, and a source location would only be noise.
#define SG_CHECK(cond, msg)                                                                  \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      throw ::sg::Error(std::string(msg) + " [" + __FILE__ + ":" + std::to_string(__LINE__) + \
                        "]");                                                                \
    }                                                                                        \
  } while (0)

#define SG_REQUIRE(cond, msg)                         \
  do {                                                \
    if (!(cond)) throw ::sg::Error(std::string(msg)); \
  } while (0)

}  // namespace sg
