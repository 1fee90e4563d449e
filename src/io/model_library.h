// ModelLibrary: where a MODEL argument that is not a path is found, and what `loom list` lists.
// Two places, searched in this order (nothing is ever downloaded):
//
//   --models-dir DIR     DIR/org/name/, DIR/name/ (a model directory, or a directory of .gguf
//                        files), then DIR/name*.gguf
//   the HF hub cache     <cache>/models--org--name/snapshots/<commit>/ at --revision (hf_cache.h)
//
// A model is a Hugging Face directory (config.json + *.safetensors) or one .gguf file. A GGUF
// repo (.gguf files and no config.json) holds one file per quantization; the file is picked by
// the quant tag (`--quant Q4_K_M` or `org/name:Q4_K_M`, as llama.cpp and ollama take it), else
// it is the only one, else the error lists the candidates.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom {

struct ModelLibraryOptions {
  std::string hub_cache_dir;  // the HF hub cache ("" = none)
  std::string models_dir;     // --models-dir ("" = none)
};

// A MODEL argument read as an id: "Qwen/Qwen3-8B:Q4_K_M" -> {"Qwen/Qwen3-8B", "Q4_K_M"}.
struct ModelRef {
  std::string repo_id;  // "org/name" or "name"
  std::string quant;    // "" = none given
};
// nullopt when `arg` cannot be an id: empty parts, more than one '/', a leading '.', '/' or '~',
// a name ending in .gguf.
std::optional<ModelRef> ParseModelRef(std::string_view arg);

// Where a MODEL argument led.
struct ResolvedModel {
  std::string path;      // a model directory or a .gguf file, as LoadModel takes it
  std::string id;        // the name /v1/models serves it under ("Qwen/Qwen3-8B", "org/x:Q4_K_M")
  std::string source;    // "path", "models-dir" or "hf-cache"
  std::string revision;  // hf-cache: the revision asked for ("main"), else ""
  std::string commit;    // hf-cache: the snapshot's commit, else ""
};

// One model `loom list` shows: a repo's snapshot, or one file of a GGUF repo.
struct LibraryEntry {
  std::string id;        // what MODEL can say to get this model back (Resolve(id) finds it)
  std::string source;    // "models-dir" or "hf-cache"
  std::string path;      // the model directory or .gguf file
  std::string format;    // "safetensors" or "gguf"; "" when the snapshot is too broken to tell
  std::string revision;  // hf-cache: the refs naming the commit ("main"), "" when none does
  std::string commit;    // hf-cache
  // On disk: the directory's distinct files (a blob linked twice counts once), or the .gguf.
  int64_t size_bytes = 0;
  // Why the model cannot be loaded as it is ("no config.json", "missing blobs: x, y"); empty
  // when complete.
  std::vector<std::string> problems;
};

// The quant tag in a GGUF file name: the longest llama.cpp file type name ("Q4_K_M", "F16",
// ...) standing as a word of the stem (between '-', '.', '_' or the ends, case-insensitive);
// "" when there is none.
std::string GgufQuantTag(std::string_view file_name);

class ModelLibrary {
 public:
  explicit ModelLibrary(ModelLibraryOptions options) : options_(std::move(options)) {}

  const ModelLibraryOptions& options() const { return options_; }

  // Resolves MODEL: an existing path is taken as it is (a directory of .gguf files picks one
  // by `quant`); anything else is read as an id (ParseModelRef; a ":QUANT" suffix and `quant`
  // must agree) and searched for as above. `revision` ("" = main) applies to the HF cache.
  // NotFound lists every path looked at and the `huggingface-cli download` command that would
  // fetch the model; FailedPrecondition for an incomplete snapshot; InvalidArgument for an
  // ambiguous or unmatched quant (listing the candidates).
  StatusOr<ResolvedModel> Resolve(const std::string& model, const std::string& revision,
                                  const std::string& quant) const;

  // Every model in --models-dir and the HF cache (the default snapshot of each repo:
  // DefaultHfCommit), --models-dir first, then by id. Never fails: a broken model is an entry
  // with problems.
  std::vector<LibraryEntry> List() const;

 private:
  ModelLibraryOptions options_;
};

}  // namespace loom
