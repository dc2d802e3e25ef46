// tests/reliability/process.hpp — fork+exec of worker processes and bounded waits on them.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace idem::reliability {

// A child process; SIGKILLed by the destructor if still running.
class child {
 public:
  // Runs `argv` (argv[0] is the program). With notify_fd >= 0 the child gets it as its fd 3.
  explicit child(const std::vector<std::string>& argv, int notify_fd = -1) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      if (notify_fd >= 0) {
        if (::dup2(notify_fd, 3) < 0) std::_Exit(126);
      } else {
        ::close(3);
      }
      ::execv(args[0], args.data());
      std::_Exit(127);
    }
    pidfd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd_ < 0) throw std::runtime_error("pidfd_open failed");
  }
  ~child() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::kill(pid_, SIGCONT);
      reap();
    }
    if (pidfd_ >= 0) ::close(pidfd_);
  }
  child(const child&) = delete;
  child& operator=(const child&) = delete;

  pid_t pid() const noexcept { return pid_; }
  int pidfd() const noexcept { return pidfd_; }
  bool running() const noexcept { return status_ < 0; }
  int status() const noexcept { return status_; }
  void signal(int sig) const { ::kill(pid_, sig); }

  // Reaps the child once it has exited (its pidfd is readable). Returns true if it had.
  bool try_reap() {
    if (!running()) return true;
    int st = 0;
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      return true;
    }
    return false;
  }
  void reap() {
    int st = 0;
    if (::waitpid(pid_, &st, 0) == pid_) status_ = st;
  }
  // Waits up to `limit` for the child to exit; true if it did.
  bool wait_for(std::chrono::milliseconds limit) {
    if (!running()) return true;
    pollfd p{pidfd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
    reap();
    return true;
  }
  bool exited_cleanly() const noexcept { return status_ >= 0 && WIFEXITED(status_) && WEXITSTATUS(status_) == 0; }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int status_ = -1;
};

}  // namespace idem::reliability
