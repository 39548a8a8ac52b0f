#include "train/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/strings.h"
#include "train/tensorboard_event.pb.h"

namespace sg::train {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(strprintf("logger.tensorboard_dir %s: cannot create it: %s", dir.c_str(), ec.message().c_str()));
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  // "tfevents" in the name is what TensorBoard looks for; time, host and pid keep concurrent runs apart.
  path_ = (std::filesystem::path(dir) /
           strprintf("events.out.tfevents.%lld.%s.%d", static_cast<long long>(now_seconds()), host,
                     static_cast<int>(::getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) {
    throw Error(strprintf("logger.tensorboard_dir: cannot create %s: %s", path_.c_str(), std::strerror(errno)));
  }
  tensorboard::Event first;
  first.set_wall_time(now_seconds());
  first.set_file_version("brain.Event:2");
  write_record(first.SerializeAsString());
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardWriter::write_record(const std::string& bytes) {
  std::string header;
  put_u64(header, bytes.size());
  std::string record = header;
  put_u32(record, masked_crc32c(header.data(), header.size()));
  record += bytes;
  put_u32(record, masked_crc32c(bytes.data(), bytes.size()));
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    throw Error(strprintf("cannot write TensorBoard events to %s: %s", path_.c_str(), std::strerror(errno)));
  }
}

void TensorBoardWriter::scalar(const std::string& tag, int64_t step, double value, double wall_time) {
  tensorboard::Event event;
  event.set_wall_time(wall_time > 0.0 ? wall_time : now_seconds());
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  write_record(event.SerializeAsString());
}

void TensorBoardWriter::flush() { std::fflush(file_); }

}  // namespace sg::train
