#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

namespace loom {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32

// Smallest encodings, used to bound counts by the bytes left before allocating anything.
constexpr size_t kMinKvBytes = 8 + 4 + 1;                  // empty key, type, a u8 value
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, 1 dim, type, offset

size_t MinEncodedBytes(GgufType type) {
  if (type == GgufType::kString) return 8;
  if (type == GgufType::kArray) return 4 + 8;
  return GgufScalarBytes(type);
}

// Bounds-checked little-endian reads over the file; every failure names the path, what was
// being read and where.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  Status Truncated(std::string_view what) const {
    return DataLossError(path_ + ": truncated file: " + std::string(what) + " at byte " +
                         std::to_string(pos_) + " runs past the end of the file (" +
                         std::to_string(size_) + " bytes)");
  }

  template <typename T>
  Status Read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) return Truncated(what);
    using U = std::make_unsigned_t<T>;
    U v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<U>(v | (U{data_[pos_ + i]} << (8 * i)));
    pos_ += sizeof(T);
    *out = static_cast<T>(v);
    return OkStatus();
  }

  Status ReadString(std::string* out, std::string_view what) {
    uint64_t len = 0;
    RETURN_IF_ERROR(Read(&len, what));
    if (len > remaining()) {
      return DataLossError(path_ + ": " + std::string(what) + ": string length " +
                           std::to_string(len) + " at byte " + std::to_string(pos_ - 8) +
                           " exceeds the " + std::to_string(remaining()) +
                           " bytes left in the file (corrupt or truncated)");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return OkStatus();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  const std::string& path_;
  size_t pos_ = 0;
};

Status ReadValue(Reader& r, GgufType type, int depth, const std::string& where,
                 const std::string& path, GgufValue* out) {
  switch (type) {
    case GgufType::kU8: {
      uint8_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      *out = GgufValue::U8(v);
      break;
    }
    case GgufType::kI8: {
      int8_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      *out = GgufValue::I8(v);
      break;
    }
    case GgufType::kU16: {
      uint16_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      *out = GgufValue::U16(v);
      break;
    }
    case GgufType::kI16: {
      int16_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      *out = GgufValue::I16(v);
      break;
    }
    case GgufType::kU32: {
      uint32_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      *out = GgufValue::U32(v);
      break;
    }
    case GgufType::kI32: {
      int32_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      *out = GgufValue::I32(v);
      break;
    }
    case GgufType::kU64: {
      uint64_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      *out = GgufValue::U64(v);
      break;
    }
    case GgufType::kI64: {
      int64_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      *out = GgufValue::I64(v);
      break;
    }
    case GgufType::kF32: {
      uint32_t bits = 0;
      RETURN_IF_ERROR(r.Read(&bits, where));
      float f;
      std::memcpy(&f, &bits, 4);
      *out = GgufValue::F32(f);
      break;
    }
    case GgufType::kF64: {
      uint64_t bits = 0;
      RETURN_IF_ERROR(r.Read(&bits, where));
      double d;
      std::memcpy(&d, &bits, 8);
      *out = GgufValue::F64(d);
      break;
    }
    case GgufType::kBool: {
      uint8_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, where));
      if (v > 1) {
        return InvalidArgumentError(path + ": " + where + ": bool value " + std::to_string(v) +
                                    " is not 0 or 1");
      }
      *out = GgufValue::Bool(v != 0);
      break;
    }
    case GgufType::kString: {
      std::string s;
      RETURN_IF_ERROR(r.ReadString(&s, where));
      *out = GgufValue::String(std::move(s));
      break;
    }
    case GgufType::kArray: {
      if (depth >= GgufFile::kMaxArrayDepth) {
        return InvalidArgumentError(path + ": " + where + ": arrays nested deeper than " +
                                    std::to_string(GgufFile::kMaxArrayDepth));
      }
      uint32_t elem_id = 0;
      uint64_t count = 0;
      RETURN_IF_ERROR(r.Read(&elem_id, where));
      if (!IsValidGgufType(elem_id)) {
        return InvalidArgumentError(path + ": " + where + ": unknown array element type " +
                                    std::to_string(elem_id));
      }
      RETURN_IF_ERROR(r.Read(&count, where));
      const GgufType elem = static_cast<GgufType>(elem_id);
      if (count > GgufFile::kMaxArrayElems) {
        return InvalidArgumentError(path + ": " + where + ": array length " +
                                    std::to_string(count) + " is absurd (limit " +
                                    std::to_string(GgufFile::kMaxArrayElems) + ")");
      }
      if (count > r.remaining() / MinEncodedBytes(elem)) {
        return DataLossError(path + ": " + where + ": array length " + std::to_string(count) +
                             " of " + std::string(GgufTypeName(elem)) + " exceeds the " +
                             std::to_string(r.remaining()) +
                             " bytes left in the file (corrupt or truncated)");
      }
      std::vector<GgufValue> elements(static_cast<size_t>(count), GgufValue::U8(0));
      for (GgufValue& e : elements) {
        RETURN_IF_ERROR(ReadValue(r, elem, depth + 1, where, path, &e));
      }
      *out = GgufValue::Array(elem, std::move(elements));
      break;
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::shared_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Map(path));
  return Parse(std::move(bytes), /*header_only=*/false);
}

