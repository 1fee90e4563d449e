#include "io/gguf_writer.h"

#include <cstring>
#include <fstream>

#include "io/gguf_types.h"

namespace loom {
namespace {

template <typename T>
void PutLe(std::string* out, T v) {
  using U = std::make_unsigned_t<T>;
  U u = static_cast<U>(v);
  for (size_t i = 0; i < sizeof(T); ++i) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

void PutString(std::string* out, const std::string& s) {
  PutLe<uint64_t>(out, s.size());
  out->append(s);
}

void PutPadding(std::string* out, uint32_t alignment) {
  out->append((alignment - out->size() % alignment) % alignment, '\0');
}

// The value without its type tag.
void PutValue(std::string* out, const GgufValue& v) {
  switch (v.type()) {
    case GgufType::kU8:
      PutLe<uint8_t>(out, static_cast<uint8_t>(v.raw_unsigned()));
      break;
    case GgufType::kI8:
      PutLe<int8_t>(out, static_cast<int8_t>(v.raw_signed()));
      break;
    case GgufType::kU16:
      PutLe<uint16_t>(out, static_cast<uint16_t>(v.raw_unsigned()));
      break;
    case GgufType::kI16:
      PutLe<int16_t>(out, static_cast<int16_t>(v.raw_signed()));
      break;
    case GgufType::kU32:
      PutLe<uint32_t>(out, static_cast<uint32_t>(v.raw_unsigned()));
      break;
    case GgufType::kI32:
      PutLe<int32_t>(out, static_cast<int32_t>(v.raw_signed()));
      break;
    case GgufType::kU64:
      PutLe<uint64_t>(out, v.raw_unsigned());
      break;
    case GgufType::kI64:
      PutLe<int64_t>(out, v.raw_signed());
      break;
    case GgufType::kF32: {
      float f = static_cast<float>(v.raw_float());
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      PutLe<uint32_t>(out, bits);
      break;
    }
    case GgufType::kF64: {
      double d = v.raw_float();
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      PutLe<uint64_t>(out, bits);
      break;
    }
    case GgufType::kBool:
      PutLe<uint8_t>(out, v.raw_bool() ? 1 : 0);
      break;
    case GgufType::kString:
      PutString(out, v.raw_string());
      break;
    case GgufType::kArray:
      PutLe<uint32_t>(out, static_cast<uint32_t>(v.array_type()));
      PutLe<uint64_t>(out, v.elements().size());
      for (const GgufValue& e : v.elements()) PutValue(out, e);
      break;
  }
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0) << "alignment " << alignment;
  if (alignment != 32) SetU32("general.alignment", alignment);
}

void GgufWriter::Set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

size_t GgufWriter::CheckedTensorBytes(const std::string& name, DType dtype,
                                      const Shape& shape) const {
  for (const PendingTensor& t : tensors_) CHECK(t.name != name) << "duplicate tensor " << name;
  CHECK(shape.ndim() >= 1 && shape.ndim() <= 4) << name;
  GgmlTypeFromDType(dtype);  // CHECKs that the dtype has a GGUF encoding
  const int64_t cols = shape[shape.ndim() - 1];
  const int64_t rows = cols == 0 ? 0 : shape.numel() / cols;
  return static_cast<size_t>(rows) * RowBytes(dtype, cols);
}

void GgufWriter::AddTensor(const std::string& name, DType dtype, const Shape& shape,
                           std::string_view bytes) {
  const size_t expected = CheckedTensorBytes(name, dtype, shape);
  CHECK_EQ(bytes.size(), expected)
      << "tensor " << name << " " << shape.ToString() << " " << DTypeName(dtype);
  tensors_.push_back({name, dtype, shape, expected, std::string(bytes), false});
}

void GgufWriter::AddTensor(const std::string& name, const Tensor& tensor) {
  CHECK(tensor.device() == Device::kCpu) << name << " is not a host tensor";
  AddTensor(name, tensor.dtype(), tensor.shape(),
            std::string_view(static_cast<const char*>(tensor.data()), tensor.nbytes()));
}

void GgufWriter::DeclareTensor(const std::string& name, DType dtype, const Shape& shape) {
  const size_t nbytes = CheckedTensorBytes(name, dtype, shape);
  tensors_.push_back({name, dtype, shape, nbytes, std::string(), true});
}

std::string GgufWriter::Header() const {
  std::string out;
  PutLe<uint32_t>(&out, 0x46554747);  // "GGUF"
  PutLe<uint32_t>(&out, 3);
  PutLe<uint64_t>(&out, tensors_.size());
  PutLe<uint64_t>(&out, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    PutString(&out, key);
    PutLe<uint32_t>(&out, static_cast<uint32_t>(value.type()));
    PutValue(&out, value);
  }
  uint64_t offset = 0;  // relative to the data section
  for (const PendingTensor& t : tensors_) {
    PutString(&out, t.name);
    PutLe<uint32_t>(&out, static_cast<uint32_t>(t.shape.ndim()));
    for (int d = t.shape.ndim() - 1; d >= 0; --d) PutLe<uint64_t>(&out, t.shape[d]);
    PutLe<uint32_t>(&out, GgmlTypeFromDType(t.dtype));
    PutLe<uint64_t>(&out, offset);
    offset += t.nbytes + PaddingAfter(t.nbytes);
  }
  PutPadding(&out, alignment_);
  return out;
}

std::string GgufWriter::Serialize() const {
  std::string out = Header();
  for (const PendingTensor& t : tensors_) {
    CHECK(!t.declared) << "tensor " << t.name << " was declared, not added: stream it";
    out.append(t.bytes);
    PutPadding(&out, alignment_);
  }
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return InvalidArgumentError(path + ": cannot create file");
  const std::string bytes = Serialize();
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return DataLossError(path + ": write failed");
  return OkStatus();
}

}  // namespace loom
