#include "engine/data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

// The format is little-endian and the reader copies integers straight out of
// the mapping (as numpy's memmap does in Megatron), so the host must be too.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "engine/data/indexed_dataset.cc assumes a little-endian host"
#endif

namespace meshtune::engine::data {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kVersion = 1;
// magic + version u64 + dtype u8 + seq_count u64 + doc_count u64.
constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

const char* kRewriteHint =
    "recreate PREFIX.bin and PREFIX.idx together with 'tune data --input "
    "FILE --output-prefix PREFIX'";

bool IsIntegerDtype(TokenDtype dtype) {
  return dtype != TokenDtype::kFloat32 && dtype != TokenDtype::kFloat64;
}

bool IsKnownDtypeCode(uint8_t code) { return code >= 1 && code <= 8; }

// The inclusive range of token ids `dtype` can store, clamped to int32.
void DtypeRange(TokenDtype dtype, int64_t* lo, int64_t* hi) {
  switch (dtype) {
    case TokenDtype::kUint8:
      *lo = 0, *hi = 255;
      return;
    case TokenDtype::kInt8:
      *lo = -128, *hi = 127;
      return;
    case TokenDtype::kInt16:
      *lo = -32768, *hi = 32767;
      return;
    case TokenDtype::kUint16:
      *lo = 0, *hi = 65535;
      return;
    default:
      *lo = std::numeric_limits<int32_t>::min();
      *hi = std::numeric_limits<int32_t>::max();
      return;
  }
}

std::string ErrnoText() { return std::strerror(errno); }

template <typename T>
T Load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

template <typename T>
void Store(T value, std::vector<uint8_t>* out) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &value, sizeof(T));
}

// Converts `count` tokens of type T at `src` to int32.
template <typename T>
void Convert(const uint8_t* src, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    out[i] = static_cast<int32_t>(Load<T>(src + i * sizeof(T)));
  }
}

// A read-only mapping of a whole file (null for an empty file).
struct Mapping {
  void* data = nullptr;
  size_t size_bytes = 0;
};

StatusOr<Mapping> MapFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) {
      return Status::NotFound(path + ": no such file", kRewriteHint);
    }
    return Status::IoError(path + ": cannot open (" + ErrnoText() + ")",
                           "check the file's permissions");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const std::string why = ErrnoText();
    ::close(fd);
    return Status::IoError(path + ": cannot stat (" + why + ")");
  }
  Mapping m;
  m.size_bytes = static_cast<size_t>(st.st_size);
  if (m.size_bytes > 0) {
    m.data = ::mmap(nullptr, m.size_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m.data == MAP_FAILED) {
      const std::string why = ErrnoText();
      ::close(fd);
      return Status::IoError(path + ": cannot mmap (" + why + ")");
    }
  }
  ::close(fd);  // the mapping stays valid after close (mmap(2))
  return m;
}

void Unmap(const Mapping& m) {
  if (m.data != nullptr) ::munmap(m.data, m.size_bytes);
}

}  // namespace

int64_t DtypeSizeBytes(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8:
    case TokenDtype::kInt8:
      return 1;
    case TokenDtype::kInt16:
    case TokenDtype::kUint16:
      return 2;
    case TokenDtype::kInt32:
    case TokenDtype::kFloat32:
      return 4;
    case TokenDtype::kInt64:
    case TokenDtype::kFloat64:
      return 8;
  }
  MESHTUNE_CHECK(false);
  return 0;
}

const char* DtypeName(TokenDtype dtype) {
  switch (dtype) {
    case TokenDtype::kUint8:
      return "uint8";
    case TokenDtype::kInt8:
      return "int8";
    case TokenDtype::kInt16:
      return "int16";
    case TokenDtype::kInt32:
      return "int32";
    case TokenDtype::kInt64:
      return "int64";
    case TokenDtype::kFloat64:
      return "float64";
    case TokenDtype::kFloat32:
      return "float32";
    case TokenDtype::kUint16:
      return "uint16";
  }
  return "unknown";
}

