// hf_to_gguf MODEL_DIR OUT.gguf: writes the GGUF llama.cpp's converter would make of a tiny HF
// model directory (see hf_to_gguf.h for what is covered).
#include <cstdio>

#include "hf_to_gguf.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR OUT.gguf\n", argv[0]);
    return 2;
  }
  loom::StatusOr<loom::GgufWriter> w = loom::ConvertHfToGguf(argv[1]);
  loom::Status s = w.ok() ? w->WriteFile(argv[2]) : w.status();
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
