#include "checkpoint/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/durable_io.h"
#include "core/error.h"
#include "core/strings.h"

namespace sg::checkpoint {

static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

namespace {
// The safetensors library refuses headers above 100 MB; so do we (a corrupt length is caught
// early).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
}  // namespace

const char* dtype_name(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::F32:
      return "F32";
    case TensorDtype::BF16:
      return "BF16";
    case TensorDtype::I32:
      return "I32";
    case TensorDtype::I64:
      return "I64";
    case TensorDtype::F16: return "F16";
  }
  return "?";
}

size_t dtype_size(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::F32:
    case TensorDtype::I32:
      return 4;
    case TensorDtype::BF16:
    case TensorDtype::F16: return 2;
    case TensorDtype::I64:
      return 8;
  }
  return 0;
}

bool parse_dtype(const std::string& name, TensorDtype& out) {
  for (TensorDtype d : {TensorDtype::F32, TensorDtype::BF16, TensorDtype::I32, TensorDtype::I64, TensorDtype::F16}) {
    if (name == dtype_name(d)) {
      out = d;
      return true;
    }
  }
  return false;
}

bool is_floating(TensorDtype dtype) {
  return dtype == TensorDtype::F32 || dtype == TensorDtype::BF16 || dtype == TensorDtype::F16;
}

float float_element(TensorDtype dtype, const void* data, int64_t i) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  if (dtype == TensorDtype::F32) {
    float f = 0.0f;
    std::memcpy(&f, bytes + 4 * i, 4);
    return f;
  }
  SG_CHECK(dtype == TensorDtype::BF16 || dtype == TensorDtype::F16,
           strprintf("float_element: %s is not a floating-point dtype", dtype_name(dtype)));
  uint16_t h = 0;
  std::memcpy(&h, bytes + 2 * i, 2);
  if (dtype == TensorDtype::F16) return f16_bits_to_float(h);
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f = 0.0f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::vector<std::string> parts;
  for (const int64_t d : shape) parts.push_back(std::to_string(d));
  std::string out = "[";  // appended, not "[" + ...: g++ 12 -O3 warns falsely (-Wrestrict) on that
  out += join(parts, ", ");
  out += ']';
  return out;
}

int64_t num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