TokenDtype DtypeForVocab(int64_t vocab_size) {
  // Megatron's threshold (DType.optimal_dtype) leaves headroom below 65536.
  return vocab_size < 65500 ? TokenDtype::kUint16 : TokenDtype::kInt32;
}

// ---- IndexedDatasetBuilder ----

StatusOr<std::unique_ptr<IndexedDatasetBuilder>> IndexedDatasetBuilder::Create(
    const std::string& prefix, TokenDtype dtype) {
  MESHTUNE_CHECK(IsIntegerDtype(dtype));
  const std::string path = prefix + ".bin.tmp";
  FILE* bin = std::fopen(path.c_str(), "wb");
  if (bin == nullptr) {
    return Status::IoError(path + ": cannot create (" + ErrnoText() + ")",
                           "check that the directory of the output prefix "
                           "exists and is writable");
  }
  return std::unique_ptr<IndexedDatasetBuilder>(
      new IndexedDatasetBuilder(prefix, dtype, bin));
}

IndexedDatasetBuilder::IndexedDatasetBuilder(std::string prefix,
                                             TokenDtype dtype, FILE* bin)
    : prefix_(std::move(prefix)), dtype_(dtype), bin_(bin) {}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (!finalized_) RemoveTemporaries();
}

void IndexedDatasetBuilder::RemoveTemporaries() {
  if (bin_ != nullptr) {
    std::fclose(bin_);
    bin_ = nullptr;
  }
  std::remove((prefix_ + ".bin.tmp").c_str());
  std::remove((prefix_ + ".idx.tmp").c_str());
}

Status IndexedDatasetBuilder::AddDocument(const int32_t* tokens,
                                          int64_t count) {
  MESHTUNE_CHECK(!finalized_ && bin_ != nullptr && count >= 0);
  if (count > std::numeric_limits<int32_t>::max()) {
    return Status::InvalidArgument(
        "document " + std::to_string(lengths_.size()) + " has " +
            std::to_string(count) + " tokens; the index stores int32 lengths",
        "split the document into several");
  }
  int64_t lo = 0;
  int64_t hi = 0;
  DtypeRange(dtype_, &lo, &hi);
  const int64_t size = DtypeSizeBytes(dtype_);
  scratch_.resize(static_cast<size_t>(count * size));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t t = tokens[i];
    if (t < lo || t > hi) {
      return Status::InvalidArgument(
          "token id " + std::to_string(t) + " does not fit dtype " +
              DtypeName(dtype_),
          "use int32 tokens for vocabularies of 65500 ids or more");
    }
    uint8_t* dst = scratch_.data() + i * size;
    switch (dtype_) {
      case TokenDtype::kUint8: {
        const uint8_t v = static_cast<uint8_t>(t);
        std::memcpy(dst, &v, 1);
        break;
      }
      case TokenDtype::kInt8: {
        const int8_t v = static_cast<int8_t>(t);
        std::memcpy(dst, &v, 1);
        break;
      }
      case TokenDtype::kInt16: {
        const int16_t v = static_cast<int16_t>(t);
        std::memcpy(dst, &v, 2);
        break;
      }
      case TokenDtype::kUint16: {
        const uint16_t v = static_cast<uint16_t>(t);
        std::memcpy(dst, &v, 2);
        break;
      }
      case TokenDtype::kInt32: {
        const int32_t v = static_cast<int32_t>(t);
        std::memcpy(dst, &v, 4);
        break;
      }
      default: {  // int64 (float dtypes are refused by Create)
        std::memcpy(dst, &t, 8);
        break;
      }
    }
  }
  if (count > 0 && std::fwrite(scratch_.data(), 1, scratch_.size(), bin_) !=
                       scratch_.size()) {
    return Status::IoError(
        prefix_ + ".bin.tmp: write failed (" + ErrnoText() + ")",
        "check the free space of the output directory");
  }
  pointers_bytes_.push_back(num_tokens_ * size);
  lengths_.push_back(static_cast<int32_t>(count));
  num_tokens_ += count;
  return Status::Ok();
}

