// ProgressFn: how far a long operation has come (reading a model's weights), reported by the room
// that does the work and drawn by the CLI (cli/progress_bar.h), so that no lower room prints.
#pragma once

#include <cstdint>
#include <functional>

namespace loom {

// `done` and `total` in the operation's unit (bytes for weights); `total` may be an estimate that
// grows, never below `done`; the last call has done == total. Called on the working thread, once
// per unit of work (a tensor): it must be cheap. An empty function reports nothing.
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

}  // namespace loom