StatusOr<std::shared_ptr<GgufFile>> GgufFile::OpenFromMemory(std::string bytes, std::string name) {
  return Parse(FileBytes::FromMemory(std::move(bytes), std::move(name)), /*header_only=*/false);
}

StatusOr<std::shared_ptr<GgufFile>> GgufFile::OpenHeader(const std::string& path) {
  ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Map(path));
  return Parse(std::move(bytes), /*header_only=*/true);
}

StatusOr<std::shared_ptr<GgufFile>> GgufFile::Parse(FileBytes bytes, bool header_only) {
  std::shared_ptr<GgufFile> file(new GgufFile(std::move(bytes)));
  file->header_only_ = header_only;
  RETURN_IF_ERROR(file->ParseAll());
  return file;
}

Status GgufFile::ParseAll() {
  const std::string& path = bytes_.name();
  const size_t size = bytes_.size();
  Reader r(bytes_.data(), size, path);

  if (size < 4) {
    return DataLossError(path + ": file is " + std::to_string(size) +
                         " bytes, too small for a GGUF header (empty or truncated file)");
  }
  uint32_t magic = 0;
  RETURN_IF_ERROR(r.Read(&magic, "magic"));
  if (magic != kGgufMagic) {
    return InvalidArgumentError(path +
                                ": wrong magic: the file does not start with \"GGUF\" "
                                "(not a GGUF file)");
  }
  RETURN_IF_ERROR(r.Read(&version_, "version"));
  if (version_ == 1) {
    return UnimplementedError(path +
                              ": GGUF version 1 is not supported (re-convert the model "
                              "with a current llama.cpp)");
  }
  if (version_ != 2 && version_ != 3) {
    if ((version_ & 0xffffu) == 0) {
      return UnimplementedError(path + ": big-endian GGUF files are not supported");
    }
    return InvalidArgumentError(path + ": unsupported GGUF version " + std::to_string(version_) +
                                " (loom reads versions 2 and 3)");
  }
  uint64_t num_tensors = 0, num_kv = 0;
  RETURN_IF_ERROR(r.Read(&num_tensors, "tensor count"));
  RETURN_IF_ERROR(r.Read(&num_kv, "metadata count"));
  if (num_tensors > kMaxTensors || num_tensors > r.remaining() / kMinTensorInfoBytes) {
    return InvalidArgumentError(path + ": tensor count " + std::to_string(num_tensors) +
                                " is absurd for a file of " + std::to_string(size) + " bytes");
  }
  if (num_kv > kMaxMetadataKeys || num_kv > r.remaining() / kMinKvBytes) {
    return InvalidArgumentError(path + ": metadata count " + std::to_string(num_kv) +
                                " is absurd for a file of " + std::to_string(size) + " bytes");
  }

  for (uint64_t i = 0; i < num_kv; ++i) {
    std::string key;
    RETURN_IF_ERROR(r.ReadString(&key, "metadata key #" + std::to_string(i)));
    std::string where = "metadata '" + key + "'";
    uint32_t type_id = 0;
    RETURN_IF_ERROR(r.Read(&type_id, where));
    if (!IsValidGgufType(type_id)) {
      return InvalidArgumentError(path + ": " + where + " has unknown value type " +
                                  std::to_string(type_id));
    }
    GgufValue value = GgufValue::U8(0);
    RETURN_IF_ERROR(ReadValue(r, static_cast<GgufType>(type_id), 0, where, path, &value));
    if (!metadata_.emplace(key, std::move(value)).second) {
      return InvalidArgumentError(path + ": duplicate metadata key '" + key + "'");
    }
    metadata_keys_.push_back(std::move(key));
  }

  if (const GgufValue* align = Find("general.alignment")) {
    StatusOr<int64_t> a = align->AsInt();
    if (!a.ok() || *a <= 0 || *a > (1 << 20) || (*a & (*a - 1)) != 0) {
      return InvalidArgumentError(path + ": general.alignment " + align->DebugString() +
                                  " is not a power of two integer <= 2^20");
    }
    alignment_ = static_cast<uint32_t>(*a);
  }

  tensors_.reserve(static_cast<size_t>(num_tensors));
  for (uint64_t i = 0; i < num_tensors; ++i) {
    GgufTensorInfo info;
    RETURN_IF_ERROR(r.ReadString(&info.name, "name of tensor #" + std::to_string(i)));
    const std::string where = path + ": tensor '" + info.name + "'";
    const std::string what = "tensor '" + info.name + "'";
    uint32_t n_dims = 0;
    RETURN_IF_ERROR(r.Read(&n_dims, what));
    if (n_dims < 1 || n_dims > 4) {
      return InvalidArgumentError(where + " has " + std::to_string(n_dims) +
                                  " dims; GGUF tensors have 1..4");
    }
    std::vector<int64_t> ne(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t v = 0;
      RETURN_IF_ERROR(r.Read(&v, what));
      if (v > static_cast<uint64_t>(kMaxTensorElems)) {
        return InvalidArgumentError(where + ": ne[" + std::to_string(d) +
                                    "] = " + std::to_string(v) + " is absurd");
      }
      ne[d] = static_cast<int64_t>(v);
    }
    RETURN_IF_ERROR(r.Read(&info.ggml_type, what));
    uint64_t rel_offset = 0;
    RETURN_IF_ERROR(r.Read(&rel_offset, what));

    std::optional<DType> dtype = DTypeFromGgmlType(info.ggml_type);
    if (!dtype && header_only_) {
      const int64_t numel = CheckedNumel(ne);
      if (numel < 0) return InvalidArgumentError(where + ": element count is absurd");
      std::reverse(ne.begin(), ne.end());
      info.shape = ShapeFromDims(ne);
      if (!tensor_index_.emplace(info.name, tensors_.size()).second) {
        return InvalidArgumentError(path + ": duplicate tensor name '" + info.name + "'");
      }
      tensors_.push_back(std::move(info));
      continue;
    }
    if (!dtype) {
      return UnimplementedError(where + " has ggml type " + GgmlTypeName(info.ggml_type) + " (id " +
                                std::to_string(info.ggml_type) +
                                "), which loom does not support (supported: f32, f16, bf16, "
                                "q8_0, q4_0, q4_K, q5_K, q6_K, mxfp4)");
    }
    info.dtype = *dtype;
    const int64_t numel = CheckedNumel(ne);
    if (numel < 0) return InvalidArgumentError(where + ": element count is absurd");
    const DTypeInfo& dinfo = GetDTypeInfo(info.dtype);
    if (ne[0] % dinfo.block_elems != 0) {
      return InvalidArgumentError(where + ": row length ne[0] = " + std::to_string(ne[0]) +
                                  " is not a multiple of the " + std::string(dinfo.name) +
                                  " block size " + std::to_string(dinfo.block_elems));
    }
    const int64_t rows = ne[0] == 0 ? 0 : numel / ne[0];
    info.size_bytes = static_cast<size_t>(rows) * RowBytes(info.dtype, ne[0]);
    std::reverse(ne.begin(), ne.end());
    info.shape = ShapeFromDims(ne);
    if (rel_offset % alignment_ != 0) {
      return InvalidArgumentError(where + ": data offset " + std::to_string(rel_offset) +
                                  " is not a multiple of the alignment " +
                                  std::to_string(alignment_) + " (unaligned)");
    }
    if (rel_offset > size) {
      return DataLossError(where + ": data offset " + std::to_string(rel_offset) +
                           " runs past the end of the file (" + std::to_string(size) +
                           " bytes): truncated file?");
    }
    info.offset_bytes = static_cast<size_t>(rel_offset);  // made absolute below
    if (!tensor_index_.emplace(info.name, tensors_.size()).second) {
      return InvalidArgumentError(path + ": duplicate tensor name '" + info.name + "'");
    }
    tensors_.push_back(std::move(info));
  }

  data_offset_ = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  if (header_only_) return OkStatus();
  for (GgufTensorInfo& info : tensors_) {
    // Both terms are <= size (checked above / by the reader), so the sum cannot overflow.
    const size_t begin = data_offset_ + info.offset_bytes;
    if (begin > size || info.size_bytes > size - begin) {
      return DataLossError(path + ": tensor '" + info.name + "' data [" + std::to_string(begin) +
                           ", +" + std::to_string(info.size_bytes) +
                           ") runs past the end of the file (" + std::to_string(size) +
                           " bytes): truncated file?");
    }
    info.offset_bytes = begin;
  }
  std::vector<const GgufTensorInfo*> by_offset;
  for (const GgufTensorInfo& info : tensors_) {
    if (info.size_bytes > 0) by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset_bytes < b->offset_bytes; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->offset_bytes <
        by_offset[i - 1]->offset_bytes + by_offset[i - 1]->size_bytes) {
      return InvalidArgumentError(path + ": data of tensors '" + by_offset[i - 1]->name +
                                  "' and '" + by_offset[i]->name + "' overlap");
    }
  }
  return OkStatus();
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

