// libFuzzer entry point for the safetensors parser: any input must give OK or a Status, never a
// crash, and every tensor of an accepted file must be readable in full.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = loom::SafetensorsFile::OpenFromMemory(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
  if (!file.ok()) return 0;
  volatile uint8_t sink = 0;
  for (const std::string& name : (*file)->names()) {
    auto t = (*file)->GetTensor(name);
    if (!t.ok()) continue;
    const auto* bytes = static_cast<const uint8_t*>(t->data());
    sink = sink ^ bytes[0] ^ bytes[t->nbytes() - 1];  // ASan checks both ends are in bounds
  }
  return 0;
}
