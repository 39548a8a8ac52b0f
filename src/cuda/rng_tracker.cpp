#include "cuda/rng_tracker.h"

#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::cuda {

namespace {

constexpr char kMagic[8] = {'S', 'G', 'R', 'N', 'G', 'v', '1', '\0'};

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// Bounds-checked little-endian reader; every failure names what was being read.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  void need(size_t n, const char* what) const {
    SG_CHECK(pos_ + n <= bytes_.size(),
             strprintf("RNG state bytes are truncated reading %s (offset %zu, need %zu of %zu bytes)", what,
                       pos_, n, bytes_.size()));
  }
  uint32_t u32(const char* what) {
    need(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* what) {
    need(8, what);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return v;
  }
  std::string str(size_t n, const char* what) {
    need(n, what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  const std::vector<uint8_t>& bytes_;
  size_t pos_ = 0;
};

}  // namespace

RngTracker::RngTracker(uint64_t seed)
    : RngTracker(std::vector<GeneratorSpec>{{kDefaultRng, seed},
                                            {kModelParallelRng, seed + kModelParallelSeedOffset}}) {}

RngTracker::RngTracker(std::vector<GeneratorSpec> generators) {
  SG_CHECK(!generators.empty(), "RngTracker needs at least one generator");
  for (auto& g : generators) {
    SG_CHECK(!g.name.empty(), "RngTracker: a generator needs a name");
    for (const auto& existing : names_) {
      SG_CHECK(existing != g.name, strprintf("RngTracker: generator '%s' is defined twice", g.name.c_str()));
    }
    names_.push_back(std::move(g.name));
    host_.push_back(RngState{g.seed, 0});
  }
}

RngTracker::~RngTracker() {
  if (owns_device_ && device_ != nullptr) {
    try {
      device_free(device_, "RNG states");
    } catch (const std::exception& e) {
      log::error(e.what());  // destroyed inside a step: a bug, but destructors must not throw
    }
  }
}

size_t RngTracker::index(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  const std::string near = closest_match(name, names_);
  throw Error(strprintf("unknown RNG generator '%s' (known: %s)%s", name.c_str(), join(names_, ", ").c_str(),
                        near.empty() ? "" : strprintf("; did you mean '%s'?", near.c_str()).c_str()));
}

RngTracker::Fork::~Fork() {
  if (tracker_ != nullptr) tracker_->pop_fork();
}

RngTracker::Fork RngTracker::fork(const std::string& name) {
  fork_stack_.push_back(index(name));
  return Fork(this);
}

void RngTracker::pop_fork() noexcept {
  if (!fork_stack_.empty()) fork_stack_.pop_back();
}

MemorySlot RngTracker::plan(MemoryPlan& plan, const std::string& name) const {
  return plan.add(name, MemoryCategory::optimizer_state, device_bytes(), alignof(RngState) < 16 ? 16 : alignof(RngState));
}

void RngTracker::bind(RngState* device_states) {
  SG_CHECK(device_states != nullptr, "RngTracker::bind: null device pointer");
  SG_CHECK(device_ == nullptr, "RngTracker::bind: the tracker already has device memory");
  device_ = device_states;
  owns_device_ = false;
  upload();
}

void RngTracker::allocate_device() {
  SG_CHECK(device_ == nullptr, "RngTracker::allocate_device: the tracker already has device memory");
  device_ = static_cast<RngState*>(device_allocate(device_bytes(), "RNG states"));
  owns_device_ = true;
  upload();
}

const RngState* RngTracker::device_state(size_t index) const {
  SG_CHECK(device_ != nullptr,
           "RngTracker has no device memory: plan() + bind() it (or allocate_device()) before launching");
  SG_CHECK(index < names_.size(), strprintf("RNG generator index %zu out of range (%zu)", index, names_.size()));
  return device_ + index;
}

void RngTracker::launch_advance(cudaStream_t stream, uint64_t by) const {
  SG_CHECK(device_ != nullptr, "RngTracker::launch_advance: no device memory bound");
  launch_rng_advance(device_, names_.size(), by, stream);
}

void RngTracker::upload() {
  SG_CHECK(device_ != nullptr, "RngTracker::upload: no device memory bound");
  check_host_sync_allowed("RngTracker::upload");
  SG_CUDA_CHECK(cudaMemcpy(device_, host_.data(), device_bytes(), cudaMemcpyHostToDevice));
}

void RngTracker::download() {
  SG_CHECK(device_ != nullptr, "RngTracker::download: no device memory bound");
  check_host_sync_allowed("RngTracker::download");
  SG_CUDA_CHECK(cudaMemcpy(host_.data(), device_, device_bytes(), cudaMemcpyDeviceToHost));
}

void RngTracker::advance_host(uint64_t by) {
  for (auto& s : host_) s.offset += by;
}

float RngTracker::uniform(size_t generator, uint32_t site, uint64_t index) const {
  const RngState& s = host_.at(generator);
  return rng::philox_uniform(s.seed, s.offset, site, index);
}

uint32_t RngTracker::bits(size_t generator, uint32_t site, uint64_t index) const {
  const RngState& s = host_.at(generator);
  return rng::philox_bits(s.seed, s.offset, site, index);
}

std::vector<uint8_t> RngTracker::serialize_host() const {
  std::vector<uint8_t> out(kMagic, kMagic + sizeof(kMagic));
  put_u32(out, static_cast<uint32_t>(names_.size()));
  for (size_t i = 0; i < names_.size(); ++i) {
    put_u32(out, static_cast<uint32_t>(names_[i].size()));
    out.insert(out.end(), names_[i].begin(), names_[i].end());
    put_u64(out, host_[i].seed);
    put_u64(out, host_[i].offset);
  }
  return out;
}

void RngTracker::deserialize_host(const std::vector<uint8_t>& bytes) {
  Reader in(bytes);
  SG_CHECK(in.str(sizeof(kMagic), "the header") == std::string(kMagic, sizeof(kMagic)),
           "RNG state bytes do not start with the stepgraph header 'SGRNGv1' (not an RNG state, or a "
           "newer format)");
  const uint32_t count = in.u32("the generator count");
  SG_CHECK(count == names_.size(),
           strprintf("RNG state has %u generators, this run has %zu (%s): the checkpoint was written with "
                     "different RNG settings",
                     count, names_.size(), join(names_, ", ").c_str()));
  std::vector<RngState> restored(names_.size());
  std::vector<bool> seen(names_.size(), false);
  for (uint32_t g = 0; g < count; ++g) {
    const uint32_t len = in.u32("a generator name length");
    SG_CHECK(len <= 256, strprintf("RNG state: generator name length %u is implausible (corrupt bytes)", len));
    const std::string name = in.str(len, "a generator name");
    const size_t i = index(name);  // throws for a generator this run does not have
    SG_CHECK(!seen[i], strprintf("RNG state lists generator '%s' twice", name.c_str()));
    seen[i] = true;
    restored[i].seed = in.u64("a seed");
    restored[i].offset = in.u64("an offset");
  }
  SG_CHECK(in.at_end(), "RNG state bytes have trailing data (corrupt or a newer format)");
  host_ = restored;
}

std::vector<uint8_t> RngTracker::save() {
  if (device_ != nullptr) download();
  return serialize_host();
}

void RngTracker::restore(const std::vector<uint8_t>& bytes) {
  deserialize_host(bytes);
  if (device_ != nullptr) upload();
}

}  // namespace sg::cuda