std::string safetensors_header(std::span<const TensorRef> tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json meta = nlohmann::json::object();
  meta["format"] = "pt";  // transformers refuses safetensors files without it
  for (const auto& [k, v] : metadata) meta[k] = v;
  header["__metadata__"] = meta;
  uint64_t offset = 0;
  for (const TensorRef& t : tensors) {
    SG_CHECK(!t.name.empty() && t.name != "__metadata__",
             strprintf("safetensors: invalid tensor name \"%s\"", t.name.c_str()));
    SG_CHECK(!header.contains(t.name), "safetensors: duplicate tensor name " + t.name);
    for (const int64_t d : t.shape) {
      SG_CHECK(d >= 0, strprintf("safetensors: tensor %s has a negative dimension in %s",
                                 t.name.c_str(), shape_string(t.shape).c_str()));
    }
    const uint64_t nbytes = static_cast<uint64_t>(num_elements(t.shape)) * dtype_size(t.dtype);
    SG_CHECK(t.data != nullptr || nbytes == 0,
             "safetensors: tensor " + t.name + " has no data pointer");
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // 8 + N stays a multiple of 8: aligned tensor data
  const uint64_t n = json.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + json;
}

FileDigest write_safetensors(const std::string& path, std::span<const TensorRef> tensors,
                       const std::map<std::string, std::string>& metadata,
                       const WriteProgressHook& hook) {
  const std::string header = safetensors_header(tensors, metadata);
  uint64_t total = header.size();
  for (const TensorRef& t : tensors) {
    total += static_cast<uint64_t>(num_elements(t.shape)) * dtype_size(t.dtype);
  }
  DurableFileWriter writer(path, total, hook);
  writer.write(header.data(), header.size());
  for (const TensorRef& t : tensors) {
    writer.write(t.data, static_cast<uint64_t>(num_elements(t.shape)) * dtype_size(t.dtype));
  }
  writer.close();
  return {writer.written(), writer.crc32()};
}

// ---------------------------------------------------------------------------------------------

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path, "checkpoint file") {
  const char* p = path.c_str();
  const uint64_t size = file_.size();
  if (size < 8) {
    throw Error(
        strprintf("checkpoint file %s is truncated: %llu bytes, less than the 8-byte header "
                  "length",
                  p, static_cast<unsigned long long>(size)));
  }
  uint64_t n = 0;
  std::memcpy(&n, file_.data(), 8);
  if (n > kMaxHeaderBytes || n > size - 8) {
    throw Error(
        strprintf("checkpoint file %s is truncated or not safetensors: header length %llu, "
                  "file size %llu",
                  p, static_cast<unsigned long long>(n), static_cast<unsigned long long>(size)));
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file_.data() + 8, file_.data() + 8 + n);
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for a number past double (1e999)
    throw Error(
        strprintf("checkpoint file %s: the safetensors header is not valid JSON: %s", p, e.what()));
  }
  if (!header.is_object())
    throw Error(strprintf("checkpoint file %s: the header is not a JSON object", p));
  // Every tensor in a dtype this reader does not know, in one error (not just the first).
  std::vector<std::string> unreadable;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const nlohmann::json& v = it.value();
    TensorDtype ignored{};
    if (it.key() != "__metadata__" && v.is_object() && v.contains("dtype") && v["dtype"].is_string() &&
        !parse_dtype(v["dtype"].get<std::string>(), ignored)) {
      unreadable.push_back(it.key() + " (" + v["dtype"].get<std::string>() + ")");
    }
  }
  if (!unreadable.empty()) {
    std::string msg = strprintf(
        "checkpoint file %s: %zu tensor%s in a dtype stepgraph cannot read (it reads floating-point tensors "
        "in F32, BF16 or F16, and integer tensors in I32 or I64; weights must be floating point): convert the "
        "weights, e.g. with transformers: AutoModelForCausalLM.from_pretrained(DIR, torch_dtype=torch.bfloat16)"
        ".save_pretrained(NEW_DIR)",
        p, unreadable.size(), unreadable.size() == 1 ? " is" : "s are");
    for (const std::string& u : unreadable) msg += "\n  " + u;
    throw Error(msg);
  }
  const uint8_t* data_start = file_.data() + 8 + n;
  const uint64_t data_size = size - 8 - n;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        throw Error(strprintf("checkpoint file %s: __metadata__ is not an object", p));
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          throw Error(strprintf("checkpoint file %s: __metadata__[\"%s\"] is not a string", p,
                                m.key().c_str()));
        }
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const bool well_formed =
        v.is_object() && v.contains("dtype") && v["dtype"].is_string() && v.contains("shape") &&
        v["shape"].is_array() && v.contains("data_offsets") && v["data_offsets"].is_array() &&
        v["data_offsets"].size() == 2 && v["data_offsets"][0].is_number_unsigned() &&
        v["data_offsets"][1].is_number_unsigned();
    if (!well_formed) {
      throw Error(strprintf("checkpoint file %s: tensor %s has a malformed entry %s", p,
                            name.c_str(), v.dump().c_str()));
    }
    Entry e{name, TensorDtype::F32, {}, nullptr, 0};
    const std::string dtype = v["dtype"].get<std::string>();
    const bool known = parse_dtype(dtype, e.dtype);
    SG_CHECK(known, "safetensors: dtype " + dtype + " passed the check above");
    unsigned __int128 elements = 1;
    // The product of the non-zero dimensions must fit int64 too: a zero dimension makes the tensor empty, but
    // num_elements multiplies them all in order ([2^62, 2^62, 0] would overflow before the 0).
    unsigned __int128 nonzero = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        throw Error(
            strprintf("checkpoint file %s: tensor %s has a bad shape %s (expected dimensions from 0 to "
                      "2^63 - 1)",
                      p, name.c_str(), v["shape"].dump().c_str()));
      }
      e.shape.push_back(d.get<int64_t>());
      elements *= d.get<uint64_t>();
      if (elements > (unsigned __int128)size)
        elements = (unsigned __int128)size + 1;  // clamp: too big anyway
      if (d.get<uint64_t>() > 0) nonzero *= d.get<uint64_t>();
      if (nonzero > static_cast<unsigned __int128>(INT64_MAX)) {
        throw Error(
            strprintf("checkpoint file %s: tensor %s has a bad shape %s: its dimensions multiply past "
                      "2^63 - 1",
                      p, name.c_str(), v["shape"].dump().c_str()));
      }
    }
    const uint64_t begin = v["data_offsets"][0].get<uint64_t>();
    const uint64_t end = v["data_offsets"][1].get<uint64_t>();
    const unsigned __int128 expected = elements * dtype_size(e.dtype);
    if (end < begin || static_cast<unsigned __int128>(end - begin) != expected) {
      throw Error(strprintf(
          "checkpoint file %s: tensor %s has data_offsets [%llu, %llu] but %s %s needs "
          "%s bytes",
          p, name.c_str(), static_cast<unsigned long long>(begin),
          static_cast<unsigned long long>(end), dtype.c_str(), shape_string(e.shape).c_str(),
          expected > (unsigned __int128)size ? "more than the file's"
                                             : std::to_string((uint64_t)expected).c_str()));
    }
    if (end > data_size) {
      throw Error(
          strprintf("checkpoint file %s is truncated: tensor %s ends at data byte %llu but the "
                    "file holds %llu data bytes",
                    p, name.c_str(), static_cast<unsigned long long>(end),
                    static_cast<unsigned long long>(data_size)));
    }
    e.data = data_start + begin;
    e.nbytes = end - begin;
    entries_.push_back(std::move(e));
  }
  // Tensors must tile the data section exactly, in offset order (the safetensors rule).
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    return a.data < b.data || (a.data == b.data && a.nbytes < b.nbytes);
  });
  uint64_t cursor = 0;
  for (const Entry& e : entries_) {
    const uint64_t begin = static_cast<uint64_t>(e.data - data_start);
    if (begin != cursor) {
      throw Error(strprintf(
          "checkpoint file %s: tensor %s starts at data byte %llu, expected %llu (tensors "
          "overlap or leave a gap)",
          p, e.name.c_str(), static_cast<unsigned long long>(begin),
          static_cast<unsigned long long>(cursor)));
    }
    cursor += e.nbytes;
  }
  if (cursor != data_size) {
    throw Error(strprintf(
        "checkpoint file %s: tensors cover %llu data bytes but the file holds %llu", p,
        static_cast<unsigned long long>(cursor), static_cast<unsigned long long>(data_size)));
  }
  for (size_t i = 0; i < entries_.size(); ++i) by_name_[entries_[i].name] = i;
}

