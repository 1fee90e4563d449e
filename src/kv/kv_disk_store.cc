#include "kv/kv_disk_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "base/check.h"
#include "base/logging.h"
#include "base/unique_fd.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'K', 'V', 'B', '1'};
// Fixed fields, then four length-prefixed strings, then an XXH3-64 of everything before it.
//   0 magic[8]  8 version u32  12 header_bytes u32  16 hash[16]  32 parent[16]
//  48 payload_bytes u64  56 payload_xxh3[16]  72 block_size, num_layers, num_kv_heads,
//  head_dim (u32 each)  88 block_bytes u64  96 strings...  then checksum u64
constexpr size_t kFixedBytes = 96;
constexpr int64_t kMaxHeaderBytes = 1 << 20;
// Keeps header_bytes + block_bytes far from overflowing int64.
constexpr int64_t kMaxBlockBytes = int64_t{1} << 40;
constexpr std::string_view kSuffix = ".kvb";

void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutHash(std::string& out, const BlockHash& h) {
  PutU64(out, h.low);
  PutU64(out, h.high);
}
void PutString(std::string& out, const std::string& s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

// Bounds-checked little-endian reader: every Get fails (returns false) past the end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t pos() const { return pos_; }
  bool GetU32(uint32_t& v) {
    if (bytes_.size() - pos_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return true;
  }
  bool GetU64(uint64_t& v) {
    if (bytes_.size() - pos_ < 8) return false;
    v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return true;
  }
  bool GetHash(BlockHash& h) { return GetU64(h.low) && GetU64(h.high); }
  bool GetInt(int& v) {
    uint32_t u = 0;
    if (!GetU32(u)) return false;
    v = static_cast<int>(u);
    return true;
  }
  bool GetInt64(int64_t& v) {
    uint64_t u = 0;
    if (!GetU64(u)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  // A u32 length (at most kKvDiskMaxStringBytes) and that many bytes.
  bool GetString(std::string& s) {
    uint32_t n = 0;
    if (!GetU32(n) || n > kKvDiskMaxStringBytes || bytes_.size() - pos_ < n) return false;
    s.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

BlockHash PayloadHash(std::span<const uint8_t> payload) {
  XXH128_hash_t h = XXH3_128bits(payload.data(), payload.size());
  return BlockHash{h.low64, h.high64};
}

// Reads up to n bytes at offset; returns the count read (short only at end of file) or -1.
int64_t ReadFull(int fd, uint8_t* buf, int64_t n, int64_t offset) {
  int64_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, static_cast<size_t>(n - done), offset + done);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    done += r;
  }
  return done;
}

bool WriteFull(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

Status IoError(const std::string& what, int err) {
  std::string msg = what + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return ResourceExhaustedError(std::move(msg));
  return UnavailableError(std::move(msg));
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return OkStatus();
  return IoError("cannot create directory " + path, errno);
}

bool ProcessIsAlive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

}  // namespace

Status KvDiskFormat::Validate() const {
  if (model_fingerprint.empty()) return InvalidArgumentError("kv disk format: empty fingerprint");
  if (kv_dtype.empty()) return InvalidArgumentError("kv disk format: empty kv_dtype");
  for (const std::string* s : {&model_fingerprint, &kv_dtype, &tokenizer_hash, &adapter_id}) {
    if (s->size() > kKvDiskMaxStringBytes) {
      return InvalidArgumentError("kv disk format: a string field longer than " +
                                  std::to_string(kKvDiskMaxStringBytes) + " bytes");
    }
  }
  if (block_size <= 0 || num_layers <= 0 || num_kv_heads <= 0 || head_dim <= 0) {
    return InvalidArgumentError(
        "kv disk format: block_size, num_layers, num_kv_heads and "
        "head_dim must be positive");
  }
  if (block_bytes <= 0 || block_bytes > kMaxBlockBytes) {
    return InvalidArgumentError("kv disk format: block_bytes " + std::to_string(block_bytes) +
                                " out of range");
  }
  return OkStatus();
}

std::string EncodeKvDiskHeader(const KvDiskHeader& header) {
  CHECK_OK(header.format.Validate());
  std::string out(kMagic, sizeof(kMagic));
  PutU32(out, kKvDiskFormatVersion);
  PutU32(out, static_cast<uint32_t>(header.header_bytes));
  PutHash(out, header.hash);
  PutHash(out, header.parent);
  PutU64(out, static_cast<uint64_t>(header.payload_bytes));
  PutHash(out, header.payload_xxh3);
  const KvDiskFormat& f = header.format;
  for (int v : {f.block_size, f.num_layers, f.num_kv_heads, f.head_dim}) {
    PutU32(out, static_cast<uint32_t>(v));
  }
  PutU64(out, static_cast<uint64_t>(f.block_bytes));
  CHECK_EQ(out.size(), kFixedBytes);
  for (const std::string* s :
       {&f.model_fingerprint, &f.kv_dtype, &f.tokenizer_hash, &f.adapter_id}) {
    PutString(out, *s);
  }
  PutU64(out, XXH3_64bits(out.data(), out.size()));
  CHECK(header.header_bytes % 4096 == 0 && header.header_bytes <= kMaxHeaderBytes &&
        static_cast<int64_t>(out.size()) <= header.header_bytes)
      << "header_bytes " << header.header_bytes;
  out.resize(static_cast<size_t>(header.header_bytes), '\0');
  return out;
}

StatusOr<KvDiskHeader> ParseKvDiskHeader(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(kMagic) + 4 || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return DataLossError("kv block header: bad magic (not a loom .kvb file)");
  }
  Reader r(bytes.subspan(sizeof(kMagic)));
  uint32_t version = 0;
  uint32_t header_bytes = 0;
  (void)r.GetU32(version);
  if (version != kKvDiskFormatVersion) {
    return UnimplementedError("kv block header: format version " + std::to_string(version) +
                              ", this build reads version " + std::to_string(kKvDiskFormatVersion));
  }
  KvDiskHeader h;
  KvDiskFormat& f = h.format;
  bool ok = r.GetU32(header_bytes) && r.GetHash(h.hash) && r.GetHash(h.parent) &&
            r.GetInt64(h.payload_bytes) && r.GetHash(h.payload_xxh3) && r.GetInt(f.block_size) &&
            r.GetInt(f.num_layers) && r.GetInt(f.num_kv_heads) && r.GetInt(f.head_dim) &&
            r.GetInt64(f.block_bytes) && r.GetString(f.model_fingerprint) &&
            r.GetString(f.kv_dtype) && r.GetString(f.tokenizer_hash) && r.GetString(f.adapter_id);
  if (!ok) return DataLossError("kv block header: truncated or a string over its length cap");
  const size_t checked_bytes = sizeof(kMagic) + r.pos();
  uint64_t checksum = 0;
  if (!r.GetU64(checksum)) return DataLossError("kv block header: truncated before its checksum");
  if (checksum != XXH3_64bits(bytes.data(), checked_bytes)) {
    return DataLossError("kv block header: checksum mismatch");
  }
  h.header_bytes = header_bytes;
  const int64_t used_bytes = static_cast<int64_t>(checked_bytes + sizeof(checksum));
  if (h.header_bytes % 4096 != 0 || h.header_bytes < used_bytes ||
      h.header_bytes > kMaxHeaderBytes) {
    return DataLossError("kv block header: header_bytes " + std::to_string(h.header_bytes) +
                         " is not a 4096 multiple in [" + std::to_string(used_bytes) + ", " +
                         std::to_string(kMaxHeaderBytes) + "]");
  }
  if (Status s = f.Validate(); !s.ok()) return DataLossError("kv block header: " + s.message());
  if (h.payload_bytes != f.block_bytes) {
    return DataLossError("kv block header: payload_bytes " + std::to_string(h.payload_bytes) +
                         " != block_bytes " + std::to_string(f.block_bytes));
  }
  return h;
}

Status CheckKvDiskFormat(const KvDiskFormat& want, const KvDiskFormat& stored) {
  auto differs = [](std::string_view field, const auto& a, const auto& b) {
    std::ostringstream msg;
    msg << "kv block of another format: " << field << " is '" << b << "', expected '" << a << "'";
    return FailedPreconditionError(msg.str());
  };
  if (want.model_fingerprint != stored.model_fingerprint) {
    return differs("model_fingerprint", want.model_fingerprint, stored.model_fingerprint);
  }
  if (want.kv_dtype != stored.kv_dtype) return differs("kv_dtype", want.kv_dtype, stored.kv_dtype);
  if (want.tokenizer_hash != stored.tokenizer_hash) {
    return differs("tokenizer_hash", want.tokenizer_hash, stored.tokenizer_hash);
  }
  if (want.adapter_id != stored.adapter_id) {
    return differs("adapter_id", want.adapter_id, stored.adapter_id);
  }
  if (want.block_size != stored.block_size) {
    return differs("block_size", want.block_size, stored.block_size);
  }
  if (want.num_layers != stored.num_layers) {
    return differs("num_layers", want.num_layers, stored.num_layers);
  }
  if (want.num_kv_heads != stored.num_kv_heads) {
    return differs("num_kv_heads", want.num_kv_heads, stored.num_kv_heads);
  }
  if (want.head_dim != stored.head_dim) return differs("head_dim", want.head_dim, stored.head_dim);
  if (want.block_bytes != stored.block_bytes) {
    return differs("block_bytes", want.block_bytes, stored.block_bytes);
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------

KvDiskStore::KvDiskStore(std::string dir, KvDiskFormat format, int64_t max_bytes)
    : dir_(std::move(dir)),
      format_(std::move(format)),
      max_bytes_(max_bytes),
      file_bytes_(kKvDiskHeaderBytes + format_.block_bytes) {}

StatusOr<std::unique_ptr<KvDiskStore>> KvDiskStore::Open(std::string dir, KvDiskFormat format,
                                                         int64_t max_bytes) {
  RETURN_IF_ERROR(format.Validate());
  if (max_bytes < 0) return InvalidArgumentError("kv disk store: negative max_bytes");
  if (dir.empty()) return InvalidArgumentError("kv disk store: empty directory");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return UnavailableError("kv disk store: cannot create " + dir + ": " + ec.message());
  RETURN_IF_ERROR(MakeDir(dir + "/tmp"));
  RETURN_IF_ERROR(MakeDir(dir + "/quarantine"));
  std::unique_ptr<KvDiskStore> store(new KvDiskStore(std::move(dir), std::move(format), max_bytes));
  store->CleanTempFiles();
  RETURN_IF_ERROR(store->Scan());
  return store;
}

std::string KvDiskStore::PathOf(const BlockHash& hash) const {
  std::string hex = hash.ToHex();
  return dir_ + "/" + hex.substr(0, 2) + "/" + hex + std::string(kSuffix);
}

void KvDiskStore::CleanTempFiles() {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_ + "/tmp", ec)) {
    // Names are <hex>.<pid>.<counter>: keep the in-flight writes of live processes (this one
    // included), delete everything else.
    const std::string name = e.path().filename().string();
    size_t a = name.find('.');
    size_t b = a == std::string::npos ? a : name.find('.', a + 1);
    if (b != std::string::npos) {
      std::string pid_str = name.substr(a + 1, b - a - 1);
      if (!pid_str.empty() && pid_str.size() <= 9 &&
          std::all_of(pid_str.begin(), pid_str.end(),
                      [](char c) { return c >= '0' && c <= '9'; })) {
        pid_t pid = static_cast<pid_t>(std::stol(pid_str));
        if (pid == ::getpid() || ProcessIsAlive(pid)) continue;
      }
    }
    std::error_code rm_ec;
    fs::remove(e.path(), rm_ec);
    if (!rm_ec) {
      LOG(INFO) << "kv disk store: deleted leftover temp file " << e.path().string();
    }
  }
}

Status KvDiskStore::Scan() {
  struct Found {
    BlockHash hash;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  std::error_code ec;
  fs::directory_iterator top(dir_, ec);
  if (ec) return UnavailableError("kv disk store: cannot list " + dir_ + ": " + ec.message());
  for (const fs::directory_entry& shard : top) {
    const std::string shard_name = shard.path().filename().string();
    std::error_code shard_ec;
    if (shard_name.size() != 2 || !shard.is_directory(shard_ec)) continue;
    for (const fs::directory_entry& e : fs::directory_iterator(shard.path(), shard_ec)) {
      const std::string name = e.path().filename().string();
      if (!name.ends_with(kSuffix)) continue;  // not ours: leave it alone
      const std::string path = e.path().string();
      std::optional<BlockHash> hash =
          BlockHash::FromHex(name.substr(0, name.size() - kSuffix.size()));
      if (!hash.has_value() || name.substr(0, 2) != shard_name) {
        Quarantine(path, DataLossError("file name is not <32 hex digits>.kvb in its shard"));
        continue;
      }
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) continue;  // vanished (another process evicted it) or unreadable
      StatusOr<KvDiskHeader> header = VerifyHeader(fd.get(), *hash);
      if (!header.ok()) {
        Quarantine(path, header.status());
        continue;
      }
      std::error_code time_ec;
      fs::file_time_type mtime = e.last_write_time(time_ec);
      found.push_back({*hash, mtime});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::lock_guard<std::mutex> lock(mu_);
  for (const Found& f : found) InsertLocked(f.hash, file_bytes_);
  EvictLocked();
  return OkStatus();
}

StatusOr<KvDiskHeader> KvDiskStore::VerifyHeader(int fd, const BlockHash& expected) const {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return IoError("stat", errno);
  std::vector<uint8_t> buf(static_cast<size_t>(kKvDiskHeaderBytes));
  int64_t n = ReadFull(fd, buf.data(), kKvDiskHeaderBytes, 0);
  if (n < 0) return IoError("read header", errno);
  ASSIGN_OR_RETURN(KvDiskHeader header,
                   ParseKvDiskHeader(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n))));
  RETURN_IF_ERROR(CheckKvDiskFormat(format_, header.format));
  if (!(header.hash == expected)) {
    return DataLossError("header holds hash " + header.hash.ToHex() + ", not its file name's");
  }
  if (st.st_size != header.header_bytes + header.payload_bytes) {
    return DataLossError("file is " + std::to_string(st.st_size) + " bytes, header says " +
                         std::to_string(header.header_bytes + header.payload_bytes));
  }
  return header;
}

bool KvDiskStore::Quarantine(const std::string& path, const Status& why) {
  const std::string dest = dir_ + "/quarantine/" + fs::path(path).filename().string();
  bool moved = ::rename(path.c_str(), dest.c_str()) == 0;
  if (!moved && errno != ENOENT) moved = ::unlink(path.c_str()) == 0;  // at least never reuse it
  if (moved) {
    LOG(WARNING) << "kv disk store: quarantined " << path << ": " << why.ToString();
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.quarantined;
  }
  return moved;
}

void KvDiskStore::InsertLocked(const BlockHash& hash, int64_t file_bytes) {
  auto it = index_.find(hash);
  if (it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru_it);
    return;
  }
  lru_.push_back(hash);
  index_.emplace(hash, Entry{file_bytes, std::prev(lru_.end())});
  stats_.bytes += file_bytes;
}

void KvDiskStore::EraseLocked(const BlockHash& hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  stats_.bytes -= it->second.file_bytes;
  lru_.erase(it->second.lru_it);
  index_.erase(it);
}

void KvDiskStore::EvictLocked() {
  while (stats_.bytes > max_bytes_ && !lru_.empty()) {
    BlockHash victim = lru_.front();
    // ENOENT is fine: another process already evicted it.
    if (::unlink(PathOf(victim).c_str()) != 0 && errno != ENOENT) {
      LOG(WARNING) << "kv disk store: cannot delete " << PathOf(victim) << ": "
                   << std::strerror(errno);
    }
    EraseLocked(victim);
    ++stats_.evictions;
  }
}

bool KvDiskStore::Contains(const BlockHash& hash) const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.contains(hash);
}

