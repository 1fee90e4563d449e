// CHECK(cond) << "why": an always-on invariant check (also in release builds). On failure it
// prints file:line, the condition and the streamed message, then aborts. For broken invariants
// only; user input is validated with Status.
#pragma once

#include <sstream>

namespace loom::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Makes `CHECK(c) << x` an expression of type void in both branches.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace loom::internal

#define CHECK(cond)                      \
  (cond) ? (void)0                       \
         : ::loom::internal::Voidify() & \
               ::loom::internal::CheckFailure(__FILE__, __LINE__, #cond).stream()

#define CHECK_OP_(a, b, op) CHECK((a)op(b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_EQ(a, b) CHECK_OP_(a, b, ==)
#define CHECK_NE(a, b) CHECK_OP_(a, b, !=)
#define CHECK_LT(a, b) CHECK_OP_(a, b, <)
#define CHECK_LE(a, b) CHECK_OP_(a, b, <=)
#define CHECK_GT(a, b) CHECK_OP_(a, b, >)
#define CHECK_GE(a, b) CHECK_OP_(a, b, >=)
#define CHECK_OK(expr)                                               \
  do {                                                               \
    ::loom::Status loom_check_status_ = (expr);                      \
    CHECK(loom_check_status_.ok()) << loom_check_status_.ToString(); \
  } while (0)
