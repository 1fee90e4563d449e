// RenderOptions: per-render settings and safety limits of ChatTemplate::Render.
#pragma once

#include <cstdint>
#include <optional>

namespace loom::chat_template {

struct RenderOptions {
  // strftime_now() clock: seconds since the Unix epoch; unset = the current time.
  std::optional<int64_t> now_unix_seconds;
  // strftime_now() renders UTC instead of local time (transformers uses local time).
  bool utc = false;
  // Limits that turn runaway templates into errors (ResourceExhausted), not hangs or crashes.
  int64_t max_loop_iterations = 1'000'000;  // total for-loop iterations of one render
  int64_t max_output_bytes = 64 << 20;      // rendered text, and any single string built
  int32_t max_call_depth = 64;              // nested macro calls (recursion)
};

}  // namespace loom::chat_template