Status IndexedDatasetBuilder::Finalize() {
  MESHTUNE_CHECK(!finalized_ && bin_ != nullptr);
  const bool bin_ok = std::fflush(bin_) == 0 && std::fclose(bin_) == 0;
  bin_ = nullptr;
  if (!bin_ok) {
    const Status st = Status::IoError(
        prefix_ + ".bin.tmp: write failed (" + ErrnoText() + ")",
        "check the free space of the output directory");
    RemoveTemporaries();
    return st;
  }
  const int64_t n = num_documents();
  std::vector<uint8_t> idx;
  idx.insert(idx.end(), kMagic, kMagic + sizeof(kMagic));
  Store<uint64_t>(kVersion, &idx);
  Store<uint8_t>(static_cast<uint8_t>(dtype_), &idx);
  Store<uint64_t>(static_cast<uint64_t>(n), &idx);
  Store<uint64_t>(static_cast<uint64_t>(n + 1), &idx);  // doc_idx entries
  for (int32_t length : lengths_) Store<int32_t>(length, &idx);
  for (int64_t pointer : pointers_bytes_) Store<int64_t>(pointer, &idx);
  for (int64_t d = 0; d <= n; ++d) Store<int64_t>(d, &idx);

  const std::string idx_tmp = prefix_ + ".idx.tmp";
  FILE* f = std::fopen(idx_tmp.c_str(), "wb");
  bool idx_ok = f != nullptr;
  if (f != nullptr) {
    idx_ok = std::fwrite(idx.data(), 1, idx.size(), f) == idx.size();
    idx_ok = std::fclose(f) == 0 && idx_ok;
  }
  if (!idx_ok) {
    const Status st = Status::IoError(
        idx_tmp + ": write failed (" + ErrnoText() + ")",
        "check that the output directory is writable and has free space");
    RemoveTemporaries();
    return st;
  }
  for (const char* ext : {".bin", ".idx"}) {
    const std::string to = prefix_ + ext;
    if (std::rename((to + ".tmp").c_str(), to.c_str()) != 0) {
      const Status st = Status::IoError(to + ": cannot rename into place (" +
                                        ErrnoText() + ")");
      RemoveTemporaries();
      return st;
    }
  }
  finalized_ = true;
  return Status::Ok();
}

// ---- IndexedDataset ----

IndexedDataset::~IndexedDataset() {
  if (mapping_ != nullptr) ::munmap(mapping_, bin_size_bytes_);
}

StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(
    const std::string& prefix) {
  const std::string idx_path = prefix + ".idx";
  const std::string bin_path = prefix + ".bin";
  auto idx_map = MapFile(idx_path);
  if (!idx_map.ok()) return idx_map.status();
  const uint8_t* p = static_cast<const uint8_t*>(idx_map->data);
  const size_t size = idx_map->size_bytes;
  std::unique_ptr<IndexedDataset> ds(new IndexedDataset());
  ds->name_ = prefix;

  // Parse and validate the index; the mapping is released on every path.
  const Status parsed = [&]() -> Status {
    if (size < sizeof(kMagic) || std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
      return Status::InvalidArgument(
          idx_path + ": not a Megatron indexed dataset (bad magic)",
          "PREFIX must name files written by 'tune data' or Megatron's "
          "tools/preprocess_data.py");
    }
    if (size < kHeaderBytes) {
      return Status::InvalidArgument(idx_path + ": truncated header (" +
                                         std::to_string(size) +
                                         " bytes, the header alone takes " +
                                         std::to_string(kHeaderBytes) + ")",
                                     kRewriteHint);
    }
    const uint64_t version = Load<uint64_t>(p + 9);
    if (version != kVersion) {
      return Status::InvalidArgument(idx_path + ": unsupported index version " +
                                         std::to_string(version) +
                                         " (expected 1)",
                                     kRewriteHint);
    }
    const uint8_t code = p[17];
    if (!IsKnownDtypeCode(code)) {
      return Status::InvalidArgument(idx_path + ": unknown dtype code " +
                                         std::to_string(code) +
                                         " (Megatron's codes are 1 to 8)",
                                     kRewriteHint);
    }
    ds->dtype_ = static_cast<TokenDtype>(code);
    if (!IsIntegerDtype(ds->dtype_)) {
      return Status::InvalidArgument(idx_path + ": dtype " +
                                         DtypeName(ds->dtype_) +
                                         " cannot hold token ids",
                                     kRewriteHint);
    }
    const uint64_t seq_count = Load<uint64_t>(p + 18);
    const uint64_t doc_count = Load<uint64_t>(p + 26);
    // Bound the counts by the file size before multiplying (no overflow).
    const size_t body = size - kHeaderBytes;
    const bool fits = seq_count <= body / 12 && doc_count <= body / 8 &&
                      seq_count * 12 + doc_count * 8 <= body;
    const uint64_t expected =
        fits ? kHeaderBytes + seq_count * 12 + doc_count * 8 : 0;
    const std::string counts = std::to_string(seq_count) + " sequences and " +
                               std::to_string(doc_count) + " document entries";
    if (!fits) {
      return Status::InvalidArgument(idx_path + ": truncated index (" +
                                         std::to_string(size) +
                                         " bytes cannot hold " + counts + ")",
                                     kRewriteHint);
    }
    // Megatron's multimodal variant appends one int8 mode per sequence;
    // those files are accepted and the modes ignored.
    if (size != expected && size != expected + seq_count) {
      return Status::InvalidArgument(
          idx_path + ": " + std::to_string(size - expected) +
              " unexpected bytes after the index of " + counts,
          kRewriteHint);
    }
    const uint8_t* at = p + kHeaderBytes;
    ds->lengths_.resize(seq_count);
    ds->pointers_bytes_.resize(seq_count);
    ds->document_indices_.resize(doc_count);
    if (seq_count > 0) {
      std::memcpy(ds->lengths_.data(), at, seq_count * 4);
      std::memcpy(ds->pointers_bytes_.data(), at + seq_count * 4,
                  seq_count * 8);
    }
    if (doc_count > 0) {
      std::memcpy(ds->document_indices_.data(), at + seq_count * 12,
                  doc_count * 8);
    }
    const auto& doc = ds->document_indices_;
    if (doc.empty()) {
      return Status::InvalidArgument(
          idx_path + ": empty document index (doc_idx holds at least 0)",
          kRewriteHint);
    }
    if (doc.front() != 0) {
      return Status::InvalidArgument(idx_path + ": doc_idx starts at " +
                                         std::to_string(doc.front()) +
                                         ", expected 0",
                                     kRewriteHint);
    }
    for (size_t i = 1; i < doc.size(); ++i) {
      if (doc[i] < doc[i - 1]) {
        return Status::InvalidArgument(
            idx_path + ": doc_idx decreases at entry " + std::to_string(i) +
                " (" + std::to_string(doc[i]) + " after " +
                std::to_string(doc[i - 1]) + ")",
            kRewriteHint);
      }
    }
    if (doc.back() != static_cast<int64_t>(seq_count)) {
      return Status::InvalidArgument(
          idx_path + ": doc_idx ends at " + std::to_string(doc.back()) +
              ", expected the sequence count " + std::to_string(seq_count),
          kRewriteHint);
    }
    for (size_t i = 0; i < seq_count; ++i) {
      if (ds->lengths_[i] < 0) {
        return Status::InvalidArgument(
            idx_path + ": sequence " + std::to_string(i) +
                " has negative length " + std::to_string(ds->lengths_[i]),
            kRewriteHint);
      }
      ds->num_tokens_ += ds->lengths_[i];
    }
    return Status::Ok();
  }();
  Unmap(*idx_map);
  if (!parsed.ok()) return parsed;

  auto bin_map = MapFile(bin_path);
  if (!bin_map.ok()) return bin_map.status();
  ds->mapping_ = bin_map->data;
  ds->bin_ = static_cast<const uint8_t*>(bin_map->data);
  ds->bin_size_bytes_ = bin_map->size_bytes;
  const int64_t item = DtypeSizeBytes(ds->dtype_);
  const int64_t described = ds->num_tokens_ * item;
  if (static_cast<int64_t>(ds->bin_size_bytes_) != described) {
    return Status::InvalidArgument(
        bin_path + ": holds " + std::to_string(ds->bin_size_bytes_) +
            " bytes but " + idx_path + " describes " +
            std::to_string(described) + " (" + std::to_string(ds->num_tokens_) +
            " " + DtypeName(ds->dtype_) +
            " tokens); the two files do not belong together",
        kRewriteHint);
  }
  for (int64_t i = 0; i < ds->num_sequences(); ++i) {
    const int64_t begin = ds->pointers_bytes_[i];
    const int64_t end = begin + ds->lengths_[i] * item;
    if (begin < 0 || begin % item != 0 || end > described) {
      return Status::InvalidArgument(
          idx_path + ": sequence " + std::to_string(i) + " (bytes [" +
              std::to_string(begin) + ", " + std::to_string(end) +
              ")) does not lie inside " + bin_path + " (" +
              std::to_string(described) + " bytes)",
          kRewriteHint);
    }
  }
  return ds;
}

