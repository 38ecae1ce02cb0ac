// Turns an exception from gloo or LibTorch (its c10d store, its ops) into one line of text or a
// status. Header-only because libvaruna_gloo.so uses it too.
#ifndef VARUNA_COMM_EXCEPTION_STATUS_H_
#define VARUNA_COMM_EXCEPTION_STATUS_H_

#include <cctype>
#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace varuna::comm {

// An exception's message as one line for a user: without the C++ backtrace LibTorch appends to
// a c10::Error ("\nException raised from ... (most recent call first):\nframe #0: ..."), without
// the source location gloo puts in front ("[./gloo/transport/tcp/pair.cc:598] ", "[enforce fail
// at ./gloo/...cc:12] "), and with any other line breaks turned into spaces. Works on the text
// alone, so it also holds for exceptions from a library that shares no type information.
inline std::string OneLineMessage(const std::exception& e) {
  absl::string_view text = e.what();
  for (absl::string_view backtrace : {"\nException raised from ", "\nframe #0"}) {
    const size_t at = text.find(backtrace);
    if (at != absl::string_view::npos) text = text.substr(0, at);
  }
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find("] ");
    const absl::string_view location = text.substr(0, close);
    if (close != absl::string_view::npos &&
        (absl::StrContains(location, ".cc:") || absl::StrContains(location, ".cpp:") ||
         absl::StrContains(location, ".h:"))) {
      text.remove_prefix(close + 2);
    }
  }
  text = absl::StripTrailingAsciiWhitespace(text);
  return absl::StrReplaceAll(text, {{"\r\n", " "}, {"\n", " "}});
}

// "<what> failed: <the exception's one line>" as DeadlineExceeded when it reports a timeout
// (gloo: "Timed out ...", "Connect timeout"; c10d: "wait timeout after ..."), else as
// Unavailable: the other failures they report are broken or refused connections.
inline absl::Status StatusFromException(const std::string& what, const std::exception& e) {
  const std::string message = absl::StrCat(what, " failed: ", OneLineMessage(e));
  std::string lower = message;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos) {
    return absl::DeadlineExceededError(message);
  }
  return absl::UnavailableError(message);
}

}  // namespace varuna::comm

#endif  // VARUNA_COMM_EXCEPTION_STATUS_H_
