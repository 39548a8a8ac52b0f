#include "reference/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {

const char* moe_score_function_name(MoeScoreFunction f) {
  switch (f) {
    case MoeScoreFunction::softmax: return "softmax";
    case MoeScoreFunction::sigmoid: return "sigmoid";
    case MoeScoreFunction::sqrtsoftplus: return "sqrtsoftplus";
  }
  return "?";
}

void check_moe_routing(const MoeRouting& r, const char* op) {
  SG_CHECK(r.T >= 0, strprintf("%s: T=%lld tokens must be >= 0", op, (long long)r.T));
  SG_CHECK(r.E >= 1 && r.E <= kMoeMaxExperts,
           strprintf("%s: num_moe_experts=%lld is outside [1, %lld]", op, (long long)r.E, (long long)kMoeMaxExperts));
  SG_CHECK(r.k >= 1 && r.k <= r.E,
           strprintf("%s: moe_router_topk=%lld must be in [1, num_moe_experts=%lld]", op, (long long)r.k,
                     (long long)r.E));
  SG_CHECK(!(r.pre_softmax && r.score_function != MoeScoreFunction::softmax),
           strprintf("%s: moe_router_pre_softmax needs moe_router_score_function softmax, not %s", op,
                     moe_score_function_name(r.score_function)));
  SG_CHECK(std::isfinite(r.scaling_factor) && r.scaling_factor > 0.0f,
           strprintf("%s: moe_router_topk_scaling_factor=%g must be finite and > 0 (1 when unset)", op,
                     (double)r.scaling_factor));
}

void check_moe_router_losses(const MoeRouterLosses& l, int64_t T, const char* op) {
  SG_CHECK(l.aux_coeff >= 0.0f && l.z_coeff >= 0.0f,
           strprintf("%s: moe_aux_loss_coeff=%g and moe_z_loss_coeff=%g must be >= 0", op, (double)l.aux_coeff,
                     (double)l.z_coeff));
  SG_CHECK(l.aux_group_tokens >= 0 && (l.aux_group_tokens == 0 || T % l.aux_group_tokens == 0),
           strprintf("%s: the load-balancing group of %lld tokens (seq_length for seq_aux_loss) must divide the "
                     "%lld tokens of a microbatch",
                     op, (long long)l.aux_group_tokens, (long long)T));
}

namespace {

template <class Real>
Real sigmoid(Real x) {
  return Real(1) / (Real(1) + std::exp(-x));
}

// An elementwise score (sigmoid or sqrtsoftplus), and a gradient g with respect to it taken back through it given the
// score s: g s (1 - s) for sigmoid, g sigmoid(x) / (2 s) for sqrtsoftplus (0 where softplus underflowed, its limit).
template <class Real>
Real elementwise_score(Real x, MoeScoreFunction f) {
  if (f == MoeScoreFunction::sigmoid) return sigmoid(x);
  return std::sqrt(x > Real(20) ? x : std::log1p(std::exp(x)));
}
template <class Real>
double elementwise_score_backward(double g, Real x, Real s, MoeScoreFunction f) {
  if (f == MoeScoreFunction::sigmoid) return g * s * (1.0 - s);
  return s > Real(0) ? g * (static_cast<double>(sigmoid(x)) / (2.0 * static_cast<double>(s))) : 0.0;
}

// NaN sorts below every number, so the selection order is total (as on the GPU).
template <class Real>
Real selection_key(Real v) {
  return std::isnan(v) ? -std::numeric_limits<Real>::infinity() : v;
}

// out[0..k) = the indices of the k largest vals, best first; ties go to the lower index.
template <class Real>
void topk_indices(const Real* vals, int64_t E, int64_t k, int32_t* out) {
  std::vector<bool> taken(E, false);
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      if (taken[e]) continue;
      if (best < 0 || selection_key(vals[e]) > selection_key(vals[best])) best = e;
    }
    taken[best] = true;
    out[j] = static_cast<int32_t>(best);
  }
}

