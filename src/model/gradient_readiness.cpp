#include "model/gradient_readiness.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/strings.h"

namespace sg::model {

dist::GradientReadiness gradient_readiness(const ModelLayout& layout) {
  const int64_t N = layout.num_layers();
  const int last = backward_ready_points(N) - 1;
  // The step's own tensors, by offset: each is a block of one tensor.
  std::map<int64_t, int> step_points;
  step_points[layout.offset(layout.lm_head)] = 0;
  step_points[layout.offset(layout.embedding)] = last;  // after the LM head's: a tied head is written twice
  // Every norm's weight gradient is summed from its partial rows by one launch after layer 0's pre-norm
  // backward (TrainStep::microbatch): all are final at the last point.
  for (int64_t i = 0; i <= N; ++i) step_points[layout.offset(layout.norm_before(i))] = last;
  std::vector<dist::GradientSegment> segments;
  for (const ParamTensor& t : layout.tensors()) {
    int point = -1;
    if (const auto it = step_points.find(t.offset); it != step_points.end()) {
      point = it->second;
    } else {
      for (int64_t i = 0; i < N && point < 0; ++i) {
        const std::string& prefix = layout.layers[static_cast<size_t>(i)].param_prefix;
        if (t.name.compare(0, prefix.size(), prefix) == 0) point = layer_ready_point(N, i);
      }
    }
    SG_CHECK(point >= 0, strprintf("parameter '%s' is neither the step's nor named after a layer (its prefix): the "
                                   "data-parallel reducer cannot tell when its gradient is final",
                                   t.name.c_str()));
    segments.push_back({{t.offset, t.numel}, point});
  }
  std::sort(segments.begin(), segments.end(), [](const dist::GradientSegment& a, const dist::GradientSegment& b) {
    return a.range.begin < b.range.begin;
  });
  return {backward_ready_points(N), std::move(segments)};
}

}  // namespace sg::model
