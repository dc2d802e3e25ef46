// annotator/src/attribute_scan.cpp — see attribute_scan.hpp.
#include "attribute_scan.hpp"

#include <optional>
#include <string>

#include "clang_diagnostics.hpp"
#include "literal.hpp"

namespace idem::annotate {

namespace {

// ---------------------------------------------------------------------------------------------
// Finding attributes in the token stream.


bool is_name_token(const clang::syntax::Token& t) {
  return t.kind() == clang::tok::identifier || clang::tok::getKeywordSpelling(t.kind()) != nullptr;
}

bool is_string_literal(const clang::syntax::Token& t) { return clang::tok::isStringLiteral(t.kind()); }

// Decodes one string literal token (literal.hpp), recording where each decoded character was
// written. Returns an error message for literals idem does not accept.
std::optional<std::string> decode_literal(const SourceManager& sm, const clang::syntax::Token& token,
                                          std::string& value, std::vector<source_position>& characters) {
  const SourceLocation spelling = sm.getSpellingLoc(token.location());
  bool invalid = false;
  const char* data = sm.getCharacterData(spelling, &invalid);
  if (invalid) return std::string("cannot be read");
  return decode_string_literal(std::string_view(data, token.length()), position_of(sm, spelling), value, characters);
}

class attribute_scanner {
 public:
  // Scans the main file (`main_file`) or every other file of the translation unit: the
  // annotations of included headers tell which inherited methods are annotated.
  attribute_scanner(const SourceManager& sm, llvm::ArrayRef<clang::syntax::Token> tokens, std::vector<diagnostic>& out,
                    bool main_file = true)
      : sm_(sm), tokens_(tokens), out_(out), main_file_(main_file) {}

  std::vector<found_attribute> scan() {
    std::vector<found_attribute> found;
    for (std::size_t i = 0; i + 1 < tokens_.size(); ++i) {
      if (kind(i) != clang::tok::l_square || kind(i + 1) != clang::tok::l_square || in_main_file(i) != main_file_)
        continue;
      scan_specifier(i, found);
    }
    return found;
  }

 private:
  clang::tok::TokenKind kind(std::size_t i) const {
    return i < tokens_.size() ? tokens_[i].kind() : clang::tok::eof;
  }
  bool in_main_file(std::size_t i) const { return sm_.isInMainFile(sm_.getExpansionLoc(tokens_[i].location())); }
  std::string text(std::size_t i) const { return tokens_[i].text(sm_).str(); }
  source_position where(std::size_t i) const { return spelled_position(sm_, tokens_[i].location()); }
  void error(std::size_t i, std::string message) { out_.push_back({severity::error, where(i), std::move(message)}); }

  // Skips a balanced (), [] or {} group starting at `i`; returns the index after it.
  std::size_t skip_group(std::size_t i) const {
    int depth = 0;
    for (; i < tokens_.size() && kind(i) != clang::tok::eof; ++i) {
      const auto k = kind(i);
      if (k == clang::tok::l_paren || k == clang::tok::l_square || k == clang::tok::l_brace) ++depth;
      if (k == clang::tok::r_paren || k == clang::tok::r_square || k == clang::tok::r_brace) {
        if (--depth == 0) return i + 1;
      }
    }
    return i;
  }

  // `[[` attribute-list `]]` starting at `i` (the first '[').
  void scan_specifier(std::size_t& i, std::vector<found_attribute>& found) {
    std::size_t p = i + 2;
    std::string using_namespace;
    if (kind(p) == clang::tok::kw_using && is_name_token(tokens_[p + 1]) && kind(p + 2) == clang::tok::colon) {
      using_namespace = text(p + 1);
      p += 3;
    }
    std::vector<std::size_t> ours;  // indices into `found` of attributes in this specifier
    while (p < tokens_.size() && kind(p) != clang::tok::eof) {
      if (kind(p) == clang::tok::r_square && kind(p + 1) == clang::tok::r_square) break;
      if (kind(p) == clang::tok::comma || kind(p) == clang::tok::ellipsis) {
        ++p;
        continue;
      }
      if (!is_name_token(tokens_[p])) return;  // not an attribute-specifier we understand (e.g. a lambda)
      std::string ns = using_namespace;
      std::size_t name = p;
      if (kind(p + 1) == clang::tok::coloncolon && is_name_token(tokens_[p + 2])) {
        ns = text(p);
        name = p + 2;
      }
      p = name + 1;
      const bool is_ours = text(name) == "idempotent" && (ns.empty() || ns == "idem");
      std::size_t after = p;
      if (kind(p) == clang::tok::l_paren) after = skip_group(p);
      if (is_ours) {
        found_attribute attribute;
        attribute.attribute.position = where(name);
        attribute.attribute.spelling = ns.empty() ? "idempotent" : "idem::idempotent";
        if (kind(p) == clang::tok::l_paren) parse_arguments(p + 1, after - 1, attribute.attribute);
        ours.push_back(found.size());
        found.push_back(std::move(attribute));
      }
      p = after;
    }
    if (kind(p) == clang::tok::r_square && kind(p + 1) == clang::tok::r_square) {
      for (std::size_t index : ours) found[index].close_index = p + 1;
      i = p + 1;
    }
  }

