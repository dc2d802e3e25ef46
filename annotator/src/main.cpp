// idem-annotate — validates every [[idem::idempotent(...)]] of one header and generates its
// wrappers.
//
//   idem-annotate [options] <header> -- <compiler arguments>
//
//   --output-header=<file>   generated header (policies, guarded<C>)
//   --output-source=<file>   generated source (registration of every policy)
//   --manifest=<file>        JSON list of every annotated function
//   --depfile=<file>         Makefile-style dependencies of the generated header
//   --include-as=<text>      how the generated header includes <header> (default: its path)
//   --resource-dir=<dir>     Clang's builtin headers (default: the one found at build time)
//   --idem-include=<dir>     where <idem/invoke.hpp> is (default: the one found at build time)
//   --no-key-check           skip the Sema checks of key expressions and codecs
//   --verify                 compare diagnostics with `// expected-error@+1:COL {{...}}` comments
//                            in <header> instead of generating; exit 0 when they match exactly
//   --time                   print how long the analysis took on stderr
//
// Exit status: 0 on success, 1 when the header has errors (printed in Clang's format on stderr),
// 2 on bad usage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "emitter.hpp"
#include "frontend.hpp"
#include "report.hpp"

#ifndef IDEM_ANNOTATE_RESOURCE_DIR
#define IDEM_ANNOTATE_RESOURCE_DIR ""
#endif
#ifndef IDEM_ANNOTATE_INCLUDE_DIR
#define IDEM_ANNOTATE_INCLUDE_DIR ""
#endif

namespace {

namespace fs = std::filesystem;
using namespace idem::annotate;

struct options {
  std::string source;
  std::vector<std::string> compiler_args;
  std::string output_header;
  std::string output_source;
  std::string manifest;
  std::string depfile;
  std::string include_as;
  std::string resource_dir = IDEM_ANNOTATE_RESOURCE_DIR;
  std::string idem_include = IDEM_ANNOTATE_INCLUDE_DIR;
  bool check_keys = true;
  bool verify = false;
  bool time = false;
};

int usage(const std::string& problem) {
  std::cerr << "idem-annotate: " << problem << "\n"
            << "usage: idem-annotate [--output-header=F] [--output-source=F] [--manifest=F] [--depfile=F]\n"
            << "                     [--include-as=S] [--resource-dir=D] [--idem-include=D] [--no-key-check]\n"
            << "                     [--verify] [--time] <header> -- <compiler arguments>\n";
  return 2;
}

std::optional<options> parse(int argc, char** argv, std::string& problem) {
  options o;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    auto value = [&](const std::string& flag, std::string& into) {
      if (arg.rfind(flag + "=", 0) != 0) return false;
      into = arg.substr(flag.size() + 1);
      return true;
    };
    if (value("--output-header", o.output_header) || value("--output-source", o.output_source) ||
        value("--manifest", o.manifest) || value("--depfile", o.depfile) || value("--include-as", o.include_as) ||
        value("--resource-dir", o.resource_dir) || value("--idem-include", o.idem_include))
      continue;
    if (arg == "--no-key-check") o.check_keys = false;
    else if (arg == "--verify") o.verify = true;
    else if (arg == "--time") o.time = true;
    else if (arg.rfind("--", 0) == 0) {
      problem = "unknown option " + arg;
      return std::nullopt;
    } else if (o.source.empty()) o.source = arg;
    else {
      problem = "more than one header given (" + o.source + ", " + arg + "); run once per header";
      return std::nullopt;
    }
  }
  for (; i < argc; ++i) o.compiler_args.emplace_back(argv[i]);
  if (o.source.empty()) {
    problem = "no header given";
    return std::nullopt;
  }
  if (!o.verify && o.output_header.empty() != o.output_source.empty()) {
    problem = "--output-header and --output-source go together";
    return std::nullopt;
  }
  return o;
}

// Writes `text` unless the file already holds exactly that (keeps timestamps for a no-op rebuild).
bool write_if_changed(const std::string& path, const std::string& text) {
  if (auto current = disk_reader()(path); current && *current == text) return true;
  if (const fs::path parent = fs::path(path).parent_path(); !parent.empty()) {
    std::error_code ignored;
    fs::create_directories(parent, ignored);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "idem-annotate: error: cannot write " << path << "\n";
    return false;
  }
  return true;
}

std::string escape_make(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ' ' || c == '#') out += '\\';
    if (c == '$') out += '$';
    out += c;
  }
  return out;
}

}  // namespace

// Under LeakSanitizer (the project's ASan builds): Clang 19 leaks the deduction-failure details of
// failed partial-specialisation matches (clang::MakeDeductionFailureInfo), which every parse of
// <idem/invoke.hpp> triggers. Not idem's memory. Suppressed by module (allocations made inside
// Clang's and LLVM's libraries: with the fast unwinder the stack often ends in libLLVM's
// SmallVector), since a build step runs without a symbolizer to match function names.
extern "C" const char* __lsan_default_suppressions();
extern "C" const char* __lsan_default_suppressions() { return "leak:libclang-cpp.so\nleak:libLLVM.so\n"; }
// ... and without the list of used suppressions on stderr, which is the user's diagnostics channel.
extern "C" const char* __lsan_default_options();
extern "C" const char* __lsan_default_options() { return "print_suppressions=0"; }

