#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "support/test_support.hpp"

namespace megamoe::test {

int run_command(const std::string& command, std::string& output) {
  output.clear();
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) output.append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<ChildEnd> run_children(const std::vector<std::vector<std::string>>& args, int seconds) {
  std::vector<pid_t> children;
  for (const auto& a : args) {
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<std::string> argv = {"megamoe_gpu_tests"};
      argv.insert(argv.end(), a.begin(), a.end());
      std::vector<char*> cargs;
      for (auto& s : argv) cargs.push_back(s.data());
      cargs.push_back(nullptr);
      execv("/proc/self/exe", cargs.data());
      _exit(127);
    }
    children.push_back(pid);
  }
  std::vector<ChildEnd> ends(children.size());
  std::vector<int> status(children.size(), 0);
  std::vector<bool> done(children.size(), false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (bool all = false; !all && std::chrono::steady_clock::now() < deadline;) {
    all = true;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (!done[i] && children[i] > 0 && waitpid(children[i], &status[i], WNOHANG) == children[i]) done[i] = true;
      all = all && (done[i] || children[i] <= 0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (children[i] <= 0) continue;  // fork failed: reported as hung with no code
    if (!done[i]) {
      kill(children[i], SIGKILL), waitpid(children[i], &status[i], 0);
      ends[i].hung = true;
    }
    if (WIFEXITED(status[i])) ends[i].code = WEXITSTATUS(status[i]);
    if (WIFSIGNALED(status[i])) ends[i].signal = WTERMSIG(status[i]);
  }
  for (std::size_t i = 0; i < children.size(); ++i) ends[i].hung = ends[i].hung || children[i] <= 0;
  return ends;
}

}  // namespace megamoe::test