  // name = "literal" ["literal"...] , ...   between `begin` and `end` (the closing paren). Rule
  // "argument-syntax": anything else is an error at the token, and ends the attribute's arguments.
  void parse_arguments(std::size_t begin, std::size_t end, raw_attribute& attribute) {
    std::size_t p = begin;
    while (p < end) {
      if (!is_name_token(tokens_[p])) {
        error(p, "expected an argument name, as in key = \"event.id\"");
        return;
      }
      raw_argument argument;
      argument.name = text(p);
      argument.name_position = where(p);
      ++p;
      if (p >= end || kind(p) != clang::tok::equal) {
        error(p < end ? p : end, "expected '=' after '" + argument.name + "'");
        return;
      }
      ++p;
      if (p >= end || !is_string_literal(tokens_[p])) {
        error(p < end ? p : end, "the value of '" + argument.name + "' must be a string literal, as in " +
                                     argument.name + " = \"...\"");
        return;
      }
      argument.value_position = where(p);
      while (p < end && is_string_literal(tokens_[p])) {
        if (!argument.value_characters.empty()) argument.value_characters.pop_back();  // adjacent literals join
        if (auto problem = decode_literal(sm_, tokens_[p], argument.value, argument.value_characters)) {
          error(p, "the value of '" + argument.name + "' " + *problem);
          return;
        }
        ++p;
      }
      attribute.arguments.push_back(std::move(argument));
      if (p < end) {
        if (kind(p) != clang::tok::comma) {
          error(p, "expected ',' or ')' after the value of '" + attribute.arguments.back().name + "'");
          return;
        }
        ++p;
      }
    }
  }

  const SourceManager& sm_;
  llvm::ArrayRef<clang::syntax::Token> tokens_;
  std::vector<diagnostic>& out_;
  bool main_file_ = true;
};

}  // namespace

std::vector<found_attribute> scan_attributes(const clang::SourceManager& sm,
                                             llvm::ArrayRef<clang::syntax::Token> tokens,
                                             std::vector<diagnostic>& out, bool main_file) {
  return attribute_scanner(sm, tokens, out, main_file).scan();
}

// Whether only declaration specifiers stand between the attribute ending at `close_index` and
// the name of `d`: no ';', '{' or '}' outside brackets.
bool stands_before(const SourceManager& sm, llvm::ArrayRef<clang::syntax::Token> expanded, std::size_t close_index,
                   const clang::Decl& d) {
  const SourceLocation name_loc = sm.getExpansionLoc(d.getLocation());
  if (!sm.isBeforeInTranslationUnit(sm.getExpansionLoc(expanded[close_index].location()), name_loc)) return false;
  int depth = 0;
  for (std::size_t i = close_index + 1; i < expanded.size(); ++i) {
    const SourceLocation here = sm.getExpansionLoc(expanded[i].location());
    if (!sm.isBeforeInTranslationUnit(here, name_loc)) break;
    const auto k = expanded[i].kind();
    if (k == clang::tok::l_paren || k == clang::tok::l_square) ++depth;
    if (k == clang::tok::r_paren || k == clang::tok::r_square) --depth;
    if (depth == 0 && (k == clang::tok::semi || k == clang::tok::l_brace || k == clang::tok::r_brace)) return false;
  }
  return true;
}

}  // namespace idem::annotate
