// `loom list [--models-dir DIR] [--json]`: the models MODEL can name without a path — those in
// --models-dir and in the Hugging Face hub cache (io/model_library.h) — described from their files
// (cli/model_description.h): a table, or with --json one object {"hf_cache", "models_dir",
// "models": [ModelCardJson...]}. A broken snapshot is a row marked incomplete, never an error.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_description.h"
#include "cli/session.h"

namespace loom {
namespace {

using nlohmann::ordered_json;

struct ListFlags {
  std::string models_dir;
  bool json = false;
};

// "4.9 GB", "512 MB", "37 KB": decimal units, as the Hub shows file sizes.
std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 || v >= 100 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

void PrintTable(const std::vector<ModelCard>& cards) {
  std::vector<std::vector<std::string>> rows = {{"ID", "ARCH", "PARAMS", "FORMAT", "QUANT",
                                                 "CONTEXT", "SIZE", "TOOLS", "REASONING",
                                                 "STATUS"}};
  for (const ModelCard& c : cards) {
    std::string status = "ok";
    if (!c.problems.empty()) {
      status = "incomplete: " + c.problems[0];
      if (c.problems.size() > 1) status += " (+" + std::to_string(c.problems.size() - 1) + ")";
    }
    const auto& tools = c.capabilities.tool_format;
    rows.push_back({c.id, OrDash(c.architecture), OrDash(FormatParams(c.num_params)),
                    OrDash(c.format), OrDash(c.quantization),
                    c.context_length > 0 ? std::to_string(c.context_length) : "-",
                    FormatBytes(c.size_bytes),
                    tools.has_value() ? std::string(ToolCallFormatName(*tools)) : "-",
                    c.capabilities.reasoning ? "think" : "-", status});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

void RunList(const ListFlags& f) {
  const ModelLibraryOptions options = ResolveLibraryOptions(ProcessEnvironment(), f.models_dir);
  const ModelLibrary library(options);
  std::vector<ModelCard> cards;
  for (const LibraryEntry& e : library.List()) cards.push_back(DescribeLibraryEntry(e));
  auto or_null = [](const std::string& s) { return s.empty() ? ordered_json() : ordered_json(s); };
  if (f.json) {
    ordered_json models = ordered_json::array();
    for (const ModelCard& c : cards) models.push_back(ModelCardJson(c));
    const ordered_json out{{"hf_cache", or_null(options.hub_cache_dir)},
                           {"models_dir", or_null(options.models_dir)},
                           {"models", std::move(models)}};
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::string where = "the Hugging Face cache " + OrDash(options.hub_cache_dir);
  if (!options.models_dir.empty()) where = options.models_dir + " and " + where;
  if (cards.empty()) {
    std::printf(
        "no local models in %s\n(loom does not download; fetch one with `huggingface-cli "
        "download ORG/NAME`, or pass --models-dir DIR)\n",
        where.c_str());
    return;
  }
  PrintTable(cards);
  std::printf(
      "\n%zu model%s in %s; PARAMS from the weights' headers (or config.json's sizes "
      "when they are missing); serve one with `loom serve ID`\n",
      cards.size(), cards.size() == 1 ? "" : "s", where.c_str());
}

}  // namespace

void AddListCommand(CLI::App& root) {
  auto f = std::make_shared<ListFlags>();
  CLI::App* cmd = root.add_subcommand(
      "list", "list the local models a MODEL id can name (--models-dir, the Hugging Face cache)");
  AddModelsDirFlag(cmd, &f->models_dir);
  cmd->add_flag("--json", f->json, "print one JSON object (every field, unknown ones null)");
  cmd->callback([f] { RunList(*f); });
}

}  // namespace loom
