#include "engine/checkpoint_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "search_spaces/file_io.h"

namespace meshtune::engine {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "checkpoint shards are little-endian; add byte swapping to "
              "support this host");

using nlohmann::json;

constexpr char kMagic[8] = {'M', 'S', 'H', 'C', 'K', 'P', 'T', '\0'};
constexpr uint32_t kRecordTag = 0x534e4554;  // "TENS" read little-endian
constexpr uint32_t kFlagTiedEmbedding = 1u;
// Sanity bounds for parsing files that may be corrupt or foreign.
constexpr uint32_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxBlocks = 1u << 20;
constexpr char kFormatName[] = "meshtune-checkpoint";
constexpr int kMetadataVersion = 1;
constexpr char kCorruptHint[] = "load an older checkpoint or save again";

std::string ErrnoText() { return std::strerror(errno); }

template <typename T>
void Put(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Bounds-checked reads from a byte range; `ok` turns false on overrun.
class Cursor {
 public:
  Cursor(const char* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T Get() {
    T value{};
    Read(&value, sizeof(T));
    return value;
  }
  void Read(void* out, size_t bytes) {
    if (!ok_ || bytes > size_ - pos_) {
      ok_ = false;
      return;
    }
    std::memcpy(out, data_ + pos_, bytes);
    pos_ += bytes;
  }
  size_t pos() const { return pos_; }
  bool ok() const { return ok_; }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// Largest global dimension accepted from a file: far above any model, and
// small enough that products of two dimensions cannot overflow int64.
constexpr int64_t kMaxDim = int64_t{1} << 31;

// One or two dimensions, each in [1, kMaxDim].
bool ShapeOk(const std::vector<int64_t>& shape) {
  if (shape.empty() || shape.size() > 2) return false;
  for (int64_t d : shape) {
    if (d < 1 || d > kMaxDim) return false;
  }
  return true;
}

// Whether `b` lies inside a tensor of `shape` (1-D tensors have one
// column) and every dimension is sane.
bool BlockInShape(const SavedBlock& b, const std::vector<int64_t>& shape) {
  if (!ShapeOk(shape)) return false;
  const int64_t rows = shape[0];
  const int64_t cols = shape.size() > 1 ? shape[1] : 1;
  return b.global_row0 >= 0 && b.rows >= 0 && b.global_col0 >= 0 &&
         b.cols >= 0 && b.global_row0 <= rows &&
         b.rows <= rows - b.global_row0 && b.global_col0 <= cols &&
         b.cols <= cols - b.global_col0;
}

// The hint for a checkpoint file that exists but cannot be one.
std::string NotRegularHint() {
  return "the checkpoint is corrupt; " + std::string(kCorruptHint);
}

// As search_spaces::CheckRegularFile words it.
Status NotRegular(const std::string& path, const std::string& what) {
  return Status::InvalidArgument(
      what + " '" + path + "' is not a regular file (a FIFO, socket or device)",
      NotRegularHint());
}

// OK when `path` is a regular file; `missing` when it does not exist; the
// rest as one checkpoint-specific message (search_spaces/file_io.h checks).
Status CheckCheckpointFile(const std::string& path, const std::string& what,
                           const Status& missing) {
  const Status st = search_spaces::CheckRegularFile(path, what);
  if (st.ok()) return st;
  if (st.code() == Status::Code::kNotFound) return missing;
  if (st.code() == Status::Code::kInvalidArgument) {
    // A directory, FIFO, socket or device: file_io's words, our hint.
    return Status::InvalidArgument(st.message(), NotRegularHint());
  }
  return st;
}

// The whole regular file `path` (tracker, metadata.json), never blocking on
// a FIFO; `missing` when it does not exist.
StatusOr<std::string> ReadCheckpointText(const std::string& path,
                                         const std::string& what,
                                         const Status& missing) {
  MESHTUNE_RETURN_IF_ERROR(CheckCheckpointFile(path, what, missing));
  StatusOr<std::string> text = search_spaces::ReadRegularFile(path, what);
  if (!text.ok() && text.status().code() == Status::Code::kInvalidArgument) {
    return NotRegular(path, what);  // swapped for a FIFO after the check
  }
  return text;
}

// `text` for a one-line message: control and non-ASCII bytes as \xNN, at
// most `max_chars` of it.
std::string Printable(const std::string& text, size_t max_chars = 40) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max_chars; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > max_chars) out += "...";
  return out;
}

// Parses a record header (tag through numel) at the cursor; false when it
// is malformed. `remaining` bounds numel so a corrupt count cannot make the
// caller allocate or seek past the file.
bool ParseRecordHeader(Cursor* c, uint64_t remaining, TensorRecord* r) {
  if (c->Get<uint32_t>() != kRecordTag || !c->ok()) return false;
  const uint32_t name_bytes = c->Get<uint32_t>();
  if (!c->ok() || name_bytes == 0 || name_bytes > kMaxNameBytes) return false;
  r->name.resize(name_bytes);
  c->Read(r->name.data(), name_bytes);
  const uint32_t flags = c->Get<uint32_t>();
  r->tied_embedding = (flags & kFlagTiedEmbedding) != 0;
  const uint32_t ndim = c->Get<uint32_t>();
  if (!c->ok() || ndim < 1 || ndim > 2) return false;
  r->global_shape.resize(ndim);
  for (int64_t& d : r->global_shape) d = c->Get<int64_t>();
  const uint32_t nblocks = c->Get<uint32_t>();
  if (!c->ok() || !ShapeOk(r->global_shape) || nblocks > kMaxBlocks) {
    return false;
  }
  r->blocks.resize(nblocks);
  int64_t sum = 0;
  for (SavedBlock& b : r->blocks) {
    b.global_row0 = c->Get<int64_t>();
    b.rows = c->Get<int64_t>();
    b.global_col0 = c->Get<int64_t>();
    b.cols = c->Get<int64_t>();
    if (!c->ok() || !BlockInShape(b, r->global_shape)) return false;
    // Inside a shape of at most 2^62 elements, so no overflow until the
    // sum, which is checked.
    if (__builtin_add_overflow(sum, b.rows * b.cols, &sum)) return false;
  }
  r->numel = c->Get<int64_t>();
  if (!c->ok() || r->numel != sum || r->numel < 0) return false;
  return static_cast<uint64_t>(r->numel) <= remaining / (3 * sizeof(float));
}

// A shard file opened for reading. Only a regular file is opened, and
// without blocking: a FIFO or device named as a shard (or swapped in after
// the type check) would otherwise block open() or read() for ever.
class ShardFile {
 public:
  ShardFile() = default;
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;
  ~ShardFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Open(const std::string& path) {
    MESHTUNE_RETURN_IF_ERROR(CheckCheckpointFile(
        path, "checkpoint shard",
        Status::NotFound("cannot open checkpoint shard " + path,
                         "the checkpoint is incomplete; load an older "
                         "one or save again")));
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd_ < 0 || ::fstat(fd_, &st) != 0) {
      return Status::IoError(
          "cannot open checkpoint shard " + path + ": " + ErrnoText(),
          "check the permissions of the checkpoint directory");
    }
    if (!S_ISREG(st.st_mode)) return NotRegular(path, "checkpoint shard");
    size_ = static_cast<int64_t>(st.st_size);
    return Status::Ok();
  }

  int64_t size() const { return size_; }

  // Reads [offset, offset + bytes) into `out`; false past the end or on a
  // read error.
  bool ReadAt(int64_t offset, int64_t bytes, std::string* out) const {
    if (offset < 0 || bytes < 0 || offset > size_ || bytes > size_ - offset) {
      return false;
    }
    out->resize(static_cast<size_t>(bytes));
    int64_t done = 0;
    while (done < bytes) {
      const ssize_t n =
          ::pread(fd_, out->data() + done, static_cast<size_t>(bytes - done),
                  static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += n;
    }
    return true;
  }

 private:
  int fd_ = -1;
  int64_t size_ = 0;
};

Status WriteAll(int fd, const void* data, size_t bytes,
                const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::IoError("cannot write " + path + ": " + ErrnoText(),
                             "check free space and permissions of the "
                             "checkpoint directory");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

uint64_t Fnv1a64(const void* data, size_t bytes, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Status ShardWriter::Open(const std::string& path, uint32_t num_records) {
  MESHTUNE_CHECK(fd_ < 0);
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    return Status::IoError("cannot create " + path + ": " + ErrnoText(),
                           "check that the checkpoint directory is writable");
  }
  std::string header(kMagic, sizeof(kMagic));
  Put(&header, kShardFormatVersion);
  Put(&header, num_records);
  MESHTUNE_CHECK(static_cast<int64_t>(header.size()) == kShardHeaderBytes);
  offset_ = kShardHeaderBytes;
  return WriteAll(fd_, header.data(), header.size(), path_);
}

Status ShardWriter::Append(TensorRecord* record, const float* param,
                           const float* exp_avg, const float* exp_avg_sq) {
  MESHTUNE_CHECK(fd_ >= 0);
  std::string out;
  Put(&out, kRecordTag);
  Put(&out, static_cast<uint32_t>(record->name.size()));
  out += record->name;
  Put(&out, record->tied_embedding ? kFlagTiedEmbedding : 0u);
  Put(&out, static_cast<uint32_t>(record->global_shape.size()));
  for (int64_t d : record->global_shape) Put(&out, d);
  Put(&out, static_cast<uint32_t>(record->blocks.size()));
  for (const SavedBlock& b : record->blocks) {
    Put(&out, b.global_row0);
    Put(&out, b.rows);
    Put(&out, b.global_col0);
    Put(&out, b.cols);
  }
  Put(&out, record->numel);
  const size_t data_bytes = static_cast<size_t>(record->numel) * sizeof(float);
  for (const float* src : {param, exp_avg, exp_avg_sq}) {
    out.append(reinterpret_cast<const char*>(src), data_bytes);
  }
  record->checksum = Fnv1a64(out.data(), out.size());
  Put(&out, record->checksum);
  record->offset = offset_;
  record->bytes = static_cast<int64_t>(out.size());
  offset_ += record->bytes;
  return WriteAll(fd_, out.data(), out.size(), path_);
}

Status ShardWriter::Finish() {
  MESHTUNE_CHECK(fd_ >= 0);
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    const std::string err = ErrnoText();
    ::close(fd);
    return Status::IoError("cannot fsync " + path_ + ": " + err,
                           "check the file system of the checkpoint "
                           "directory");
  }
  if (::close(fd) != 0) {
    return Status::IoError("cannot close " + path_ + ": " + ErrnoText(),
                           "check free space in the checkpoint directory");
  }
  return Status::Ok();
}

StatusOr<std::vector<TensorRecord>> ReadShardIndex(const std::string& path) {
  ShardFile in;
  MESHTUNE_RETURN_IF_ERROR(in.Open(path));
  const int64_t file_bytes = in.size();
  const Status corrupt = Status::IoError(
      path + ": malformed shard file; the checkpoint is corrupt", kCorruptHint);
  std::string header;
  if (!in.ReadAt(0, kShardHeaderBytes, &header) ||
      std::memcmp(header.data(), kMagic, sizeof(kMagic)) != 0) {
    return corrupt;
  }
  Cursor hc(header.data() + sizeof(kMagic), 8);
  const uint32_t version = hc.Get<uint32_t>();
  const uint32_t num_records = hc.Get<uint32_t>();
  if (version != kShardFormatVersion) {
    return Status::InvalidArgument(
        path + ": shard format version " + std::to_string(version) +
            " is not supported (this build reads version " +
            std::to_string(kShardFormatVersion) + ")",
        "load the checkpoint with the meshtune version that wrote it");
  }
  std::vector<TensorRecord> records;
  int64_t offset = kShardHeaderBytes;
  for (uint32_t i = 0; i < num_records; ++i) {
    // A record header is read in four steps, each length known from the
    // previous one: tag and name length; name, flags and ndim; shape and
    // block count; blocks and numel.
    const int64_t remaining = file_bytes - offset;
    std::string head, part;
    auto read_more = [&](int64_t n) {
      if (n < 0 || static_cast<int64_t>(head.size()) + n > remaining) {
        return false;
      }
      if (!in.ReadAt(offset + static_cast<int64_t>(head.size()), n, &part)) {
        return false;
      }
      head += part;
      return true;
    };
    auto u32_at = [&](size_t pos) {
      uint32_t v = 0;
      std::memcpy(&v, head.data() + pos, 4);
      return v;
    };
    if (!read_more(8)) return corrupt;
    const uint32_t name_bytes = u32_at(4);
    if (name_bytes > kMaxNameBytes || !read_more(name_bytes + 8)) {
      return corrupt;
    }
    const uint32_t ndim = u32_at(head.size() - 4);
    if (ndim < 1 || ndim > 2 || !read_more(8 * ndim + 4)) return corrupt;
    const uint32_t nblocks = u32_at(head.size() - 4);
    if (nblocks > kMaxBlocks || !read_more(32 * int64_t{nblocks} + 8)) {
      return corrupt;
    }
    const int64_t header_bytes = static_cast<int64_t>(head.size());
    Cursor c(head.data(), head.size());
    TensorRecord r;
    if (!ParseRecordHeader(&c, remaining - header_bytes, &r)) return corrupt;
    r.offset = offset;
    r.bytes = header_bytes + 3 * r.numel * 4 + 8;
    if (r.bytes > remaining) return corrupt;
    std::string sum;
    if (!in.ReadAt(offset + r.bytes - 8, 8, &sum)) return corrupt;
    std::memcpy(&r.checksum, sum.data(), 8);
    offset += r.bytes;
    records.push_back(std::move(r));
  }
  if (offset != file_bytes) return corrupt;
  return records;
}

StatusOr<TensorData> ReadTensor(const std::string& path, int64_t offset,
                                int64_t bytes,
                                const std::string& expected_name) {
  ShardFile in;
  MESHTUNE_RETURN_IF_ERROR(in.Open(path));
  std::string buf;
  // Bounds first: `bytes` comes from metadata.json and must not decide an
  // allocation larger than the file.
  if (bytes < 8 || offset < kShardHeaderBytes ||
      !in.ReadAt(offset, bytes, &buf)) {
    return Status::IoError(path + ": tensor " + expected_name +
                               " lies past the end of the file; the "
                               "checkpoint is corrupt",
                           kCorruptHint);
  }
  uint64_t stored = 0;
  std::memcpy(&stored, buf.data() + buf.size() - 8, 8);
  if (Fnv1a64(buf.data(), buf.size() - 8) != stored) {
    return Status::IoError(path + ": checksum mismatch in tensor " +
                               expected_name + "; the checkpoint is corrupt",
                           kCorruptHint);
  }
  TensorData out;
  Cursor c(buf.data(), buf.size() - 8);
  if (!ParseRecordHeader(&c, buf.size() - 8 - c.pos(), &out.record) ||
      c.pos() + 3 * out.record.numel * sizeof(float) != buf.size() - 8) {
    return Status::IoError(path + ": malformed record for tensor " +
                               expected_name + "; the checkpoint is corrupt",
                           kCorruptHint);
  }
  out.record.offset = offset;
  out.record.bytes = bytes;
  out.record.checksum = stored;
  for (std::vector<float>* dst : {&out.param, &out.exp_avg, &out.exp_avg_sq}) {
    dst->resize(static_cast<size_t>(out.record.numel));
    c.Read(dst->data(), dst->size() * sizeof(float));
  }
  return out;
}

std::string IterDirName(int64_t iteration) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "iter_%07" PRId64, iteration);
  return buf;
}

