// Facts about the machine a launcher runs on: its environment, a free TCP port, the user's
// paths under `bazel run`, and whether a machine-list entry names this machine.
//
// Thread safety: all functions may be called from any thread (they read process state only).
#ifndef VARUNA_LAUNCH_HOST_H_
#define VARUNA_LAUNCH_HOST_H_

#include <map>
#include <string>

namespace varuna {

// This process's environment, NAME -> value.
std::map<std::string, std::string> ProcessEnvironment();

// A TCP port that is free on this host now (bound and released), or 0 if none could be bound.
int FreeTcpPort();

// The directory the user started from: $BUILD_WORKING_DIRECTORY under `bazel run`, else the
// current directory.
std::string UserDirectory(const std::map<std::string, std::string>& environment);

// `path` as the user meant it: relative paths are taken from UserDirectory. Empty stays empty.
std::string UserPath(const std::string& path,
                     const std::map<std::string, std::string>& environment);

// This machine's host name (gethostname), or "" if it has none.
std::string HostName();

// Whether `host` (a machine-list entry) is this machine: 127.0.0.1, localhost, ::1 or
// `host_name` (HostName()).
bool IsThisMachine(const std::string& host, const std::string& host_name);

}  // namespace varuna

#endif  // VARUNA_LAUNCH_HOST_H_
