#include "io/json_file.h"

#include <algorithm>
#include <filesystem>

#include "base/mapped_file.h"

namespace loom {

StatusOr<nlohmann::json> ParseJson(std::string_view text, std::string_view name) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts the bytes read, so the offending byte is at index e.byte - 1.
    size_t pos = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + pos, '\n'));
    size_t last_newline = pos == 0 ? std::string_view::npos : text.rfind('\n', pos - 1);
    size_t column = last_newline == std::string_view::npos ? pos + 1 : pos - last_newline;
    return InvalidArgumentError(std::string(name) + ": invalid JSON at line " +
                                std::to_string(line) + ", column " + std::to_string(column) +
                                " (byte " + std::to_string(e.byte) + "): " + e.what());
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string(name) + ": invalid JSON: " + e.what());
  }
}

StatusOr<nlohmann::json> LoadJsonFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFoundError(path + ": file does not exist");
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseJson(text, path);
}

}  // namespace loom
