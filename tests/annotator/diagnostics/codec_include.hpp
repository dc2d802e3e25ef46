// idem::json_codec named without including <idem/json_codec.hpp>: Clang's error at the codec,
// and a note naming the header.
#pragma once

#include <string>

struct Command {
  long id;
};

struct Commands {
  // expected-error@+2:53 {{no type named 'json_codec' in namespace 'idem'}}
  // expected-note@+1:47 {{idem::json_codec is declared in <idem/json_codec.hpp>: include it in the annotated header}}
  [[idem::idempotent(key = "cmd.id", codec = "idem::json_codec")]] std::string run(const Command& cmd);
};