// Softmax of x[0..n) into s, and its logsumexp (fp64 sum).
template <class Real>
double softmax(const Real* x, int64_t n, Real* s) {
  Real m = x[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, x[i]);
  double z = 0.0;
  for (int64_t i = 0; i < n; ++i) z += std::exp(static_cast<double>(x[i] - m));
  for (int64_t i = 0; i < n; ++i) s[i] = static_cast<Real>(std::exp(static_cast<double>(x[i] - m)) / z);
  return static_cast<double>(m) + std::log(z);
}

// The load-balancing scores of one token over all E experts.
template <class Real>
void aux_scores(const Real* x, int64_t E, MoeScoreFunction f, Real* s) {
  if (f == MoeScoreFunction::softmax) {
    softmax(x, E, s);
    return;
  }
  double sum = 0.0;
  for (int64_t e = 0; e < E; ++e) {
    s[e] = elementwise_score(x[e], f);
    sum += s[e];
  }
  for (int64_t e = 0; e < E; ++e) s[e] = static_cast<Real>(s[e] / (sum + 1e-20));
}

// dx[e] += d(sum_e g[e] score[e])/dx[e] for aux_scores.
template <class Real>
void aux_scores_backward(Real* dx, const Real* x, const Real* g, int64_t E, MoeScoreFunction f) {
  std::vector<Real> s(E);
  if (f == MoeScoreFunction::softmax) {
    softmax(x, E, s.data());
    double gs = 0.0;
    for (int64_t e = 0; e < E; ++e) gs += static_cast<double>(g[e]) * s[e];
    for (int64_t e = 0; e < E; ++e) dx[e] += static_cast<Real>(s[e] * (g[e] - gs));
    return;
  }
  double sum = 0.0, gsig = 0.0;
  for (int64_t e = 0; e < E; ++e) {
    s[e] = elementwise_score(x[e], f);
    sum += s[e];
    gsig += static_cast<double>(g[e]) * s[e];
  }
  const double denom = sum + 1e-20;
  for (int64_t e = 0; e < E; ++e) {
    const double dscore = g[e] / denom - gsig / (denom * denom);
    dx[e] += static_cast<Real>(elementwise_score_backward(dscore, x[e], s[e], f));
  }
}

}  // namespace

template <class Real>
void moe_router_forward_generic(int32_t* routing_map, Real* probs, const Real* logits, const Real* expert_bias,
                                const MoeRouting& r) {
  check_moe_routing(r, "moe_router_forward");
  SG_CHECK(expert_bias == nullptr || moe_elementwise_scores(r.score_function),
           "moe_router_forward: moe_router_enable_expert_bias needs moe_router_score_function sigmoid or sqrtsoftplus "
           "(as Megatron)");
  const int64_t E = r.E, k = r.k;
  std::vector<Real> select(E), scores(E);
  for (int64_t t = 0; t < r.T; ++t) {
    const Real* x = logits + t * E;
    int32_t* ids = routing_map + t * k;
    Real* p = probs + t * k;
    if (expert_bias != nullptr) {
      for (int64_t e = 0; e < E; ++e) select[e] = elementwise_score(x[e], r.score_function) + expert_bias[e];
      topk_indices(select.data(), E, k, ids);
    } else {
      topk_indices(x, E, k, ids);
    }
    if (r.score_function == MoeScoreFunction::softmax && r.pre_softmax) {
      softmax(x, E, scores.data());
      for (int64_t j = 0; j < k; ++j) p[j] = scores[ids[j]];
    } else if (r.score_function == MoeScoreFunction::softmax) {
      for (int64_t j = 0; j < k; ++j) select[j] = x[ids[j]];
      softmax(select.data(), k, p);
    } else {
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        p[j] = elementwise_score(x[ids[j]], r.score_function);
        sum += p[j];
      }
      if (k > 1)
        for (int64_t j = 0; j < k; ++j) p[j] = static_cast<Real>(p[j] / (sum + 1e-20));
    }
    for (int64_t j = 0; j < k; ++j) p[j] *= static_cast<Real>(r.scaling_factor);
  }
}

