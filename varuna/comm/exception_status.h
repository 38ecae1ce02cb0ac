// Turns an exception from gloo or LibTorch's c10d store into a status. Header-only because
// libvaruna_gloo.so uses it too.
#ifndef VARUNA_COMM_EXCEPTION_STATUS_H_
#define VARUNA_COMM_EXCEPTION_STATUS_H_

#include <cctype>
#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace varuna::comm {

// "<what> failed: <e.what()>" as DeadlineExceeded when the exception reports a timeout
// (gloo: "Timed out ...", "Connect timeout"; c10d: "wait timeout after ..."), else as
// Unavailable: the other failures they report are broken or refused connections.
inline absl::Status StatusFromException(const std::string& what, const std::exception& e) {
  const std::string message = absl::StrCat(what, " failed: ", e.what());
  std::string lower = message;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos) {
    return absl::DeadlineExceededError(message);
  }
  return absl::UnavailableError(message);
}

}  // namespace varuna::comm

#endif  // VARUNA_COMM_EXCEPTION_STATUS_H_
