// libFuzzer harness: a safetensors file (checkpoint/safetensors.h), as checkpoint.load, pretrained_checkpoint and
// generate open it, then what the loaders do with its entries: compare them against an expected list, read the
// floats (finite_check) and count the elements. Input: the file's bytes.
#include <cstdint>
#include <vector>

#include "checkpoint/finite_check.h"
#include "checkpoint/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sg::checkpoint;
  const auto& dir = sg::fuzz::scratch_dir("safetensors");
  const std::string path = (dir / "model.safetensors").string();
  sg::fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
  sg::fuzz::expect_sg_errors("safetensors_fuzz", [&] {
    const SafetensorsFile file(path);
    float expected_storage[4] = {};
    const std::vector<TensorDest> expected = {{"w", TensorDtype::F32, {2, 2}, expected_storage}};
    (void)file.differences(expected);
    for (const auto& e : file.tensors()) {
      (void)num_elements(e.shape);
      (void)shape_string(e.shape);
      (void)file.find(e.name);
    }
    (void)find_nonfinite(file);
    if (file.differences(expected).empty()) file.copy_into(expected);
  });
  return 0;
}