template <class Real>
void moe_router_backward_generic(Real* dlogits, const Real* dprobs, const Real* logits, const int32_t* routing_map,
                                 const MoeRouting& r) {
  check_moe_routing(r, "moe_router_backward");
  const int64_t E = r.E, k = r.k;
  const Real sf = static_cast<Real>(r.scaling_factor);
  std::vector<Real> v(E), q(E);
  for (int64_t t = 0; t < r.T; ++t) {
    const Real* x = logits + t * E;
    const int32_t* ids = routing_map + t * k;
    const Real* dp = dprobs + t * k;
    Real* dx = dlogits + t * E;
    std::fill(dx, dx + E, Real(0));
    if (r.score_function == MoeScoreFunction::softmax && r.pre_softmax) {
      // p_j = sf s[id_j], s = softmax(x): dx = s (g - <g, s>) with g = sf dp scattered to the ids.
      softmax(x, E, q.data());
      std::vector<Real> g(E, Real(0));
      for (int64_t j = 0; j < k; ++j) g[ids[j]] = sf * dp[j];
      double gs = 0.0;
      for (int64_t e = 0; e < E; ++e) gs += static_cast<double>(g[e]) * q[e];
      for (int64_t e = 0; e < E; ++e) dx[e] = static_cast<Real>(q[e] * (g[e] - gs));
    } else if (r.score_function == MoeScoreFunction::softmax) {
      // p_j = sf q_j, q = softmax over the chosen logits: dx[id_j] = q_j (sf dp_j - sum_i q_i sf dp_i).
      for (int64_t j = 0; j < k; ++j) v[j] = x[ids[j]];
      softmax(v.data(), k, q.data());
      double qd = 0.0;
      for (int64_t j = 0; j < k; ++j) qd += static_cast<double>(q[j]) * sf * dp[j];
      for (int64_t j = 0; j < k; ++j) dx[ids[j]] = static_cast<Real>(q[j] * (sf * dp[j] - qd));
    } else {
      // p_j = sf s_j / (S + eps) (k > 1) or sf s_j (k = 1), s = score(x): dx = ds back through the score.
      double S = 0.0, dps = 0.0;
      for (int64_t j = 0; j < k; ++j) {
        v[j] = elementwise_score(x[ids[j]], r.score_function);
        S += v[j];
        dps += static_cast<double>(dp[j]) * v[j];
      }
      const double denom = S + 1e-20;
      for (int64_t j = 0; j < k; ++j) {
        const double ds = k > 1 ? sf * (dp[j] / denom - dps / (denom * denom)) : static_cast<double>(sf) * dp[j];
        dx[ids[j]] = static_cast<Real>(elementwise_score_backward(ds, x[ids[j]], v[j], r.score_function));
      }
    }
  }
}

void moe_count_experts(int32_t* counts, const int32_t* routing_map, int64_t T, int64_t k, int64_t E,
                       int64_t group_tokens) {
  SG_CHECK(group_tokens > 0 && T % group_tokens == 0,
           strprintf("moe_count_experts: group of %lld tokens must divide T=%lld", (long long)group_tokens,
                     (long long)T));
  const int64_t G = T / group_tokens;
  std::fill(counts, counts + G * E, 0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = routing_map[t * k + j];
      SG_CHECK(e >= 0 && e < E, strprintf("moe_count_experts: routing_map[%lld] = %d is not an expert id in [0, %lld)",
                                          (long long)(t * k + j), e, (long long)E));
      ++counts[(t / group_tokens) * E + e];
    }
  }
}

template <class Real>
double moe_aux_loss(const Real* logits, const int32_t* counts, const MoeRouting& r, const MoeRouterLosses& l) {
  check_moe_routing(r, "moe_aux_loss");
  check_moe_router_losses(l, r.T, "moe_aux_loss");
  const int64_t E = r.E, G = l.groups(r.T), S = l.group_tokens(r.T);
  if (r.T == 0) return 0.0;
  std::vector<Real> s(E);
  std::vector<double> score_sum(G * E, 0.0);
  for (int64_t t = 0; t < r.T; ++t) {
    aux_scores(logits + t * E, E, r.score_function, s.data());
    for (int64_t e = 0; e < E; ++e) score_sum[(t / S) * E + e] += s[e];
  }
  double total = 0.0;
  for (int64_t i = 0; i < G * E; ++i) total += counts[i] * score_sum[i];
  return l.aux_coeff * static_cast<double>(E) / (static_cast<double>(r.k) * S * S) * total / G;
}

