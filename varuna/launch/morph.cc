#include "varuna/launch/morph.h"

#include <stdio.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "varuna/checkpoint/manifest.h"
#include "varuna/flags/flag_parser.h"
#include "varuna/io/posix_file.h"
#include "varuna/io/user_paths.h"
#include "varuna/launch/config.h"
#include "varuna/launch/host.h"
#include "varuna/launch/worker_group.h"

namespace varuna {
namespace {

constexpr std::chrono::seconds kListPoll(1);

bool IsLoopbackName(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

void Say(const MorphContext& context, const std::string& text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&out, "[launch] ", line, "\n");
  }
  dprintf(context.message_fd, "%s", out.c_str());
}

// Polls the machine list until `ready` accepts what it lists; says `waiting` once first.
std::vector<std::string> WaitForList(
    const std::string& path, const std::function<bool(const std::vector<std::string>&)>& ready,
    const std::string& waiting, const MorphContext& context) {
  bool said = false;
  while (true) {
    absl::StatusOr<std::vector<std::string>> hosts = ReadMachineList(path);
    if (hosts.ok() && !hosts->empty() && ready(*hosts)) return *hosts;
    if (!said) {
      Say(context,
          absl::StrCat(waiting,
                       hosts.ok() ? "" : absl::StrCat(" (", hosts.status().message(), ")")));
      said = true;
    }
    std::this_thread::sleep_for(kListPoll);
  }
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseMachineList(absl::string_view text,
                                                          const std::string& path) {
  std::vector<std::string> hosts;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    if (words.size() > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("machine list ", path, " line ", number, " \"",
                       absl::StripAsciiWhitespace(line), "\" has ", words.size(),
                       " words: write one host per line (each runs "
                       "--gpus_per_node workers; repeat a host to run several nodes on it)"));
    }
    hosts.emplace_back(words[0]);
  }
  return hosts;
}

absl::StatusOr<std::vector<std::string>> ReadMachineList(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::Status(
        text.status().code(),
        absl::StrCat("cannot read the machine list --machine_list=", path, ": ",
                     text.status().message(), ": give a file of the machines, one host per line"));
  }
  return ParseMachineList(*text, path);
}

std::optional<std::string> WorkerFlagValue(const std::vector<std::string>& command,
                                           const std::string& name) {
  if (command.empty()) return std::nullopt;
  return FindFlagValue(std::vector<std::string>(command.begin() + 1, command.end()), name);
}

std::vector<std::string> ResumeCommand(const std::vector<std::string>& command,
                                       const std::string& load) {
  std::vector<std::string> out;
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string key = i == 0 ? "" : FlagKeyOf(command[i]);
    if (key == "load" || key == "load-iteration" || key == "resume-step") {
      if (command[i].find('=') == std::string::npos) ++i;  // its value is the next argument
      continue;
    }
    out.push_back(command[i]);
  }
  out.push_back("--load=" + load);
  return out;
}

std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

absl::Status ValidateMorphOptions(const LaunchOptions& options) {
  auto invalid = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (options.machine_list.empty()) {
    return invalid("--morph needs --machine_list=FILE: the machines to run on, one host per line");
  }
  if (options.nnodes != 1 || options.node_rank != 0) {
    return invalid("--morph takes the nodes from --machine_list=", options.machine_list,
                   ": remove --nnodes and --node_rank (the manager starts every node itself)");
  }
  if (options.stop_on_stdin) {
    return invalid("--stop_on_stdin is for the node launchers a --morph manager starts: remove it");
  }
  if (absl::StatusOr<bool> from_profile = ConfiguresFromProfile(options); !from_profile.ok()) {
    return from_profile.status();
  } else if (!*from_profile && (options.nstages == 0 || options.chunk_size == 0)) {
    return invalid(
        "--morph needs the configuration: give --nstages and --chunk_size, or --profile_dir "
        "and --gpu_memory_gb to choose them for each set of machines");
  }
  if (options.batch_size < 1) {
    return invalid("--batch_size=", options.batch_size,
                   ": --morph keeps the global batch across machine sets; give it, e.g. "
                   "--batch_size=32");
  }
  if (options.gpus_per_node < 1) {
    return invalid("--gpus_per_node=", options.gpus_per_node, " must be at least 1");
  }
  if (absl::StripAsciiWhitespace(options.remote_shell).empty()) {
    return invalid(
        "--remote_shell is empty: give the command that runs a command on another "
        "host, e.g. --remote_shell=ssh");
  }
  if (options.command.empty()) return invalid("no worker program given after `--`");
  const std::optional<std::string> save = WorkerFlagValue(options.command, "save");
  if (!save || save->empty()) {
    return invalid(
        "--morph restarts the job from its checkpoint, so the workers need "
        "--save=DIR: add it to the worker flags (after the program)");
  }
  return absl::OkStatus();
}

