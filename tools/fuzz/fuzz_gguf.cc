// libFuzzer entry point for the GGUF parser: any input must give OK or a Status, never a crash,
// and every tensor of an accepted file must be readable in full.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = loom::GgufFile::OpenFromMemory(std::string(reinterpret_cast<const char*>(data), size),
                                             "fuzz.gguf");
  if (!file.ok()) return 0;
  const loom::GgufFile& f = **file;
  for (const auto& [key, value] : f.metadata()) {
    (void)value.DebugString();
    (void)f.GetInt(key);
    (void)f.GetFloat(key);
    (void)f.GetStringArray(key);
    (void)f.GetFloatArray(key);
    (void)f.GetIntArray(key);
  }
  (void)f.architecture();
  volatile uint8_t sink = 0;
  for (const loom::GgufTensorInfo& info : f.tensors()) {
    auto t = f.GetTensor(info.name);
    if (!t.ok()) continue;
    const auto* bytes = static_cast<const uint8_t*>(t->data());
    sink = sink ^ bytes[0] ^ bytes[t->nbytes() - 1];  // ASan checks both ends are in bounds
  }
  return 0;
}
