// What `generate` makes of its tokenizer process's answers: a reply as tools/tokenizer_server.py's protocol
// defines it, or an sg::Error naming the line (never a JSON exception escaping). The server is stood in for by a
// shell script run as $STEPGRAPH_PYTHON that writes fixed lines.
#include "generate/tokenizer_process.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_dir.h"

namespace sg::generate {
namespace {

// A stand-in server: writes `ready`, then for each request line the next of `answers`, then waits for its input
// to close (as the real one does).
class FakeServer {
 public:
  FakeServer(const std::string& ready, const std::vector<std::string>& answers) : dir_("fake_tokenizer_server") {
    const std::string script = dir_.str() + "/python";
    std::ofstream out(script);
    out << "#!/bin/sh\nprintf '%s\\n' '" << ready << "'\n";
    for (const std::string& a : answers) out << "read -r request\nprintf '%s\\n' '" << a << "'\n";
    out << "cat >/dev/null\n";
    out.close();
    ::chmod(script.c_str(), 0755);
    ::setenv("STEPGRAPH_PYTHON", script.c_str(), 1);
    ::setenv("STEPGRAPH_TOOLS", STEPGRAPH_SOURCE_DIR "/tools", 1);
  }
  ~FakeServer() {
    ::unsetenv("STEPGRAPH_PYTHON");
    ::unsetenv("STEPGRAPH_TOOLS");
  }
  std::string tokenizer_dir() const { return dir_.str(); }

 private:
  test::ScratchDir dir_;
};

std::string start_error(const std::string& ready) {
  FakeServer server(ready, {});
  try {
    TokenizerProcess process(server.tokenizer_dir());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerProcess, AReadyLineIsReadWithItsVocabularyAndEos) {
  FakeServer server(R"({"ready": true, "vocab_size": 300, "eos_token": "</s>", "eos_id": 2})", {R"({"ids": [5, 7]})"});
  TokenizerProcess process(server.tokenizer_dir());
  EXPECT_EQ(process.vocab_size(), 300);
  EXPECT_EQ(process.eos_id(), 2);
  EXPECT_EQ(process.encode("x"), (std::vector<int32_t>{5, 7}));
}

TEST(TokenizerProcess, ANullEosIsNoEos) {
  FakeServer server(R"({"ready": true, "vocab_size": 300, "eos_token": null, "eos_id": null})", {});
  TokenizerProcess process(server.tokenizer_dir());
  EXPECT_FALSE(process.eos_id().has_value());
}

TEST(TokenizerProcess, TheServersErrorIsShownWithTheFolder) {
  const std::string e = start_error(R"({"error": "no tokenizer.json in the folder"})");
  EXPECT_NE(e.find("tokenizer "), std::string::npos) << e;
  EXPECT_NE(e.find(": no tokenizer.json in the folder"), std::string::npos) << e;
}

// Before, a number past double's range, a wrong type or a non-object escaped as a nlohmann::json exception.
TEST(TokenizerProcess, AnythingButAReadyLineIsNamedWithTheLine) {
  for (const std::string& ready :
       {std::string("Traceback (most recent call last):"), std::string(R"({"ready": true, "vocab_size": 1e999})"),
        std::string(R"({"ready": true, "vocab_size": "many"})"), std::string(R"({"ready": true})"),
        std::string(R"({"ready": true, "vocab_size": 300, "eos_id": 4294967296})"), std::string(R"({"error": 5})"),
        std::string(R"({"ready": true, "vocab_size": 18446744073709551615})"),
        std::string(R"({"ready": true, "vocab_size": -3})"), std::string("[1, 2]")}) {
    const std::string e = start_error(ready);
    EXPECT_NE(e.find("answered \"" + ready + "\" where a reply with \"ready\" was expected"), std::string::npos)
        << ready << ": " << e;
  }
}

TEST(TokenizerProcess, ABadEncodeOrDecodeReplyIsNamedWithTheLine) {
  const std::string ready = R"({"ready": true, "vocab_size": 300, "eos_id": 2})";
  for (const std::string& answer :
       {std::string(R"({"ids": ["a"]})"), std::string(R"({"ids": [4294967296]})"),
        std::string(R"({"ids": [18446744073709551615]})"), std::string(R"({"text": "x"})"), std::string("not json")}) {
    FakeServer server(ready, {answer});
    TokenizerProcess process(server.tokenizer_dir());
    try {
      process.encode("x");
      ADD_FAILURE() << answer << ": encoded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("answered \"" + answer + "\" where a reply with \"ids\" was expected"),
                std::string::npos)
          << e.what();
    }
  }
  FakeServer server(ready, {R"({"ids": [1]})"});
  TokenizerProcess process(server.tokenizer_dir());
  try {
    process.decode({1});
    ADD_FAILURE() << "decoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("where a reply with \"text\" was expected"), std::string::npos) << e.what();
  }
}

TEST(TokenizerProcess, AnErrorReplyToARequestIsTheTokenizersMessage) {
  FakeServer server(R"({"ready": true, "vocab_size": 300})", {R"({"error": "token id 999 is out of range"})"});
  TokenizerProcess process(server.tokenizer_dir());
  try {
    process.decode({999});
    ADD_FAILURE() << "decoded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "tokenizer: token id 999 is out of range");
  }
}

}  // namespace
}  // namespace sg::generate
