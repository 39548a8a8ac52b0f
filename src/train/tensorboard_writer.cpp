#include "train/tensorboard_writer.h"

#include <unistd.h>

#include <algorithm>
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
  const std::string base = new_event_file_path(dir);
  // Created exclusively: a name taken (two runs of one process within a microsecond) gets a suffix, never a
  // truncated file.
  for (int suffix = 0; file_ == nullptr; ++suffix) {
    path_ = suffix == 0 ? base : strprintf("%s.%d", base.c_str(), suffix);
    file_ = std::fopen(path_.c_str(), "wbx");
    if (file_ == nullptr && (errno != EEXIST || suffix == 99)) open_failed();
  }
  write_first_record();
}

TensorBoardWriter::TensorBoardWriter(const std::string& file_path, ExactPath) : path_(file_path) {
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) open_failed();
  write_first_record();
}

std::string TensorBoardWriter::new_event_file_path(const std::string& dir) {
  char host[256] = "localhost";
  ::gethostname(host, sizeof(host) - 1);
  host[sizeof(host) - 1] = '\0';
  // "tfevents" in the name is what TensorBoard looks for; time, host and pid keep concurrent runs apart. TensorBoard
  // reads a folder's files in name order, so the time (to the microsecond: a resumed run's file sorts after the
  // file it continues, for its session start to apply) comes first.
  const double now = now_seconds();
  const auto seconds = static_cast<long long>(now);
  const auto micros = std::min(999999LL, static_cast<long long>((now - static_cast<double>(seconds)) * 1e6));
  return (std::filesystem::path(dir) /
          strprintf("events.out.tfevents.%lld.%06lld.%s.%d", seconds, micros, host, static_cast<int>(::getpid())))
      .string();
}

void TensorBoardWriter::open_failed() const {
  throw Error(strprintf("logger.tensorboard_dir: cannot create %s: %s", path_.c_str(), std::strerror(errno)));
}

void TensorBoardWriter::write_first_record() {
  tensorboard::Event first;
  first.set_wall_time(now_seconds());
  first.set_file_version("brain.Event:2");
  try {
    write_record(first.SerializeAsString());
    flush();
  } catch (...) {  // a constructor that throws runs no destructor
    std::fclose(file_);
    file_ = nullptr;
    throw;
  }
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
  errno = 0;
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) fail();
}

// As a metrics.jsonl write failure (train/metrics.cpp): an sg::Error naming the file and the system's reason; the
// trainer stops the run, saves it and exits 1.
void TensorBoardWriter::fail() const {
  const int err = errno;
  throw Error(strprintf("cannot write TensorBoard events file %s (logger.tensorboard_dir): %s%s", path_.c_str(),
                        err ? std::strerror(err) : "write error", err == ENOSPC ? " (the disk is full)" : ""));
}

void TensorBoardWriter::session_start(int64_t first_step) {
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(first_step);
  event.mutable_session_log()->set_status(tensorboard::SessionLog::START);
  write_record(event.SerializeAsString());
  flush();
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

void TensorBoardWriter::flush() {
  // fwrite mostly fills the buffer: a full disk or an I/O error shows here.
  errno = 0;
  if (std::fflush(file_) != 0 || std::ferror(file_)) fail();
}

}  // namespace sg::train
