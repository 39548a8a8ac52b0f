#pragma once
// TensorBoard event files (logger.tensorboard_dir): DIR/events.out.tfevents.<seconds>.<micros>.<host>.<pid>, a
// TFRecord stream of Event protocol buffers — each record is its length (uint64 LE), the masked CRC-32C
// of the length, the serialized Event and its masked CRC-32C. The Events are encoded by protobuf-lite
// (Debian's libprotobuf-lite, linked statically) from src/train/tensorboard_event.proto. The first
// record names the file version; then one Event per scalar. Every record is flushed, so a crash loses
// nothing written and TensorBoard shows a running job live. A resumed run starts a new file in the same
// folder; TensorBoard reads them all, and the run's session start (session_start) makes it drop what an earlier
// file holds from the resumed step on.
#include <cstdint>
#include <cstdio>
#include <string>

namespace sg::train {

class TensorBoardWriter {
 public:
  // Creates DIR (and parents) and a new event file in it. sg::Error naming the path when it cannot.
  explicit TensorBoardWriter(const std::string& dir);
  // Writes the events to exactly `file_path` (tests: /dev/full).
  struct ExactPath {};
  TensorBoardWriter(const std::string& file_path, ExactPath);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // A SessionLog START at `first_step`, the first step this run records (1 for a fresh run, the checkpoint's
  // iteration + 1 for a resumed one): TensorBoard then drops the events of earlier files at that step and after
  // (the steps a crashed run did past its last save, an earlier run's in this folder), so no step shows twice.
  void session_start(int64_t first_step);
  // One scalar at `step`; wall_time in seconds since the epoch (0: now). Non-finite values are written
  // as they are (TensorBoard shows NaN/inf). It may stay in the buffer until flush().
  void scalar(const std::string& tag, int64_t step, double value, double wall_time = 0.0);
  // Writes the buffered events out. A failed write (here or in scalar(); a full disk, an I/O error) is an
  // sg::Error naming the file and the reason, never lost silently.
  void flush();
  const std::string& path() const { return path_; }

 private:
  static std::string new_event_file_path(const std::string& dir);
  [[noreturn]] void open_failed() const;  // sg::Error naming path_ and errno's text
  void write_first_record();              // the file version, flushed (closes the file when it throws)
  void write_record(const std::string& bytes);
  [[noreturn]] void fail() const;  // sg::Error naming path_ and errno's text
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace sg::train