namespace {

analysis_request request_of(const options& o) {
  analysis_request request;
  request.source = o.source;
  request.compiler_args = o.compiler_args;
  request.resource_dir = o.resource_dir;
  request.idem_include_dir = o.idem_include;
  request.check_keys = o.check_keys;
  return request;
}

// --verify: the diagnostics against the expectations the header states; the exit status.
int verify_expectations(const options& o, const analysis_result& result) {
  const std::optional<std::string> text = disk_reader()(o.source);
  if (!text) return usage("cannot read " + o.source);
  const std::vector<std::string> problems = verify(parse_expectations(*text), result.diagnostics, o.source);
  for (const std::string& p : problems) std::cerr << o.source << ": verify: " << p << "\n";
  if (!problems.empty()) {
    std::cerr << "idem-annotate: diagnostics seen:\n";
    for (const diagnostic& d : result.diagnostics) std::cerr << format_diagnostic(d, disk_reader());
  }
  return problems.empty() ? 0 : 1;
}

// In source order, each error followed by its notes, as a reader scans the header.
void sort_for_reading(std::vector<diagnostic>& diagnostics, const std::string& source) {
  std::vector<std::vector<diagnostic>> groups;
  for (diagnostic& d : diagnostics) {
    if (d.level != severity::note || groups.empty()) groups.emplace_back();
    groups.back().push_back(std::move(d));
  }
  // (std::sort with the original index as the tie-break: clang++ with libstdc++ 12 warns about
  // std::stable_sort's use of the deprecated std::get_temporary_buffer.)
  std::vector<std::size_t> order(groups.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const source_position& x = groups[a].front().position;
    const source_position& y = groups[b].front().position;
    const bool x_here = x.file == source;
    const bool y_here = y.file == source;
    if (x_here != y_here) return x_here;
    if (x_here && x.line != y.line) return x.line < y.line;
    if (x_here && x.column != y.column) return x.column < y.column;
    return a < b;
  });
  diagnostics.clear();
  for (std::size_t index : order)
    for (diagnostic& d : groups[index]) diagnostics.push_back(std::move(d));
}

// Prints the diagnostics; returns the number of errors.
unsigned print_diagnostics(const std::vector<diagnostic>& diagnostics) {
  const file_reader reader = disk_reader();
  unsigned errors = 0;
  for (const diagnostic& d : diagnostics) {
    std::cerr << format_diagnostic(d, reader);
    if (d.level == severity::error) ++errors;
  }
  return errors;
}

// The generated header, source and manifest (or the manifest alone), and the depfile; false when
// one cannot be written.
bool write_outputs(const options& o, const analysis_result& result) {
  if (!o.output_header.empty()) {
    emit_options settings;
    settings.source_path = o.source;
    settings.include_as = o.include_as.empty() ? o.source : o.include_as;
    settings.header_name = fs::path(o.output_header).filename().string();
    const generated_files files = emit(result.specs, result.classes, settings);
    if (!write_if_changed(o.output_header, files.header) || !write_if_changed(o.output_source, files.source))
      return false;
    if (!o.manifest.empty() && !write_if_changed(o.manifest, files.manifest)) return false;
  } else if (!o.manifest.empty()) {
    emit_options settings;
    settings.source_path = o.source;
    settings.include_as = o.source;
    settings.header_name = fs::path(o.source).stem().string() + ".idem.hpp";
    if (!write_if_changed(o.manifest, emit(result.specs, result.classes, settings).manifest)) return false;
  }
  if (!o.depfile.empty()) {
    const std::string target = !o.output_header.empty() ? o.output_header : o.manifest;
    std::string text = escape_make(target) + ":";
    for (const std::string& dependency : result.dependencies) text += " \\\n  " + escape_make(dependency);
    if (!write_if_changed(o.depfile, text + "\n")) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string problem;
  const std::optional<options> parsed = parse(argc, argv, problem);
  if (!parsed) return usage(problem);
  const options& o = *parsed;

  const auto started = std::chrono::steady_clock::now();
  analysis_result result = analyze(request_of(o));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  if (o.time)
    std::cerr << "idem-annotate: analysed " << o.source << " in "
              << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms\n";
  if (o.verify) return verify_expectations(o, result);

  sort_for_reading(result.diagnostics, o.source);
  const unsigned errors = print_diagnostics(result.diagnostics);
  if (!result.ok) {
    std::cerr << errors << (errors == 1 ? " error" : " errors") << " generated.\n";
    return 1;
  }
  return write_outputs(o, result) ? 0 : 1;
}