std::string ShardFileName(int tp_rank, int pp_rank) {
  return "shard_tp" + std::to_string(tp_rank) + "_pp" +
         std::to_string(pp_rank) + ".bin";
}

std::string ExpertShardFileName(int ep_rank, int etp_rank, int pp_rank) {
  return "shard_ep" + std::to_string(ep_rank) + "_etp" +
         std::to_string(etp_rank) + "_pp" + std::to_string(pp_rank) + ".bin";
}

StatusOr<int64_t> ReadTracker(const std::string& dir) {
  const std::string path = dir + "/" + kTrackerFileName;
  StatusOr<std::string> file = ReadCheckpointText(
      path, "checkpoint tracker file",
      Status::NotFound(
          "no checkpoint in " + dir + " (" + kTrackerFileName + " is missing)",
          "save a checkpoint there first, or drop --load"));
  if (!file.ok()) return file.status();
  const std::string text = file->substr(0, file->find('\n'));
  char* end = nullptr;
  errno = 0;
  const long long it = std::strtoll(text.c_str(), &end, 10);
  // strtoll skips leading blanks and stops at a NUL: both would let text
  // that is not a number through.
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
      errno != 0 || it < 0 || text.find('\0') != std::string::npos ||
      (*end != '\0' && *end != '\r' && *end != ' ')) {
    return Status::InvalidArgument(
        path + ": expected an iteration number, found '" + Printable(text) +
            "'",
        "write the iteration of an existing iter_NNNNNNN directory into it");
  }
  return static_cast<int64_t>(it);
}

