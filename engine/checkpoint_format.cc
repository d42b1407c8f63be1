#include "engine/checkpoint_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>

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
  if (!c->ok() || nblocks > kMaxBlocks) return false;
  r->blocks.resize(nblocks);
  int64_t sum = 0;
  for (SavedBlock& b : r->blocks) {
    b.global_row0 = c->Get<int64_t>();
    b.rows = c->Get<int64_t>();
    b.global_col0 = c->Get<int64_t>();
    b.cols = c->Get<int64_t>();
    if (b.rows < 0 || b.cols < 0 || b.global_row0 < 0 || b.global_col0 < 0) {
      return false;
    }
    sum += b.rows * b.cols;
  }
  r->numel = c->Get<int64_t>();
  if (!c->ok() || r->numel != sum || r->numel < 0) return false;
  return static_cast<uint64_t>(r->numel) <= remaining / (3 * sizeof(float));
}

// Reads `bytes` at `offset` of an open stream into `out`.
bool ReadAt(std::ifstream& in, int64_t offset, int64_t bytes,
            std::string* out) {
  out->resize(static_cast<size_t>(bytes));
  in.seekg(offset);
  in.read(out->data(), bytes);
  return static_cast<bool>(in);
}

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
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    return Status::NotFound("cannot open checkpoint shard " + path,
                            "the checkpoint is incomplete; load an older "
                            "one or save again");
  }
  const int64_t file_bytes = static_cast<int64_t>(in.tellg());
  const Status corrupt = Status::IoError(
      path + ": malformed shard file; the checkpoint is corrupt", kCorruptHint);
  std::string header;
  if (file_bytes < kShardHeaderBytes ||
      !ReadAt(in, 0, kShardHeaderBytes, &header) ||
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
      if (!ReadAt(in, offset + static_cast<int64_t>(head.size()), n, &part)) {
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
    if (!ReadAt(in, offset + r.bytes - 8, 8, &sum)) return corrupt;
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::NotFound("cannot open checkpoint shard " + path,
                            "the checkpoint is incomplete; load an older "
                            "one or save again");
  }
  std::string buf;
  if (bytes < 8 || offset < kShardHeaderBytes ||
      !ReadAt(in, offset, bytes, &buf)) {
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

StatusOr<int64_t> ReadTracker(const std::string& dir) {
  const std::string path = dir + "/" + kTrackerFileName;
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound(
        "no checkpoint in " + dir + " (" + kTrackerFileName + " is missing)",
        "save a checkpoint there first, or drop --load");
  }
  std::string text;
  std::getline(in, text);
  char* end = nullptr;
  errno = 0;
  const long long it = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || it < 0 ||
      (*end != '\0' && *end != '\r' && *end != ' ')) {
    return Status::InvalidArgument(
        path + ": expected an iteration number, found '" + text + "'",
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
    shards.push_back({{"file", shard.file},
                      {"tp", shard.tp_rank},
                      {"pp", shard.pp_rank},
                      {"tensors", tensors}});
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
        {"dist_opt", m.dist_opt}}},
      {"optimizer", {{"steps_taken", m.steps_taken}}},
      {"shards", shards},
  };
  return j.dump(1) + "\n";
}

StatusOr<CheckpointMetadata> ReadMetadata(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status::NotFound(path + " is missing; the checkpoint is incomplete",
                            "restore the checkpoint directory or point the "
                            "tracker file at an older iteration");
  }
  CheckpointMetadata m;
  try {
    const json j = json::parse(in);
    if (j.at("format").get<std::string>() != kFormatName ||
        j.at("format_version").get<int>() != kMetadataVersion) {
      return Status::InvalidArgument(
          path + ": not a meshtune checkpoint of format version " +
              std::to_string(kMetadataVersion),
          "load it with the tool that wrote it");
    }
    m.iteration = j.at("iteration").get<int64_t>();
    m.consumed_samples = j.at("consumed_samples").get<int64_t>();
    m.steps_taken = j.at("optimizer").at("steps_taken").get<int64_t>();
    const json& model = j.at("model");
    m.model_name = model.at("name").get<std::string>();
    m.num_layers = model.at("num_layers").get<int64_t>();
    m.hidden_size = model.at("hidden_size").get<int64_t>();
    m.num_attention_heads = model.at("num_attention_heads").get<int64_t>();
    m.num_query_groups = model.at("num_query_groups").get<int64_t>();
    m.ffn_hidden_size = model.at("ffn_hidden_size").get<int64_t>();
    m.vocab_size = model.at("vocab_size").get<int64_t>();
    const json& par = j.at("parallel");
    m.tp = par.at("tp").get<int64_t>();
    m.pp = par.at("pp").get<int64_t>();
    m.vpp = par.at("vpp").get<int64_t>();
    m.dp = par.at("dp").get<int64_t>();
    m.dist_opt = par.at("dist_opt").get<bool>();
    for (const json& s : j.at("shards")) {
      ShardIndex shard;
      shard.file = s.at("file").get<std::string>();
      shard.tp_rank = s.at("tp").get<int>();
      shard.pp_rank = s.at("pp").get<int>();
      for (const json& t : s.at("tensors")) {
        TensorRecord r;
        r.name = t.at("name").get<std::string>();
        r.global_shape = t.at("global_shape").get<std::vector<int64_t>>();
        r.tied_embedding = t.at("tied_embedding").get<bool>();
        for (const json& b : t.at("blocks")) {
          r.blocks.push_back({b.at(0).get<int64_t>(), b.at(1).get<int64_t>(),
                              b.at(2).get<int64_t>(), b.at(3).get<int64_t>()});
        }
        r.numel = t.at("numel").get<int64_t>();
        r.offset = t.at("offset").get<int64_t>();
        r.bytes = t.at("bytes").get<int64_t>();
        r.checksum =
            std::stoull(t.at("fnv1a64").get<std::string>(), nullptr, 16);
        shard.tensors.push_back(std::move(r));
      }
      m.shards.push_back(std::move(shard));
    }
  } catch (const std::exception& e) {
    return Status::IoError(path + ": malformed metadata (" + e.what() +
                               "); the checkpoint is corrupt",
                           kCorruptHint);
  }
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
