// Decimal integers in a range, as a regular expression (for JSON Schema's integer bounds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace loom {

// An anchored regex (for CompileRegex / LowerRegex) matching exactly the JSON integers n with
// lo <= n <= hi, in canonical form (no leading zeros, no "-0", no "+"); an absent bound is
// unbounded. Size O(digits^2) alternatives. Precondition: !lo || !hi || *lo <= *hi.
std::string IntegerRangeRegex(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace loom
