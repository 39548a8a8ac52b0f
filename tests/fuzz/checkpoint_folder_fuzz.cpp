// libFuzzer harness: a stepgraph checkpoint folder as checkpoint.load resolves and verifies it
// (checkpoint/checkpoint_dir.h): DIR/latest_checkpointed_iteration.txt, DIR/iter_0000100/train_state.json (its own
// CRC-32C, the iteration, the data position, the RNG state, the file_checksums it records) and the recorded files.
// Input: train_state.json, then (after a "\n=====\n" line) the latest file's text when there is one. A
// train_state.json that parses is also tried sealed again (its crc32c recomputed), so the fuzzer reaches the field
// checks behind the checksum.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/train_state.h"
#include "fuzz_util.h"

namespace {

void verify(const std::filesystem::path& root) {
  sg::fuzz::expect_sg_errors("checkpoint_folder_fuzz", [&] {
    const sg::checkpoint::CheckpointFolder folder = sg::checkpoint::find_checkpoint_folder(root.string());
    const sg::checkpoint::TrainState state =
        sg::checkpoint::verify_checkpoint_folder(folder.path, {.what = "checkpoint.load"});
    (void)state.to_json();
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& root = sg::fuzz::scratch_dir("checkpoint_folder");
  sg::fuzz::clear(root);
  const auto parts = sg::fuzz::split_parts(data, size, 2);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const bool has_latest = text.find("\n=====\n") != std::string_view::npos;
  const std::filesystem::path iter = root / "iter_0000100";
  sg::fuzz::write_file(iter / "config.json", "{\"model_type\": \"llama\"}\n");
  if (has_latest) sg::fuzz::write_file(root / "latest_checkpointed_iteration.txt", parts[1]);
  sg::fuzz::write_file(iter / "train_state.json", parts[0]);
  verify(root);

  nlohmann::json j = nlohmann::json::parse(parts[0], nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains(sg::checkpoint::kStateChecksumKey)) {
    sg::checkpoint::seal_train_state_json(j);
    sg::fuzz::write_file(iter / "train_state.json", j.dump(2));
    verify(root);
  }
  return 0;
}
