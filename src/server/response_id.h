// Ids the server makes up: a response's ("chatcmpl-…", "msg_…") and a tool call's ("call_…",
// "toolu_…"). Thread-safe.
#pragma once

#include <string>

namespace loom {

// `prefix` + 24 random-looking base-36 characters, distinct within the process.
std::string NewResponseId(const std::string& prefix);

}  // namespace loom