std::unique_ptr<IndexedDataset> IndexedDataset::FromDocuments(
    const std::string& name, TokenDtype dtype,
    const std::vector<std::vector<int32_t>>& documents) {
  MESHTUNE_CHECK(IsIntegerDtype(dtype));
  std::unique_ptr<IndexedDataset> ds(new IndexedDataset());
  ds->name_ = name;
  ds->dtype_ = dtype;
  const int64_t item = DtypeSizeBytes(dtype);
  int64_t lo = 0;
  int64_t hi = 0;
  DtypeRange(dtype, &lo, &hi);
  ds->document_indices_.push_back(0);
  for (const std::vector<int32_t>& doc : documents) {
    ds->pointers_bytes_.push_back(ds->num_tokens_ * item);
    ds->lengths_.push_back(static_cast<int32_t>(doc.size()));
    ds->document_indices_.push_back(ds->num_sequences());
    ds->num_tokens_ += static_cast<int64_t>(doc.size());
    for (int32_t t : doc) {
      MESHTUNE_CHECK(t >= lo && t <= hi);
      const int64_t v = t;
      // Little-endian: the low `item` bytes of v are the token in `dtype`.
      const uint8_t* bytes = reinterpret_cast<const uint8_t*>(&v);
      ds->memory_.insert(ds->memory_.end(), bytes, bytes + item);
    }
  }
  ds->bin_ = ds->memory_.data();
  ds->bin_size_bytes_ = ds->memory_.size();
  return ds;
}

void IndexedDataset::ReadTokens(int64_t sequence, int64_t offset, int64_t count,
                                int32_t* out) const {
  MESHTUNE_CHECK(sequence >= 0 && sequence < num_sequences());
  MESHTUNE_CHECK(offset >= 0 && count >= 0 &&
                 offset + count <= lengths_[sequence]);
  const int64_t item = DtypeSizeBytes(dtype_);
  const uint8_t* src = bin_ + pointers_bytes_[sequence] + offset * item;
  switch (dtype_) {
    case TokenDtype::kUint8:
      return Convert<uint8_t>(src, count, out);
    case TokenDtype::kInt8:
      return Convert<int8_t>(src, count, out);
    case TokenDtype::kInt16:
      return Convert<int16_t>(src, count, out);
    case TokenDtype::kUint16:
      return Convert<uint16_t>(src, count, out);
    case TokenDtype::kInt32:
      return Convert<int32_t>(src, count, out);
    case TokenDtype::kInt64:  // ids beyond int32 do not occur in practice
      return Convert<int64_t>(src, count, out);
    default:
      MESHTUNE_CHECK(false);  // float dtypes are refused by Open
  }
}

int64_t IndexedDataset::MaxTokenId() const {
  int64_t max_id = -1;
  std::vector<int32_t> buf;
  for (int64_t s = 0; s < num_sequences(); ++s) {
    buf.resize(static_cast<size_t>(lengths_[s]));
    ReadTokens(s, 0, lengths_[s], buf.data());
    for (int32_t t : buf) max_id = std::max<int64_t>(max_id, t);
  }
  return max_id;
}

}  // namespace meshtune::engine::data