std::string EncodeMetadata(const CheckpointMetadata& m) {
  json shards = json::array();
  for (const ShardIndex& shard : m.shards) {
    json tensors = json::array();
    for (const TensorRecord& r : shard.tensors) {
      json blocks = json::array();
      for (const SavedBlock& b : r.blocks) {
        blocks.push_back({b.global_row0, b.rows, b.global_col0, b.cols});
      }
      // Hex text: JSON readers differ on integers above 2^53.
      char checksum[24];
      std::snprintf(checksum, sizeof(checksum), "%016" PRIx64, r.checksum);
      tensors.push_back({{"name", r.name},
                         {"global_shape", r.global_shape},
                         {"tied_embedding", r.tied_embedding},
                         {"blocks", blocks},
                         {"numel", r.numel},
                         {"offset", r.offset},
                         {"bytes", r.bytes},
                         {"fnv1a64", checksum}});
    }
    if (shard.expert) {
      shards.push_back({{"file", shard.file},
                        {"ep", shard.ep_rank},
                        {"etp", shard.etp_rank},
                        {"pp", shard.pp_rank},
                        {"tensors", tensors}});
    } else {
      shards.push_back({{"file", shard.file},
                        {"tp", shard.tp_rank},
                        {"pp", shard.pp_rank},
                        {"tensors", tensors}});
    }
  }
  const json j = {
      {"format", kFormatName},
      {"format_version", kMetadataVersion},
      {"iteration", m.iteration},
      {"consumed_samples", m.consumed_samples},
      {"model",
       {{"name", m.model_name},
        {"num_layers", m.num_layers},
        {"hidden_size", m.hidden_size},
        {"num_attention_heads", m.num_attention_heads},
        {"num_query_groups", m.num_query_groups},
        {"ffn_hidden_size", m.ffn_hidden_size},
        {"vocab_size", m.vocab_size}}},
      {"parallel",
       {{"tp", m.tp},
        {"pp", m.pp},
        {"vpp", m.vpp},
        {"dp", m.dp},
        {"ep", m.ep},
        {"etp", m.etp},
        {"dist_opt", m.dist_opt}}},
      {"optimizer", {{"steps_taken", m.steps_taken}}},
      {"shards", shards},
  };
  return j.dump(1) + "\n";
}

