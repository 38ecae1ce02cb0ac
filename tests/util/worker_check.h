// Assertions for the worker processes of multi-process tests (tests/util/subprocess.h): a
// failed check prints what failed and ends the worker at once with kWorkerCheckFailed, which
// the test process then reports with the worker's output.
#ifndef VARUNA_TESTS_UTIL_WORKER_CHECK_H_
#define VARUNA_TESTS_UTIL_WORKER_CHECK_H_

#include <cstdlib>
#include <iostream>

#include "absl/status/status.h"

namespace varuna::testing {

// The exit code of a worker whose check failed.
inline constexpr int kWorkerCheckFailed = 1;

}  // namespace varuna::testing

// Ends the worker with kWorkerCheckFailed unless `cond`; `what` is streamed into the message.
#define WORKER_CHECK(cond, what)                                                \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::cerr << "rank check failed: " << #cond << ": " << what << std::endl; \
      std::_Exit(::varuna::testing::kWorkerCheckFailed);                        \
    }                                                                           \
  } while (0)

// Ends the worker with kWorkerCheckFailed unless the absl::Status `expr` is OK.
#define WORKER_OK(expr)                                                                  \
  do {                                                                                   \
    const absl::Status worker_status = (expr);                                           \
    WORKER_CHECK(worker_status.ok(), #expr << " returned " << worker_status.ToString()); \
  } while (0)

#endif  // VARUNA_TESTS_UTIL_WORKER_CHECK_H_