Status GgufFile::Lookup(const std::string& key, const GgufValue** value) const {
  *value = Find(key);
  if (*value == nullptr) return NotFoundError(path() + ": no metadata key '" + key + "'");
  return OkStatus();
}

#define LOOM_GGUF_GETTER_(Type, Name, As)                                                      \
  StatusOr<Type> GgufFile::Name(const std::string& key) const {                                \
    const GgufValue* value;                                                                    \
    RETURN_IF_ERROR(Lookup(key, &value));                                                      \
    StatusOr<Type> result = value->As();                                                       \
    if (!result.ok()) return result.status().WithContext(path() + ": metadata '" + key + "'"); \
    return result;                                                                             \
  }

LOOM_GGUF_GETTER_(std::string, GetString, AsString)
LOOM_GGUF_GETTER_(int64_t, GetInt, AsInt)
LOOM_GGUF_GETTER_(double, GetFloat, AsFloat)
LOOM_GGUF_GETTER_(bool, GetBool, AsBool)
LOOM_GGUF_GETTER_(std::vector<std::string>, GetStringArray, AsStringArray)
LOOM_GGUF_GETTER_(std::vector<float>, GetFloatArray, AsFloatArray)
LOOM_GGUF_GETTER_(std::vector<int64_t>, GetIntArray, AsIntArray)
#undef LOOM_GGUF_GETTER_

