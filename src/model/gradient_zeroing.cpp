#include "model/gradient_zeroing.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"

namespace sg::model {

std::vector<ParamRef> first_written_gradients(const ModelLayout& layout,
                                              const std::vector<std::unique_ptr<Layer>>& layers) {
  std::vector<ParamRef> blocks = {layout.lm_head};
  for (const auto& layer : layers) {
    for (const ParamRef ref : layer->first_written_grads()) {
      SG_CHECK(ref.valid(), strprintf("layer %d lists an undeclared block among its first-written gradients",
                                      layer->index()));
      for (const ParamRef seen : blocks) {
        SG_CHECK(seen.index != ref.index,
                 strprintf("layer %d claims to be the first writer of the gradient block at offset %lld, which "
                           "another writer already overwrites in the first microbatch: only one may",
                           layer->index(), static_cast<long long>(layout.offset(ref))));
      }
      blocks.push_back(ref);
    }
  }
  return blocks;
}

std::vector<dist::FlatRange> gradient_zero_ranges(const ModelLayout& layout, const std::vector<ParamRef>& first_written,
                                                  int64_t padded_size) {
  SG_CHECK(padded_size >= layout.total(),
           strprintf("gradient buffer of %lld floats is smaller than the model's %lld parameters",
                     static_cast<long long>(padded_size), static_cast<long long>(layout.total())));
  std::vector<dist::FlatRange> covered;
  for (const ParamRef ref : first_written) covered.push_back({layout.offset(ref), layout.params.numel(ref)});
  std::sort(covered.begin(), covered.end(),
            [](const dist::FlatRange& a, const dist::FlatRange& b) { return a.begin < b.begin; });
  std::vector<dist::FlatRange> zero;
  int64_t at = 0;  // everything before `at` is covered or already in `zero`
  for (const dist::FlatRange& c : covered) {
    SG_CHECK(c.begin >= at, strprintf("first-written gradient blocks overlap at offset %lld",
                                      static_cast<long long>(c.begin)));
    if (c.begin > at) zero.push_back({at, c.begin - at});
    at = c.end();
  }
  if (padded_size > at) zero.push_back({at, padded_size - at});
  return zero;
}

}  // namespace sg::model
