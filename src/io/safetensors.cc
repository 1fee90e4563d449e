#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "io/json_file.h"

namespace loom {
namespace {

using json = nlohmann::json;

// safetensors dtype names loom knows but does not load (so the error can say "unsupported"
// rather than "unknown").
constexpr std::string_view kUnsupportedDTypes[] = {
    "F64",  "I64",     "I32",     "I16",     "I8",      "U16", "U32", "U64",
    "BOOL", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64"};

uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A non-negative JSON integer, or -1.
int64_t JsonToIndex(const json& j) {
  if (j.is_number_unsigned()) {
    uint64_t v = j.get<uint64_t>();
    return v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v);
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    return v < 0 ? -1 : v;
  }
  return -1;
}

StatusOr<SafetensorsTensorInfo> ParseTensorEntry(const std::string& path, const std::string& name,
                                                 const json& entry, size_t data_start,
                                                 size_t data_size) {
  std::string where = path + ": tensor '" + name + "'";
  if (!entry.is_object()) return InvalidArgumentError(where + ": entry is not a JSON object");
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return InvalidArgumentError(where + ": missing or non-string \"dtype\"");
  }
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return InvalidArgumentError(where + ": missing or non-array \"shape\"");
  }
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return InvalidArgumentError(where + ": \"data_offsets\" must be an array [begin, end]");
  }

  SafetensorsTensorInfo info;
  info.name = name;
  const std::string& dtype = dtype_it->get_ref<const std::string&>();
  if (dtype == "F32") {
    info.dtype = DType::kF32;
  } else if (dtype == "F16") {
    info.dtype = DType::kF16;
  } else if (dtype == "BF16") {
    info.dtype = DType::kBF16;
  } else if (dtype == "F8_E4M3") {
    info.dtype = DType::kF8E4M3;
  } else if (dtype == "U8") {
    info.dtype = DType::kU8;
  } else if (std::find(std::begin(kUnsupportedDTypes), std::end(kUnsupportedDTypes), dtype) !=
             std::end(kUnsupportedDTypes)) {
    return UnimplementedError(where + ": dtype " + dtype +
                              " is not supported (loom loads F32, F16, BF16, F8_E4M3 and U8)");
  } else {
    return InvalidArgumentError(where + ": unknown dtype \"" + dtype + "\"");
  }

  if (shape_it->size() > 4) {
    return UnimplementedError(where + ": shape has " + std::to_string(shape_it->size()) +
                              " dims; loom supports at most 4");
  }
  std::vector<int64_t> dims;
  for (const json& d : *shape_it) {
    int64_t v = JsonToIndex(d);
    if (v < 0) return InvalidArgumentError(where + ": shape entries must be integers >= 0");
    dims.push_back(v);
  }
  if (dims.empty()) dims.push_back(1);  // a 0-d scalar
  int64_t numel = CheckedNumel(dims);
  if (numel < 0) return InvalidArgumentError(where + ": shape is too large");
  info.shape = ShapeFromDims(dims);

  int64_t begin = JsonToIndex((*offsets_it)[0]);
  int64_t end = JsonToIndex((*offsets_it)[1]);
  if (begin < 0 || end < 0) {
    return InvalidArgumentError(where + ": data_offsets must be integers >= 0");
  }
  std::string range = "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end) return InvalidArgumentError(where + ": data_offsets " + range + " are reversed");
  if (static_cast<uint64_t>(end) > data_size) {
    return DataLossError(where + ": data_offsets " + range + " run past the end of the data (" +
                         std::to_string(data_size) + " bytes): truncated file?");
  }
  size_t expected =
      static_cast<size_t>(numel) * static_cast<size_t>(GetDTypeInfo(info.dtype).block_bytes);
  if (static_cast<size_t>(end - begin) != expected) {
    return InvalidArgumentError(where + ": data_offsets " + range + " hold " +
                                std::to_string(end - begin) + " bytes but shape " +
                                info.shape.ToString() + " of " + dtype + " needs " +
                                std::to_string(expected) + " (size mismatch)");
  }
  info.offset_bytes = data_start + static_cast<size_t>(begin);
  info.size_bytes = expected;
  return info;
}

}  // namespace

StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  ASSIGN_OR_RETURN(FileBytes bytes, FileBytes::Map(path));
  return Parse(std::move(bytes));
}

StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::OpenFromMemory(std::string bytes,
                                                                           std::string name) {
  return Parse(FileBytes::FromMemory(std::move(bytes), std::move(name)));
}

StatusOr<std::shared_ptr<SafetensorsFile>> SafetensorsFile::Parse(FileBytes bytes) {
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile(std::move(bytes)));
  RETURN_IF_ERROR(file->ParseHeader());
  return file;
}

Status SafetensorsFile::ParseHeader() {
  const std::string& path = bytes_.name();
  const size_t size = bytes_.size();
  if (size < 8) {
    return DataLossError(path + ": file is " + std::to_string(size) +
                         " bytes, too small for the 8-byte safetensors header length (empty or "
                         "truncated file)");
  }
  const uint64_t header_len = LoadLe64(bytes_.data());
  if (header_len > kMaxHeaderBytes) {
    return InvalidArgumentError(path + ": header length " + std::to_string(header_len) +
                                " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                                " bytes (not a safetensors file?)");
  }
  if (header_len > size - 8) {
    return DataLossError(path + ": header length " + std::to_string(header_len) +
                         " runs past the end of the file (" + std::to_string(size) +
                         " bytes): truncated file?");
  }
  std::string_view text(reinterpret_cast<const char*>(bytes_.data()) + 8,
                        static_cast<size_t>(header_len));
  ASSIGN_OR_RETURN(json header, ParseJson(text, path + " (safetensors header)"));
  if (!header.is_object()) return InvalidArgumentError(path + ": header is not a JSON object");

  const size_t data_start = 8 + static_cast<size_t>(header_len);
  const size_t data_size = size - data_start;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) {
        return InvalidArgumentError(path + ": __metadata__ must be an object of strings");
      }
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) {
          return InvalidArgumentError(path + ": __metadata__[\"" + mkey + "\"] is not a string");
        }
        metadata_[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    ASSIGN_OR_RETURN(SafetensorsTensorInfo info,
                     ParseTensorEntry(path, key, value, data_start, data_size));
    tensors_.emplace(key, std::move(info));
  }

  // No two tensors may share bytes (empty tensors own none).
  std::vector<const SafetensorsTensorInfo*> by_offset;
  for (const auto& [name, info] : tensors_) {
    if (info.size_bytes > 0) by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset_bytes < b->offset_bytes; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsTensorInfo& prev = *by_offset[i - 1];
    const SafetensorsTensorInfo& cur = *by_offset[i];
    if (cur.offset_bytes < prev.offset_bytes + prev.size_bytes) {
      return InvalidArgumentError(path + ": data of tensors '" + prev.name + "' and '" + cur.name +
                                  "' overlap");
    }
  }
  return OkStatus();
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) out.push_back(name);
  return out;
}

const SafetensorsTensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

StatusOr<Tensor> SafetensorsFile::GetTensor(const std::string& name) const {
  const SafetensorsTensorInfo* info = Find(name);
  if (info == nullptr) return NotFoundError(path() + ": no tensor named '" + name + "'");
  if (info->shape.numel() == 0) {
    return InvalidArgumentError(path() + ": tensor '" + name + "' has shape " +
                                info->shape.ToString() + " with zero elements");
  }
  const uint8_t* src = bytes_.data() + info->offset_bytes;
  const size_t elem_bytes = static_cast<size_t>(GetDTypeInfo(info->dtype).block_bytes);
  if (reinterpret_cast<uintptr_t>(src) % elem_bytes != 0) {
    Tensor copy = HostTensor(info->dtype, info->shape);
    std::memcpy(copy.data(), src, info->size_bytes);
    return copy;
  }
  return Tensor(info->dtype, info->shape,
                MakeBorrowedBuffer(src, info->size_bytes, Device::kCpu, shared_from_this()), 0);
}

}  // namespace loom