namespace {

// Bytes of a record with these sizes.
int64_t RecordBytes(int64_t name_bytes, int64_t ndim, int64_t nblocks,
                    int64_t numel) {
  // tag, name length, name, flags, ndim, shape, nblocks, blocks, numel,
  // three float arrays, checksum (the layout in the header comment).
  return 4 + 4 + name_bytes + 4 + 4 + 8 * ndim + 4 + 32 * nblocks + 8 +
         3 * 4 * numel + 8;
}

// A JSON value that must be a whole number in int64 (nlohmann's get<int64_t>
// would truncate 2.5, and converting 1e300 is undefined behaviour).
int64_t WholeValue(const json& v, const std::string& what) {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<uint64_t>() >
           static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))) {
    throw std::runtime_error(what + " is not a whole number");
  }
  return v.get<int64_t>();
}

int64_t WholeNumber(const json& j, const char* key) {
  return WholeValue(j.at(key), std::string("'") + key + "'");
}

std::string Text(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_string()) {
    throw std::runtime_error(std::string("'") + key + "' is not a string");
  }
  return v.get<std::string>();
}

bool Flag(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_boolean()) {
    throw std::runtime_error(std::string("'") + key + "' is not true or false");
  }
  return v.get<bool>();
}

const json& Array(const json& j, const char* key) {
  const json& v = j.at(key);
  if (!v.is_array()) {
    throw std::runtime_error(std::string("'") + key + "' is not an array");
  }
  return v;
}

