// Facts about the machine a launcher runs on: its environment, a free TCP port, and whether a
// machine-list entry names this machine. The user's paths: varuna/io/user_paths.h.
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

// This machine's host name (gethostname), or "" if it has none.
std::string HostName();

// Whether `host` (a machine-list entry) is this machine: 127.0.0.1, localhost, ::1 or
// `host_name` (HostName()).
bool IsThisMachine(const std::string& host, const std::string& host_name);

}  // namespace varuna

#endif  // VARUNA_LAUNCH_HOST_H_