template <class Real>
void moe_aux_loss_backward(Real* dlogits, const Real* logits, const int32_t* counts, const MoeRouting& r,
                           const MoeRouterLosses& l, double grad_scale) {
  check_moe_routing(r, "moe_aux_loss_backward");
  check_moe_router_losses(l, r.T, "moe_aux_loss_backward");
  const int64_t E = r.E, G = l.groups(r.T), S = l.group_tokens(r.T);
  if (r.T == 0) return;
  const double a = grad_scale * l.aux_coeff * static_cast<double>(E) / (static_cast<double>(r.k) * S * S * G);
  std::vector<Real> g(E);
  for (int64_t t = 0; t < r.T; ++t) {
    for (int64_t e = 0; e < E; ++e) g[e] = static_cast<Real>(a * counts[(t / S) * E + e]);
    aux_scores_backward(dlogits + t * E, logits + t * E, g.data(), E, r.score_function);
  }
}

template <class Real>
double moe_z_loss(const Real* logits, const MoeRouting& r, const MoeRouterLosses& l) {
  check_moe_routing(r, "moe_z_loss");
  if (r.T == 0) return 0.0;
  std::vector<Real> s(r.E);
  double total = 0.0;
  for (int64_t t = 0; t < r.T; ++t) {
    const double lse = softmax(logits + t * r.E, r.E, s.data());
    total += lse * lse;
  }
  return l.z_coeff * total / static_cast<double>(r.T);
}

template <class Real>
void moe_z_loss_backward(Real* dlogits, const Real* logits, const MoeRouting& r, const MoeRouterLosses& l,
                         double grad_scale) {
  check_moe_routing(r, "moe_z_loss_backward");
  std::vector<Real> s(r.E);
  for (int64_t t = 0; t < r.T; ++t) {
    const double lse = softmax(logits + t * r.E, r.E, s.data());
    const double c = grad_scale * l.z_coeff * 2.0 * lse / static_cast<double>(r.T);
    for (int64_t e = 0; e < r.E; ++e) dlogits[t * r.E + e] += static_cast<Real>(c * s[e]);
  }
}

void moe_expert_bias_update(float* expert_bias, int32_t* step_counts, int64_t E, float rate) {
  int64_t total = 0;
  for (int64_t e = 0; e < E; ++e) total += step_counts[e];
  for (int64_t e = 0; e < E; ++e) {
    // sign(total / E - count) in exact integers.
    const int64_t diff = total - E * static_cast<int64_t>(step_counts[e]);
    const float sign = diff > 0 ? 1.0f : (diff < 0 ? -1.0f : 0.0f);
    expert_bias[e] += sign * rate;
  }
  std::fill(step_counts, step_counts + E, 0);
}

void moe_router_forward(int32_t* routing_map, float* probs, const float* logits, const float* expert_bias,
                        const MoeRouting& r) {
  moe_router_forward_generic<float>(routing_map, probs, logits, expert_bias, r);
}

void moe_router_backward(float* dlogits, const float* dprobs, const float* logits, const int32_t* routing_map,
                         const MoeRouting& r) {
  moe_router_backward_generic<float>(dlogits, dprobs, logits, routing_map, r);
}

#define SG_MOE_ROUTER_INSTANTIATE(Real)                                                                          \
  template void moe_router_forward_generic<Real>(int32_t*, Real*, const Real*, const Real*, const MoeRouting&); \
  template void moe_router_backward_generic<Real>(Real*, const Real*, const Real*, const int32_t*,             \
                                                  const MoeRouting&);                                          \
  template double moe_aux_loss<Real>(const Real*, const int32_t*, const MoeRouting&, const MoeRouterLosses&);  \
  template void moe_aux_loss_backward<Real>(Real*, const Real*, const int32_t*, const MoeRouting&,              \
                                            const MoeRouterLosses&, double);                                   \
  template double moe_z_loss<Real>(const Real*, const MoeRouting&, const MoeRouterLosses&);                    \
  template void moe_z_loss_backward<Real>(Real*, const Real*, const MoeRouting&, const MoeRouterLosses&, double);
SG_MOE_ROUTER_INSTANTIATE(float)
SG_MOE_ROUTER_INSTANTIATE(double)
#undef SG_MOE_ROUTER_INSTANTIATE

}  // namespace sg::ref