absl::StatusOr<MorphGeneration> ConfigureGeneration(const LaunchOptions& options,
                                                    const std::vector<std::string>& listed,
                                                    const Profile* profile,
                                                    const std::string& host_name) {
  if (listed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the machine list ", options.machine_list,
                                                   " names no machines: add one host per line"));
  }
  const bool loopback = std::any_of(listed.begin(), listed.end(), IsLoopbackName);
  const auto other = std::find_if(listed.begin(), listed.end(), [&](const std::string& host) {
    return !IsThisMachine(host, host_name);
  });
  if (loopback && other != listed.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the machine list ", options.machine_list,
                     " names this machine by a loopback name and ", "another machine (", *other,
                     ") that could not reach it by that name: list this "
                     "machine by an address the others can reach (e.g. ",
                     host_name, ")"));
  }
  if (options.master_port == 0 && !IsThisMachine(listed.front(), host_name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--master_port=0 picks a free port on this machine, but rank 0's store runs on the first "
        "machine of the list, ",
        listed.front(), ": give --master_port, e.g. --master_port=29500"));
  }

  absl::Status whole_list;
  for (size_t n = listed.size(); n >= 1; --n) {
    LaunchOptions o = options;
    o.morph = false;
    o.machine_list.clear();
    o.nnodes = static_cast<int>(n);
    o.node_rank = 0;
    o.master_addr = listed.front();
    o.master_port = options.master_port == 0 ? 1 : options.master_port;  // checked, not used
    std::string report;
    absl::Status status;
    if (profile != nullptr) {
      absl::StatusOr<LaunchChoice> choice = ChooseLaunchConfiguration(*profile, o);
      status = choice.status();
      if (choice.ok()) {
        o = choice->options;
        report = choice->report;
      }
    }
    if (status.ok()) status = ValidateLaunchOptions(o);
    if (!status.ok()) {
      if (n == listed.size()) whole_list = status;
      continue;
    }
    MorphGeneration generation;
    o.master_port = options.master_port;
    generation.options = std::move(o);
    generation.hosts.assign(listed.begin(), listed.begin() + static_cast<std::ptrdiff_t>(n));
    generation.idle = static_cast<int>(listed.size() - n);
    const LaunchOptions& chosen = generation.options;
    const int workers = chosen.gpus_per_node * chosen.nnodes;
    generation.report =
        absl::StrCat(report, "running P=", chosen.nstages, " x D=", workers / chosen.nstages,
                     " (micro-batch ", chosen.chunk_size, ", batch ", chosen.batch_size, ") on ", n,
                     " machine(s): ", absl::StrJoin(generation.hosts, " "), "\n");
    if (generation.idle > 0) {
      absl::StrAppend(&generation.report, "note: ", generation.idle,
                      " machine(s) at the end of the list stay idle: no configuration uses all ",
                      listed.size(), " (", whole_list.message(), ")\n");
    }
    return generation;
  }
  return absl::Status(
      whole_list.code(),
      absl::StrCat(whole_list.message(), " (and no shorter prefix of the ", listed.size(),
                   " machines in ", options.machine_list, " fits a configuration either)"));
}