bool KvDiskStore::Discover(const BlockHash& hash) {
  if (Contains(hash)) return true;
  struct stat st {};
  if (::stat(PathOf(hash).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const int64_t header = static_cast<int64_t>(st.st_size) - format_.block_bytes;
  if (header <= 0 || header % 4096 != 0) return false;  // not a block of this format's size
  std::lock_guard<std::mutex> lock(mu_);
  InsertLocked(hash, st.st_size);
  ++stats_.discovered;
  EvictLocked();
  return index_.contains(hash);
}

Status KvDiskStore::Write(const BlockHash& hash, const BlockHash& parent,
                          std::span<const uint8_t> payload) {
  if (static_cast<int64_t>(payload.size()) != format_.block_bytes) {
    return InvalidArgumentError("kv disk store: payload of " + std::to_string(payload.size()) +
                                " bytes, blocks are " + std::to_string(format_.block_bytes));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(hash);
    if (it != index_.end()) {
      lru_.splice(lru_.end(), lru_, it->second.lru_it);
      return OkStatus();
    }
  }
  KvDiskHeader header;
  header.hash = hash;
  header.parent = parent;
  header.payload_bytes = format_.block_bytes;
  header.payload_xxh3 = PayloadHash(payload);
  header.format = format_;
  const std::string header_bytes = EncodeKvDiskHeader(header);

  const std::string hex = hash.ToHex();
  const std::string shard_dir = dir_ + "/" + hex.substr(0, 2);
  const std::string tmp = dir_ + "/tmp/" + hex + "." + std::to_string(::getpid()) + "." +
                          std::to_string(temp_counter_.fetch_add(1));
  const std::string final_path = PathOf(hash);
  Status status = [&]() -> Status {
    RETURN_IF_ERROR(MakeDir(shard_dir));
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.valid()) return IoError("cannot create " + tmp, errno);
    if (!WriteFull(fd.get(), header_bytes.data(), header_bytes.size()) ||
        !WriteFull(fd.get(), payload.data(), payload.size())) {
      return IoError("cannot write " + tmp, errno);
    }
    if (::fsync(fd.get()) != 0) return IoError("cannot fsync " + tmp, errno);
    if (fd.Close() != 0) return IoError("cannot close " + tmp, errno);
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
      return IoError("cannot rename " + tmp + " to " + final_path, errno);
    }
    // Makes the rename itself durable; a failure here only risks losing this cached block.
    UniqueFd dir_fd(::open(shard_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir_fd.valid()) (void)::fsync(dir_fd.get());
    return OkStatus();
  }();
  std::lock_guard<std::mutex> lock(mu_);
  if (!status.ok()) {
    ::unlink(tmp.c_str());  // may not exist (failed open or rename done): nothing to report
    ++stats_.write_errors;
    return status.WithContext("kv disk store");
  }
  ++stats_.writes;
  InsertLocked(hash, file_bytes_);
  EvictLocked();
  return OkStatus();
}

Status KvDiskStore::Read(const BlockHash& hash, std::span<uint8_t> out) {
  if (static_cast<int64_t>(out.size()) != format_.block_bytes) {
    return InvalidArgumentError("kv disk store: read buffer of " + std::to_string(out.size()) +
                                " bytes, blocks are " + std::to_string(format_.block_bytes));
  }
  const std::string hex = hash.ToHex();
  auto miss = [&](const std::string& why) {
    std::fill(out.begin(), out.end(), uint8_t{0});
    std::lock_guard<std::mutex> lock(mu_);
    EraseLocked(hash);
    ++stats_.misses;
    return NotFoundError("kv block " + hex + " not on disk: " + why);
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!index_.contains(hash)) {
      ++stats_.misses;
      return NotFoundError("kv block " + hex + " not on disk");
    }
  }
  const std::string path = PathOf(hash);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return miss(std::string("cannot open: ") + std::strerror(errno));
  StatusOr<KvDiskHeader> header = VerifyHeader(fd.get(), hash);
  Status bad = header.status();
  if (header.ok()) {
    int64_t n = ReadFull(fd.get(), out.data(), format_.block_bytes, header->header_bytes);
    if (n < 0) return miss(std::string("read error: ") + std::strerror(errno));
    if (n != format_.block_bytes) {
      bad = DataLossError("payload truncated");
    } else if (!(PayloadHash(out) == header->payload_xxh3)) {
      bad = DataLossError("payload hash mismatch");
    }
  }
  if (!bad.ok()) {
    Quarantine(path, bad);
    return miss(bad.ToString());
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(hash);
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru_it);
  ++stats_.hits;
  return OkStatus();
}

KvDiskStats KvDiskStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  KvDiskStats s = stats_;
  s.entries = static_cast<int64_t>(index_.size());
  return s;
}

}  // namespace loom
