#include "model/param_builder.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/strings.h"

namespace sg::model {

namespace {

int64_t align_up(int64_t n) { return (n + kParamAlignment - 1) / kParamAlignment * kParamAlignment; }

std::string shape_string(const std::vector<int64_t>& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  std::string out = "[";  // appended piecewise: "[" + ... trips a GCC 12 -Wrestrict false positive
  out += join(dims, ", ");
  out += "]";
  return out;
}

int64_t numel_of(const ParamDecl& t) {
  SG_CHECK(!t.shape.empty(), strprintf("parameter '%s' has no shape", t.name.c_str()));
  int64_t n = 1;
  for (int64_t d : t.shape) {
    SG_CHECK(d > 0, strprintf("parameter '%s' has shape %s: every dimension must be positive", t.name.c_str(),
                              shape_string(t.shape).c_str()));
    n *= d;
  }
  return n;
}

}  // namespace

// ---- ParamLayout ----

int64_t ParamLayout::num_parameters() const {
  int64_t n = 0;
  for (const auto& t : tensors_) n += t.numel;
  return n;
}

int64_t ParamLayout::offset(ParamRef block) const {
  SG_CHECK(block.valid() && static_cast<size_t>(block.index) < block_offsets_.size(),
           "ParamLayout::offset: a block reference from another layout (or none)");
  return block_offsets_[static_cast<size_t>(block.index)];
}

int64_t ParamLayout::numel(ParamRef block) const {
  SG_CHECK(block.valid() && static_cast<size_t>(block.index) < block_numels_.size(),
           "ParamLayout::numel: a block reference from another layout (or none)");
  return block_numels_[static_cast<size_t>(block.index)];
}

const ParamTensor& ParamLayout::find(const std::string& name) const {
  std::vector<std::string> names;
  for (const auto& t : tensors_) {
    if (t.name == name) return t;
    names.push_back(t.name);
  }
  const std::string near = closest_match(name, names);
  throw Error(strprintf("no parameter tensor named '%s' in this model%s", name.c_str(),
                        near.empty() ? "" : (" (did you mean '" + near + "'?)").c_str()));
}

std::string ParamLayout::describe() const {
  std::string out;
  for (const auto& t : tensors_) {
    out += strprintf("%-52s %-14s offset %lld%s\n", t.name.c_str(), shape_string(t.shape).c_str(),
                     static_cast<long long>(t.offset), t.weight_decay ? "" : " (no decay)");
  }
  out += strprintf("flat buffer: %lld elements (%lld parameters), weight decay on [0, %lld)\n",
                   static_cast<long long>(total_), static_cast<long long>(num_parameters()),
                   static_cast<long long>(num_decay_));
  return out;
}

bool ParamLayout::is_fp32_block(ParamRef block) const {
  SG_CHECK(block.valid() && static_cast<size_t>(block.index) < fp32_packed_offsets_.size(),
           "ParamLayout::is_fp32_block: a block reference from another layout (or none)");
  return fp32_packed_offsets_[static_cast<size_t>(block.index)] >= 0;
}

int64_t ParamLayout::fp32_packed_offset(ParamRef block) const {
  SG_CHECK(is_fp32_block(block), "ParamLayout::fp32_packed_offset: the block was not declared with fp32_vector()");
  return fp32_packed_offsets_[static_cast<size_t>(block.index)];
}

std::vector<ParamLayout::Fp32Block> ParamLayout::fp32_blocks() const {
  std::vector<Fp32Block> out;
  for (size_t b = 0; b < fp32_packed_offsets_.size(); ++b) {
    if (fp32_packed_offsets_[b] >= 0) out.push_back({block_offsets_[b], block_numels_[b], fp32_packed_offsets_[b]});
  }
  return out;
}

std::vector<int64_t> ParamLayout::fp32_packed_flat_offsets() const {
  std::vector<int64_t> out(static_cast<size_t>(fp32_packed_total_), -1);
  for (const Fp32Block& block : fp32_blocks()) {
    for (int64_t i = 0; i < block.numel; ++i) out[static_cast<size_t>(block.packed_offset + i)] = block.flat_offset + i;
  }
  return out;
}

// ---- ParamBuilder ----

void ParamBuilder::begin_group() {
  if (!blocks_.empty() && blocks_.back().group == group_) ++group_;
}

ParamRef ParamBuilder::add(bool decay, bool fp32, std::vector<ParamDecl> tensors) {
  SG_CHECK(!built_, "ParamBuilder: declaring after build()");
  SG_CHECK(!tensors.empty(), "ParamBuilder: a block needs at least one tensor");
  for (const ParamDecl& t : tensors) {
    numel_of(t);
    SG_CHECK(t.init != ParamInit::custom || t.custom,
             strprintf("parameter '%s' has ParamInit::custom but no init function", t.name.c_str()));
  }
  blocks_.push_back(Block{decay, fp32, group_, std::move(tensors)});
  return ParamRef{static_cast<int32_t>(blocks_.size() - 1)};
}

ParamRef ParamBuilder::matrix(std::vector<ParamDecl> tensors) {
  return add(true, false, std::move(tensors));
}
ParamRef ParamBuilder::matrix(std::string name, std::vector<int64_t> shape, ParamInit init) {
  return add(true, false, {ParamDecl(std::move(name), std::move(shape), init)});
}
ParamRef ParamBuilder::vector(std::vector<ParamDecl> tensors) {
  return add(false, false, std::move(tensors));
}
ParamRef ParamBuilder::vector(std::string name, std::vector<int64_t> shape, ParamInit init) {
  return add(false, false, {ParamDecl(std::move(name), std::move(shape), init)});
}
ParamRef ParamBuilder::fp32_vector(std::vector<ParamDecl> tensors) {
  return add(false, true, std::move(tensors));
}
ParamRef ParamBuilder::fp32_vector(std::string name, std::vector<int64_t> shape, ParamInit init) {
  return add(false, true, {ParamDecl(std::move(name), std::move(shape), init)});
}

ParamLayout ParamBuilder::build() {
  SG_CHECK(!built_, "ParamBuilder::build called twice");
  built_ = true;
  ParamLayout layout;
  layout.block_offsets_.assign(blocks_.size(), 0);
  layout.block_numels_.assign(blocks_.size(), 0);
  // Placement: decayed blocks, then the others, each in declaration order.
  int64_t cursor = 0;
  for (const bool decay : {true, false}) {
    for (size_t b = 0; b < blocks_.size(); ++b) {
      if (blocks_[b].decay != decay) continue;
      int64_t n = 0;
      for (const ParamDecl& t : blocks_[b].tensors) n += numel_of(t);
      layout.block_offsets_[b] = cursor;
      layout.block_numels_[b] = n;
      cursor = align_up(cursor + n);
    }
    if (decay) layout.num_decay_ = cursor;
  }
  layout.total_ = cursor;
  layout.fp32_packed_offsets_.assign(blocks_.size(), -1);
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (!blocks_[b].fp32) continue;
    layout.fp32_packed_offsets_[b] = layout.fp32_packed_total_;
    layout.fp32_packed_total_ = align_up(layout.fp32_packed_total_ + layout.block_numels_[b]);
  }
  // Tensor list: per group, decayed tensors then the others, in declaration order.
  std::vector<size_t> order(blocks_.size());
  for (size_t b = 0; b < order.size(); ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) {
    const Block& x = blocks_[a];
    const Block& y = blocks_[b];
    return x.group != y.group ? x.group < y.group : (x.decay && !y.decay);
  });
  std::set<std::string> names;
  for (const size_t b : order) {
    int64_t at = layout.block_offsets_[b];
    for (ParamDecl& d : blocks_[b].tensors) {
      SG_CHECK(names.insert(d.name).second, strprintf("parameter '%s' is declared twice", d.name.c_str()));
      ParamTensor t;
      t.numel = numel_of(d);
      t.name = std::move(d.name);
      t.shape = std::move(d.shape);
      t.offset = at;
      t.weight_decay = blocks_[b].decay;
      t.init = d.init;
      t.custom = std::move(d.custom);
      at += t.numel;
      layout.tensors_.push_back(std::move(t));
    }
  }
  return layout;
}

}  // namespace sg::model