std::vector<WorkerSpec> NodeSpecs(const MorphGeneration& generation,
                                  const std::vector<std::string>& command, int master_port,
                                  const MorphContext& context) {
  const LaunchOptions& o = generation.options;
  std::vector<WorkerSpec> nodes;
  for (size_t i = 0; i < generation.hosts.size(); ++i) {
    const std::string& host = generation.hosts[i];
    std::vector<std::string> launch = {
        context.launcher,
        absl::StrCat("--nstages=", o.nstages),
        absl::StrCat("--chunk_size=", o.chunk_size),
        absl::StrCat("--batch_size=", o.batch_size),
        absl::StrCat("--gpus_per_node=", o.gpus_per_node),
        absl::StrCat("--nnodes=", o.nnodes),
        absl::StrCat("--node_rank=", i),
        absl::StrCat("--master_addr=", o.master_addr),
        absl::StrCat("--master_port=", master_port),
        absl::StrCat("--grace_seconds=", o.grace_seconds),
        "--stop_on_stdin",
        "--",
        command[0],
    };
    launch.insert(launch.end(), command.begin() + 1, command.end());
    if (!o.stage_segments.empty()) {
      launch.push_back(absl::StrCat("--stage-segments=", absl::StrJoin(o.stage_segments, ",")));
    }
    WorkerSpec node;
    node.name = absl::StrCat("node ", i, " (", host, ")");
    node.control_via_stdin = true;
    node.rank = static_cast<int>(i);
    if (IsThisMachine(host, context.host_name)) {
      node.argv = std::move(launch);
    } else {
      std::vector<std::string> quoted;
      for (const std::string& arg : launch) quoted.push_back(ShellQuote(arg));
      node.argv = absl::StrSplit(o.remote_shell, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      node.argv.push_back(host);
      node.argv.push_back(absl::StrCat("cd ", ShellQuote(context.directory), " && exec ",
                                       absl::StrJoin(quoted, " ")));
    }
    for (const auto& [key, value] : context.environment) {
      node.env.push_back(absl::StrCat(key, "=", value));
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

int RunMorphingJob(const LaunchOptions& options, const MorphContext& context) {
  auto fail = [&](const absl::Status& status, int code) {
    Say(context, absl::StrCat("error: ", status.message()));
    return code;
  };
  if (absl::Status status = ValidateMorphOptions(options); !status.ok()) return fail(status, 2);
  // The worker command with its program resolved once, here, for every generation.
  std::vector<std::string> job_command = options.command;
  absl::StatusOr<std::string> program =
      ResolveProgram(job_command[0], context.environment, std::filesystem::current_path().string());
  if (!program.ok()) return fail(program.status(), 2);
  job_command[0] = *program;
  LaunchOptions resolved = options;
  std::optional<Profile> profile;
  if (*ConfiguresFromProfile(options)) {
    resolved.profile_dir = ResolveUserPath(options.profile_dir, context.environment);
    absl::StatusOr<Profile> read = ReadLaunchProfile(resolved);
    if (!read.ok()) return fail(read.status(), 2);
    profile = std::move(*read);
  }
  const std::string list_path = ResolveUserPath(options.machine_list, context.environment);
  const std::string save = *WorkerFlagValue(options.command, "save");
  const std::string save_dir = ResolveUserPath(save, context.environment);

  absl::StatusOr<std::vector<std::string>> first = ReadMachineList(list_path);
  if (!first.ok()) return fail(first.status(), 2);
  std::vector<std::string> listed = *first;
  int generation = 0;
  std::optional<int64_t> checkpoint;  // the one the last generation stopped at
  while (true) {
    absl::StatusOr<MorphGeneration> config =
        ConfigureGeneration(resolved, listed, profile ? &*profile : nullptr, context.host_name);
    if (!config.ok()) {
      if (generation == 0) return fail(config.status(), 2);
      const std::vector<std::string> unusable = listed;
      listed = WaitForList(
          list_path, [&](const std::vector<std::string>& now) { return now != unusable; },
          absl::StrCat("cannot run on the ", unusable.size(), " machine(s) listed now: ",
                       config.status().message(), "; waiting for ", list_path, " to change"),
          context);
      continue;
    }
    std::vector<std::string> command = job_command;
    std::string resume_note;
    if (checkpoint) {
      command = ResumeCommand(command, save);
      resume_note = absl::StrCat(", resuming from iteration ", *checkpoint, " in ", save);
    }
    const int port = options.master_port != 0 ? options.master_port : FreeTcpPort();
    Say(context, absl::StrCat("morph generation ", generation, ": ", listed.size(),
                              " machine(s) in ", list_path, resume_note, "\n", config->report));

    WorkerGroupOptions group;
    group.grace_seconds = options.grace_seconds;
    group.output_fd = context.output_fd;
    group.message_fd = context.message_fd;
    group.resend_stop_seconds = kMorphResendStopSeconds;
    group.watch = [&list_path, &listed]() -> std::string {
      absl::StatusOr<std::vector<std::string>> now = ReadMachineList(list_path);
      if (!now.ok() || *now == listed) return "";
      return absl::StrCat("the machine list changed (", listed.size(), " -> ", now->size(),
                          " machines): asking the job to checkpoint and stop");
    };
    absl::StatusOr<WorkerGroupResult> result =
        RunWorkerGroup(NodeSpecs(*config, command, port, context), group);
    if (!result.ok()) return fail(result.status(), 1);
    if (result->exit_code != 0) {
      Say(context, absl::StrCat("a node failed: the job stops with code ", result->exit_code,
                                "; run the same command again to resume from the newest "
                                "checkpoint in ",
                                save));
      return result->exit_code;
    }
    if (result->terminate_requested) return 0;
    if (!result->checkpoint_stop_requested) {
      Say(context, "the job finished");
      return 0;
    }
    const absl::StatusOr<int64_t> at = LatestCheckpointIteration(save_dir);
    if (!at.ok()) {
      return fail(
          absl::FailedPreconditionError(absl::StrCat(
              "the workers stopped for a checkpoint but ", save_dir, "/", kCheckpointTrackerFile,
              " names none that is complete (", at.status().message(),
              "): check that the worker program checkpoints on SIGUSR1")),
          1);
    }
    checkpoint = *at;
    ++generation;
    listed = WaitForList(
        list_path, [](const std::vector<std::string>&) { return true; },
        absl::StrCat("checkpoint at iteration ", *checkpoint, "; waiting for ", list_path,
                     " to list machines"),
        context);
  }
}

}  // namespace varuna
