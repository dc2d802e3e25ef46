// annotator/src/clang_diagnostics.hpp — Clang's diagnostics as idem's (the Clang side only).
//
// Positions of Clang source locations, and the consumer that collects Clang's diagnostics,
// mapping those inside the in-memory check buffer (sema_check.cpp) back onto the attribute's
// string literals, character by character.
#pragma once

#include <string>
#include <vector>

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/SourceManager.h>
#include <llvm/ADT/SmallString.h>

#include "model.hpp"

namespace idem::annotate {

using clang::SourceLocation;
using clang::SourceManager;

// ---------------------------------------------------------------------------------------------
// Positions.

inline source_position position_of(const SourceManager& sm, SourceLocation loc) {
  source_position out;
  if (loc.isInvalid()) return out;
  const clang::PresumedLoc presumed = sm.getPresumedLoc(loc);
  if (presumed.isInvalid()) return out;
  out.file = presumed.getFilename();
  out.line = presumed.getLine();
  out.column = presumed.getColumn();
  return out;
}

// Where the user wrote a token: for a token that came out of a macro, the spelling of the macro
// argument (or of the macro body).
inline source_position spelled_position(const SourceManager& sm, SourceLocation loc) {
  return position_of(sm, sm.getSpellingLoc(loc));
}

// ---------------------------------------------------------------------------------------------
// The check buffer and the mapping of its diagnostics back onto attributes.

struct check_region {
  unsigned begin = 0;  // byte offsets in the check buffer
  unsigned end = 0;
  std::vector<source_position> characters;  // begin + i maps to characters[i]
  source_position fallback;                 // anything else in the region
  bool suppress = false;                    // consequences of errors reported elsewhere
  unsigned errors = 0;
};

struct check_state {
  clang::FileID file;
  std::vector<check_region> regions;

  check_region* region_at(unsigned offset) {
    for (check_region& r : regions)
      if (offset >= r.begin && offset < r.end) return &r;
    return nullptr;
  }
};

// Collects Clang's diagnostics as idem diagnostics, remapping those in the check buffer.
class collecting_consumer : public clang::DiagnosticConsumer {
 public:
  explicit collecting_consumer(std::vector<diagnostic>& out) : out_(out) {}

  void set_check_state(check_state* state) { check_ = state; }

  void HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) override {
    clang::DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level == clang::DiagnosticsEngine::Ignored || level == clang::DiagnosticsEngine::Remark) return;
    if (level == clang::DiagnosticsEngine::Note && suppressing_) return;
    suppressing_ = false;

    diagnostic d;
    d.level = level == clang::DiagnosticsEngine::Note      ? severity::note
              : level == clang::DiagnosticsEngine::Warning ? severity::warning
                                                           : severity::error;
    llvm::SmallString<256> message;
    info.FormatDiagnostic(message);
    d.message = message.str().str();

    if (info.getLocation().isValid() && info.hasSourceManager()) {
      const SourceManager& sm = info.getSourceManager();
      const SourceLocation loc = sm.getFileLoc(info.getLocation());
      if (check_ != nullptr && sm.getFileID(loc) == check_->file) {
        const unsigned offset = sm.getFileOffset(loc);
        check_region* region = check_->region_at(offset);
        if (region == nullptr) return;  // our own scaffolding; nothing the user can act on
        if (region->suppress) {
          suppressing_ = true;
          return;
        }
        const unsigned index = offset - region->begin;
        d.position = index < region->characters.size() ? region->characters[index] : region->fallback;
        if (d.level == severity::error) ++region->errors;
      } else {
        d.position = position_of(sm, loc);
      }
    }
    // The same error reached twice (the expression is checked in two places) is printed once.
    for (const diagnostic& seen : out_)
      if (seen.level == d.level && seen.position == d.position && seen.message == d.message) {
        suppressing_ = true;
        return;
      }
    out_.push_back(std::move(d));
  }

 private:
  std::vector<diagnostic>& out_;
  check_state* check_ = nullptr;
  bool suppressing_ = false;
};


}  // namespace idem::annotate