bool PrintableName(const std::string& s) {
  if (s.empty() || s.size() > kMaxNameBytes) return false;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// What metadata.json says, checked against the format's own invariants, so
// that nothing downstream (the data sampler, the loader's allocations and
// offsets, messages) sees an impossible value. A violation is an
// InvalidArgument naming the field: the file parses but was edited or
// damaged.
Status ValidateMetadata(const std::string& path, const CheckpointMetadata& m) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument(
        path + ": " + what,
        "the metadata was edited or is corrupt; restore it, or load an older "
        "checkpoint");
  };
  if (m.iteration < 0) {
    return bad("iteration " + std::to_string(m.iteration) + " is negative");
  }
  // Every iteration consumes at least one sample (gbs >= 1).
  if (m.consumed_samples < m.iteration) {
    return bad("consumed_samples " + std::to_string(m.consumed_samples) +
               " is below iteration " + std::to_string(m.iteration) +
               " (every iteration consumes at least one sample)");
  }
  if (m.steps_taken < 0) {
    return bad("optimizer steps_taken " + std::to_string(m.steps_taken) +
               " is negative");
  }
  if (!PrintableName(m.model_name)) {
    return bad("the model name is empty, too long or has control characters");
  }
  constexpr int64_t kMaxRanks = int64_t{1} << 20;
  for (const auto& [name, v] : {std::pair<const char*, int64_t>{"tp", m.tp},
                                {"pp", m.pp},
                                {"vpp", m.vpp},
                                {"dp", m.dp},
                                {"ep", m.ep},
                                {"etp", m.etp}}) {
    if (v < 1 || v > kMaxRanks) {
      return bad(std::string("parallel ") + name + " " + std::to_string(v) +
                 " is out of range");
    }
  }
  int64_t dense = 0, expert = 0;
  for (const ShardIndex& shard : m.shards) ++(shard.expert ? expert : dense);
  if (dense != m.tp * m.pp) {
    return bad("it lists " + std::to_string(dense) +
               " shards but tp·pp = " + std::to_string(m.tp * m.pp));
  }
  if (expert != 0 && expert != m.ep * m.etp * m.pp) {
    return bad("it lists " + std::to_string(expert) +
               " expert shards but ep·etp·pp = " +
               std::to_string(m.ep * m.etp * m.pp));
  }
  std::set<std::pair<int, int>> seen;
  std::set<std::tuple<int, int, int>> seen_expert;
  for (const ShardIndex& shard : m.shards) {
    if (shard.expert) {
      const std::string file =
          ExpertShardFileName(shard.ep_rank, shard.etp_rank, shard.pp_rank);
      if (shard.ep_rank < 0 || shard.ep_rank >= m.ep || shard.etp_rank < 0 ||
          shard.etp_rank >= m.etp || shard.pp_rank < 0 ||
          shard.pp_rank >= m.pp ||
          !seen_expert.insert({shard.ep_rank, shard.etp_rank, shard.pp_rank})
               .second) {
        return bad("expert shard (ep " + std::to_string(shard.ep_rank) +
                   ", etp " + std::to_string(shard.etp_rank) + ", pp " +
                   std::to_string(shard.pp_rank) +
                   ") is out of range or listed twice");
      }
      if (shard.file != file) {
        return bad("expert shard (ep " + std::to_string(shard.ep_rank) +
                   ", etp " + std::to_string(shard.etp_rank) + ", pp " +
                   std::to_string(shard.pp_rank) + ") is not named " + file);
      }
    } else if (shard.tp_rank < 0 || shard.tp_rank >= m.tp ||
               shard.pp_rank < 0 || shard.pp_rank >= m.pp ||
               !seen.insert({shard.tp_rank, shard.pp_rank}).second) {
      return bad("shard (tp " + std::to_string(shard.tp_rank) + ", pp " +
                 std::to_string(shard.pp_rank) +
                 ") is out of range or listed twice");
    }
    // The file name is fixed by the position: nothing else (another
    // directory, a device) can be named as a shard.
    if (!shard.expert &&
        shard.file != ShardFileName(shard.tp_rank, shard.pp_rank)) {
      return bad("shard (tp " + std::to_string(shard.tp_rank) + ", pp " +
                 std::to_string(shard.pp_rank) + ") is not named " +
                 ShardFileName(shard.tp_rank, shard.pp_rank));
    }
    for (const TensorRecord& r : shard.tensors) {
      const std::string where = "a tensor of " + shard.file;
      if (!PrintableName(r.name)) {
        return bad(where + " has an empty, too long or unprintable name");
      }
      const std::string tensor = "tensor " + r.name + " in " + shard.file;
      if (!ShapeOk(r.global_shape)) {
        return bad(tensor + " has a shape of " +
                   std::to_string(r.global_shape.size()) +
                   " dimensions or a dimension out of range");
      }
      if (r.blocks.size() > kMaxBlocks) {
        return bad(tensor + " has too many blocks");
      }
      int64_t numel = 0;
      for (const SavedBlock& b : r.blocks) {
        if (!BlockInShape(b, r.global_shape) ||
            __builtin_add_overflow(numel, b.rows * b.cols, &numel)) {
          return bad(tensor + " has a block outside its shape");
        }
      }
      if (r.numel != numel) {
        return bad(tensor + " has numel " + std::to_string(r.numel) +
                   " but its blocks hold " + std::to_string(numel));
      }
      // numel < 2^62 and the rest is small: no overflow below.
      const int64_t bytes =
          numel > (std::numeric_limits<int64_t>::max() - (int64_t{1} << 40)) /
                      12
              ? -1
              : RecordBytes(static_cast<int64_t>(r.name.size()),
                            static_cast<int64_t>(r.global_shape.size()),
                            static_cast<int64_t>(r.blocks.size()), numel);
      if (r.bytes != bytes || r.offset < kShardHeaderBytes) {
        return bad(tensor + " has offset " + std::to_string(r.offset) +
                   " and size " + std::to_string(r.bytes) +
                   ", which do not fit its record");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<CheckpointMetadata> ReadMetadata(const std::string& path) {
  StatusOr<std::string> text = ReadCheckpointText(
      path, "checkpoint metadata",
      Status::NotFound(path + " is missing; the checkpoint is incomplete",
                       "restore the checkpoint directory or point the "
                       "tracker file at an older iteration"));
  if (!text.ok()) return text.status();
  CheckpointMetadata m;
  try {
    const json j = json::parse(text.value());
    if (!j.is_object() || !j.contains("format") || !j["format"].is_string() ||
        j["format"] != kFormatName || !j.contains("format_version") ||
        !j["format_version"].is_number_integer() ||
        j["format_version"] != kMetadataVersion) {
      return Status::InvalidArgument(
          path + ": not a meshtune checkpoint of format version " +
              std::to_string(kMetadataVersion),
          "load it with the tool that wrote it");
    }
    m.iteration = WholeNumber(j, "iteration");
    m.consumed_samples = WholeNumber(j, "consumed_samples");
    m.steps_taken = WholeNumber(j.at("optimizer"), "steps_taken");
    const json& model = j.at("model");
    m.model_name = Text(model, "name");
    m.num_layers = WholeNumber(model, "num_layers");
    m.hidden_size = WholeNumber(model, "hidden_size");
    m.num_attention_heads = WholeNumber(model, "num_attention_heads");
    m.num_query_groups = WholeNumber(model, "num_query_groups");
    m.ffn_hidden_size = WholeNumber(model, "ffn_hidden_size");
    m.vocab_size = WholeNumber(model, "vocab_size");
    const json& par = j.at("parallel");
    m.tp = WholeNumber(par, "tp");
    m.pp = WholeNumber(par, "pp");
    m.vpp = WholeNumber(par, "vpp");
    m.dp = WholeNumber(par, "dp");
    m.dist_opt = Flag(par, "dist_opt");
    // Written since expert parallelism; older metadata has neither.
    m.ep = par.contains("ep") ? WholeNumber(par, "ep") : 1;
    m.etp = par.contains("etp") ? WholeNumber(par, "etp") : m.tp;
    for (const json& s : Array(j, "shards")) {
      ShardIndex shard;
      shard.file = Text(s, "file");
      // Out-of-int values become -1, which validation rejects.
      auto rank = [&](const char* key) {
        const int64_t v = WholeNumber(s, key);
        return v >= 0 && v < (int64_t{1} << 30) ? static_cast<int>(v) : -1;
      };
      shard.expert = s.is_object() && s.contains("ep");
      if (shard.expert) {
        shard.ep_rank = rank("ep");
        shard.etp_rank = rank("etp");
      } else {
        shard.tp_rank = rank("tp");
      }
      shard.pp_rank = rank("pp");
      for (const json& t : Array(s, "tensors")) {
        TensorRecord r;
        r.name = Text(t, "name");
        for (const json& d : Array(t, "global_shape")) {
          r.global_shape.push_back(WholeValue(d, "a global_shape entry"));
        }
        r.tied_embedding = Flag(t, "tied_embedding");
        for (const json& b : Array(t, "blocks")) {
          if (!b.is_array() || b.size() != 4) {
            throw std::runtime_error("a block is not 4 numbers");
          }
          r.blocks.push_back({WholeValue(b[0], "a block entry"),
                              WholeValue(b[1], "a block entry"),
                              WholeValue(b[2], "a block entry"),
                              WholeValue(b[3], "a block entry")});
        }
        r.numel = WholeNumber(t, "numel");
        r.offset = WholeNumber(t, "offset");
        r.bytes = WholeNumber(t, "bytes");
        const std::string hex = Text(t, "fnv1a64");
        if (hex.size() != 16 ||
            hex.find_first_not_of("0123456789abcdefABCDEF") !=
                std::string::npos) {
          throw std::runtime_error("'fnv1a64' is not 16 hex digits");
        }
        r.checksum = std::stoull(hex, nullptr, 16);
        shard.tensors.push_back(std::move(r));
      }
      m.shards.push_back(std::move(shard));
    }
  } catch (const std::exception& e) {
    return Status::IoError(path + ": malformed metadata (" +
                               Printable(e.what(), 160) +
                               "); the checkpoint is corrupt",
                           kCorruptHint);
  }
  MESHTUNE_RETURN_IF_ERROR(ValidateMetadata(path, m));
  return m;
}

Status WriteFileDurably(const std::string& path, const std::string& contents) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IoError("cannot create " + path + ": " + ErrnoText(),
                           "check that the checkpoint directory is writable");
  }
  Status st = WriteAll(fd, contents.data(), contents.size(), path);
  if (st.ok() && ::fsync(fd) != 0) {
    st = Status::IoError("cannot fsync " + path + ": " + ErrnoText(),
                         "check the file system of the checkpoint directory");
  }
  if (::close(fd) != 0 && st.ok()) {
    st = Status::IoError("cannot close " + path + ": " + ErrnoText(),
                         "check free space in the checkpoint directory");
  }
  return st;
}

Status SyncDirectory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return Status::IoError("cannot open directory " + path + ": " + ErrnoText(),
                           "check that the checkpoint directory exists");
  }
  const bool ok = ::fsync(fd) == 0;
  const std::string err = ok ? "" : ErrnoText();
  ::close(fd);
  if (!ok) {
    return Status::IoError("cannot fsync directory " + path + ": " + err,
                           "check the file system of the checkpoint "
                           "directory");
  }
  return Status::Ok();
}

}  // namespace meshtune::engine
