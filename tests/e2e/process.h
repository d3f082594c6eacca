// Runs a tool of the build as a separate process, for the tests of exit codes and
// messages: stdout and stderr go to files, a process past its time is killed.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace stowage::testing {

namespace fs = std::filesystem;

struct RunResult {
  bool exited = false;
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string stderr_text;
};

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace detail {

// Spawns `argv` with `actions` and waits for it, killing it after `limit`.
inline RunResult spawn_and_wait(const std::vector<std::string>& argv, const posix_spawn_file_actions_t& actions,
                                std::chrono::seconds limit) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  RunResult result;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) return result;
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace detail

// Runs `argv` with stdout and stderr sent to files, killing it after `limit`.
inline RunResult run_process(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err,
                      std::chrono::seconds limit) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  RunResult result = detail::spawn_and_wait(argv, actions, limit);
  posix_spawn_file_actions_destroy(&actions);
  if (result.exited || result.signal != 0) result.stderr_text = read_text(err);
  return result;
}

// As run_process, but stderr is a pseudo-terminal (isatty is true there); what the
// process wrote to it is returned as stderr_text (a few KiB at most: the terminal's
// buffer is read once the process has ended).
inline RunResult run_process_on_terminal(const std::vector<std::string>& argv, const fs::path& out,
                                         std::chrono::seconds limit) {
  RunResult result;
  int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return result;
  const std::string terminal = ::ptsname(master);
  // Held open here too, so the terminal keeps what was written after the process ends.
  int held = ::open(terminal.c_str(), O_RDWR | O_NOCTTY);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, terminal.c_str(), O_RDWR | O_NOCTTY, 0);
  result = detail::spawn_and_wait(argv, actions, limit);
  posix_spawn_file_actions_destroy(&actions);
  ::fcntl(master, F_SETFL, O_NONBLOCK);
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(master, buffer, sizeof buffer)) > 0) result.stderr_text.append(buffer, static_cast<size_t>(n));
  if (held >= 0) ::close(held);
  ::close(master);
  return result;
}

}  // namespace stowage::testing