const SafetensorsFile::Entry* SafetensorsFile::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

std::vector<std::string> SafetensorsFile::differences(std::span<const TensorDest> expected) const {
  std::vector<std::string> diffs;
  std::set<std::string> expected_names;
  for (const TensorDest& d : expected) {
    expected_names.insert(d.name);
    const Entry* e = find(d.name);
    if (e == nullptr) {
      diffs.push_back(strprintf("missing    %s: expected %s %s", d.name.c_str(),
                                dtype_name(d.dtype), shape_string(d.shape).c_str()));
    } else if (e->shape != d.shape || e->dtype != d.dtype) {
      diffs.push_back(strprintf("different  %s: checkpoint %s %s, expected %s %s", d.name.c_str(),
                                dtype_name(e->dtype), shape_string(e->shape).c_str(),
                                dtype_name(d.dtype), shape_string(d.shape).c_str()));
    }
  }
  for (const Entry& e : entries_) {
    if (expected_names.count(e.name) == 0) {
      diffs.push_back(strprintf("unexpected %s: checkpoint %s %s", e.name.c_str(),
                                dtype_name(e.dtype), shape_string(e.shape).c_str()));
    }
  }
  return diffs;
}

void SafetensorsFile::copy_into(std::span<const TensorDest> expected) const {
  for (const TensorDest& d : expected) {
    const Entry* e = find(d.name);
    SG_CHECK(e != nullptr && e->shape == d.shape && e->dtype == d.dtype,
             "copy_into: " + d.name + " was not validated; call differences() first");
    SG_CHECK(d.data != nullptr || e->nbytes == 0, "load: tensor " + d.name + " has no destination");
    if (e->nbytes > 0) std::memcpy(d.data, e->data, e->nbytes);
  }
}

std::string format_differences(const std::string& path, const std::vector<std::string>& diffs) {
  std::string msg = strprintf(
      "checkpoint file %s does not match the model config: %zu tensor%s differ%s "
      "(was it saved with a different model.* config?):",
      path.c_str(), diffs.size(), diffs.size() == 1 ? "" : "s", diffs.size() == 1 ? "s" : "");
  for (const std::string& d : diffs) msg += "\n  " + d;
  return msg;
}

void SafetensorsFile::load_into(std::span<const TensorDest> expected) const {
  const std::vector<std::string> diffs = differences(expected);
  if (!diffs.empty()) throw Error(format_differences(path(), diffs));
  copy_into(expected);
}

}  // namespace sg::checkpoint