std::string GgufFile::architecture() const {
  const GgufValue* v = Find("general.architecture");
  return v != nullptr && v->type() == GgufType::kString ? v->raw_string() : std::string();
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<Tensor> GgufFile::GetTensor(const std::string& name) const {
  const GgufTensorInfo* info = FindTensor(name);
  if (info == nullptr) return NotFoundError(path() + ": no tensor named '" + name + "'");
  if (header_only_) {
    return FailedPreconditionError(path() + ": opened for its header only; tensor '" + name +
                                   "' cannot be read");
  }
  if (info->shape.numel() == 0) {
    return InvalidArgumentError(path() + ": tensor '" + name + "' has shape " +
                                info->shape.ToString() + " with zero elements");
  }
  const uint8_t* src = bytes_.data() + info->offset_bytes;
  // f32 data is read as floats; every other type's widest field is an f16.
  const uintptr_t need = info->dtype == DType::kF32 ? 4 : 2;
  if (reinterpret_cast<uintptr_t>(src) % need != 0) {
    Tensor copy = HostTensor(info->dtype, info->shape);
    std::memcpy(copy.data(), src, info->size_bytes);
    return copy;
  }
  return Tensor(info->dtype, info->shape,
                MakeBorrowedBuffer(src, info->size_bytes, Device::kCpu, shared_from_this()), 0);
}

}  // namespace loom
