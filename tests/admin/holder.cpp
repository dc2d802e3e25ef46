// tests/admin/holder.cpp — a guarded call in a process of its own, for idem-admin's tests: a
// holder that can be SIGKILLed while it holds its record, or kept waiting while an operator ends
// its lease.
//
//   idem_admin_holder STORE SCOPE KEY LEASE_MS run|hold RESULT
//
// run: executes the call (its action returns RESULT at once). hold: the action prints "acquired"
// and waits for a line on stdin (or its end) before returning RESULT. Prints how the call ended:
// "executed", "replayed", "in-flight" (exit 0) or "lease-lost" (exit 5: the completion was refused).
#include <idem/engine.hpp>
#include <idem/errors.hpp>
#include <idem/json_codec.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "store_spec.hpp"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: idem_admin_holder STORE SCOPE KEY LEASE_MS run|hold RESULT\n";
    return 2;
  }
  const std::string mode = argv[5];
  const std::string result = argv[6];
  try {
    auto store = idem::admin::open_store(argv[1], {.create_schema = true});
    idem::engine engine{*store};
    const auto ctx = engine.make_context(argv[2], argv[3],
                                         {.lease = std::chrono::milliseconds(std::stoll(argv[4])),
                                          .wait = std::chrono::milliseconds(0)});
    const idem::outcome<std::string> o = engine.execute(
        ctx,
        [&] {
          if (mode == "hold") {
            std::cout << "acquired" << std::endl;
            std::string line;
            std::getline(std::cin, line);
          }
          return result;
        },
        idem::json_codec{});
    std::cout << (o.ran() ? "executed" : o.is_replay() ? "replayed" : "in-flight") << std::endl;
    return 0;
  } catch (const idem::lease_lost_error&) {
    std::cout << "lease-lost" << std::endl;
    return 5;
  } catch (const std::exception& e) {
    std::cerr << "idem_admin_holder: " << e.what() << "\n";
    return 1;
  }
}
