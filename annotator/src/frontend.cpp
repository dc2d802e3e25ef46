// annotator/src/frontend.cpp — see frontend.hpp.
//
// One compiler instance, one parse, two inputs:
//   1. The header, parsed as usual while a syntax::TokenCollector records the preprocessed token
//      stream, by a parser that this action owns (instead of clang::ParseAST), so that it
//      outlives the end of the header.
//   2. At that end the attributes are found in the token stream, attached to declarations and
//      validated; then an in-memory "check" buffer is entered into the same preprocessor and
//      parsed by the same Parser and Sema: one function per key expression, one alias per codec,
//      in the namespace of the annotated function. Clang's own errors in that buffer are mapped
//      back, character by character, onto the attribute's string literals.
// Reusing the instance keeps the generator close to the cost of `clang++ -fsyntax-only`.
#include "frontend.hpp"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <clang/AST/ASTConsumer.h>
#include <clang/AST/ASTContext.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/QualTypeNames.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/AST/CXXInheritance.h>
#include <clang/Lex/Lexer.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Parse/Parser.h>
#include <clang/Sema/Sema.h>
#include <clang/Tooling/Syntax/Tokens.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/MemoryBuffer.h>

#include "literal.hpp"
#include "validator.hpp"

#ifndef IDEM_ANNOTATE_CLANG
#define IDEM_ANNOTATE_CLANG "clang++"
#endif

namespace idem::annotate {

namespace {

using clang::SourceLocation;
using clang::SourceManager;

// ---------------------------------------------------------------------------------------------
// Positions.

source_position position_of(const SourceManager& sm, SourceLocation loc) {
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
source_position spelled_position(const SourceManager& sm, SourceLocation loc) {
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

// ---------------------------------------------------------------------------------------------
// Finding attributes in the token stream.

struct found_attribute {
  raw_attribute attribute;
  std::size_t close_index = 0;  // index of the final ']' in the expanded tokens
};

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

  // name = "literal" ["literal"...] , ...   between `begin` and `end` (the closing paren).
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

// ---------------------------------------------------------------------------------------------
// Declarations of the main file, in source order.

class declaration_collector : public clang::RecursiveASTVisitor<declaration_collector> {
 public:
  explicit declaration_collector(const SourceManager& sm) : sm_(sm) {}

  bool TraverseDecl(clang::Decl* d) {
    if (d == nullptr) return true;
    if (d->isImplicit() && !llvm::isa<clang::TranslationUnitDecl>(d)) return true;
    if (!llvm::isa<clang::TranslationUnitDecl, clang::NamespaceDecl, clang::LinkageSpecDecl>(d)) {
      const SourceLocation loc = sm_.getExpansionLoc(d->getLocation());
      if (loc.isInvalid() || !sm_.isInMainFile(loc)) return true;
      // A template's pattern has the same location as the template itself; keep the pattern.
      if (!llvm::isa<clang::FunctionTemplateDecl, clang::ClassTemplateDecl, clang::VarTemplateDecl>(d))
        declarations.push_back(d);
    }
    return clang::RecursiveASTVisitor<declaration_collector>::TraverseDecl(d);
  }

  std::vector<clang::Decl*> declarations;

 private:
  const SourceManager& sm_;
};

// ---------------------------------------------------------------------------------------------
// Facts about a function.

clang::PrintingPolicy printing_policy(const clang::ASTContext& context) {
  clang::PrintingPolicy policy(context.getLangOpts());
  policy.SuppressUnwrittenScope = true;
  policy.SuppressTagKeyword = true;
  policy.Bool = true;
  return policy;
}

// `global` spells it from the global namespace ("::shop::Receipt"), as generated code must.
std::string type_name(clang::QualType type, const clang::ASTContext& context, bool global = false) {
  std::string name = clang::TypeName::getFullyQualifiedName(type, context, printing_policy(context), global);
  // "const T &" -> "const T&", the way idem's own code spells it.
  for (const char* suffix : {" &&", " &", " *"})
    if (llvm::StringRef(name).ends_with(suffix)) {
      name.erase(name.size() - std::strlen(suffix), 1);
      break;
    }
  return name;
}

// The hook for the HTTP adapter: decides whether a function is an HTTP endpoint, whose key comes
// from the Idempotency-Key header. The HTTP issue defines endpoints; until then none is.
bool is_http_endpoint(const clang::FunctionDecl& /*function*/) { return false; }

std::pair<std::string, std::string> enclosing_namespaces(const clang::FunctionDecl& fn);

function_facts facts_of(const clang::FunctionDecl& fn, const clang::ASTContext& context) {
  function_facts facts;
  facts.qualified_name = fn.getQualifiedNameAsString();
  facts.name = fn.getNameAsString();
  const auto* method = llvm::dyn_cast<clang::CXXMethodDecl>(&fn);
  if (method != nullptr) {
    facts.kind = method->isStatic() ? function_kind::static_member : function_kind::member;
    const clang::CXXRecordDecl* record = method->getParent();
    facts.simple_class = record->getNameAsString();
    facts.qualified_class = record->getQualifiedNameAsString();
    facts.is_virtual = method->isVirtual();
    facts.is_pure = method->isPureVirtual();
    facts.is_const = method->isConst();
    facts.ref_qualifier = method->getRefQualifier() == clang::RQ_LValue   ? "&"
                          : method->getRefQualifier() == clang::RQ_RValue ? "&&"
                                                                          : "";
    facts.is_private = method->getAccess() == clang::AS_private;
    facts.is_protected = method->getAccess() == clang::AS_protected;
    facts.is_final = method->hasAttr<clang::FinalAttr>();
    facts.class_is_final = record->hasAttr<clang::FinalAttr>();
    for (const clang::DeclContext* dc = record; dc != nullptr && dc->isRecord(); dc = dc->getParent()) {
      const std::string name = llvm::cast<clang::RecordDecl>(dc)->getNameAsString();
      facts.class_path = facts.class_path.empty() ? name : name + "_" + facts.class_path;
    }
    if (!method->isStatic())
      for (const clang::NamedDecl* other : record->lookup(fn.getDeclName())) {
        if (other->getCanonicalDecl() == fn.getCanonicalDecl() || other->getAccess() == clang::AS_public) continue;
        std::string described = other->getNameAsString();
        if (const auto* f = llvm::dyn_cast<clang::FunctionDecl>(other->getUnderlyingDecl())) {
          described += "(";
          for (unsigned k = 0; k < f->getNumParams(); ++k)
            described += (k ? ", " : "") + type_name(f->getParamDecl(k)->getType(), context);
          described += ")";
        }
        facts.non_public_overload = described;
        break;
      }
  }
  const clang::QualType result = fn.getReturnType();
  facts.return_type = type_name(result, context);
  facts.code_return_type = type_name(result, context, true);
  facts.returns_void = result->isVoidType();
  facts.returns_reference = result->isReferenceType();
  if (const auto* proto = fn.getType()->getAs<clang::FunctionProtoType>()) facts.is_noexcept = proto->isNothrow();
  facts.is_template = fn.isTemplated() || fn.getDescribedFunctionTemplate() != nullptr ||
                      fn.isFunctionTemplateSpecialization();
  facts.is_special = llvm::isa<clang::CXXConstructorDecl, clang::CXXDestructorDecl, clang::CXXConversionDecl,
                               clang::CXXDeductionGuideDecl>(fn) ||
                     fn.isOverloadedOperator() || fn.getDeclName().getNameKind() != clang::DeclarationName::Identifier;
  facts.is_variadic = fn.isVariadic();
  facts.internal_linkage = !fn.isExternallyVisible();
  facts.http_endpoint = is_http_endpoint(fn);
  std::tie(facts.namespace_open, facts.namespace_close) = enclosing_namespaces(fn);
  for (const clang::DeclContext* dc = fn.getDeclContext(); dc != nullptr; dc = dc->getParent())
    if (const auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(dc); ns && !ns->isAnonymousNamespace())
      facts.namespace_name = ns->getNameAsString() + (facts.namespace_name.empty() ? "" : "::") + facts.namespace_name;

  std::string parameter_types;
  for (const clang::ParmVarDecl* param : fn.parameters()) {
    parameter p;
    const clang::QualType type = param->getType();
    p.type = type_name(type, context);
    p.name = param->getNameAsString();
    p.position = spelled_position(context.getSourceManager(), param->getLocation());
    clang::QualType key_type = type;
    if (!type->isLValueReferenceType())
      key_type = context.getLValueReferenceType(type.getNonReferenceType().withConst());
    p.key_type = type_name(key_type, context);
    p.code_type = type_name(type, context, true);
    p.code_key_type = type_name(key_type, context, true);
    if (param->hasDefaultArg() && !param->hasUnparsedDefaultArg() && !param->hasUninstantiatedDefaultArg()) {
      const SourceManager& sm = context.getSourceManager();
      const clang::CharSourceRange range = sm.getExpansionRange(param->getDefaultArgRange());
      p.default_argument =
          clang::Lexer::getSourceText(clang::CharSourceRange::getTokenRange(range.getAsRange()), sm, context.getLangOpts())
              .str();
      p.default_position = position_of(sm, range.getBegin());
      const bool by_reference = type->isLValueReferenceType() && !type.getNonReferenceType().isConstQualified();
      p.default_type =
          by_reference ? p.code_type : type_name(type.getNonReferenceType().getUnqualifiedType(), context, true);
    }
    parameter_types += (parameter_types.empty() ? "" : ", ") + p.code_type;
    facts.parameters.push_back(std::move(p));
  }
  std::string qualifiers;
  if (facts.is_const) qualifiers += " const";
  if (!facts.ref_qualifier.empty()) qualifiers += " " + facts.ref_qualifier;
  if (facts.is_noexcept) qualifiers += " noexcept";
  facts.pointer_type = facts.code_return_type + " (" +
                       (facts.kind == function_kind::member ? "::" + facts.qualified_class + "::*" : std::string("*")) +
                       ")(" +
                       parameter_types + ")" + qualifiers;

  // Overloaded: another function of the same name in the same scope.
  if (!facts.is_special) {
    const clang::DeclContext* scope = fn.getDeclContext()->getRedeclContext();
    unsigned functions = 0;
    for (const clang::NamedDecl* other : scope->lookup(fn.getDeclName())) {
      if (llvm::isa<clang::FunctionDecl, clang::FunctionTemplateDecl>(other)) ++functions;
    }
    facts.is_overloaded = functions > 1;
  }
  return facts;
}

// ---------------------------------------------------------------------------------------------
// The check buffer.

struct check_item {
  std::size_t spec_index = 0;
  const clang::FunctionDecl* function = nullptr;
  std::string key_function;  // names in the check buffer
  std::string key_ok;
  std::string codec_ok;
  int key_region = -1;
  int codec_region = -1;
};

class check_writer {
 public:
  explicit check_writer(check_state& state) : state_(state) {}

  void add(std::string_view s) { text_.append(s.data(), s.size()); }
  unsigned offset() const { return static_cast<unsigned>(text_.size()); }

  // Adds `value` with the mapping of its characters; returns the region index.
  int add_mapped(const std::string& value, const std::vector<source_position>& characters, source_position fallback,
                 bool suppress = false) {
    check_region region;
    region.begin = offset();
    add(value);
    region.end = offset() + 1;  // the character right after maps to the end of the literal
    region.characters = characters;
    region.fallback = std::move(fallback);
    region.suppress = suppress;
    state_.regions.push_back(std::move(region));
    return static_cast<int>(state_.regions.size() - 1);
  }
  // Everything between two offsets maps to `fallback`.
  void map_span(unsigned begin, unsigned end, source_position fallback, bool suppress) {
    check_region region;
    region.begin = begin;
    region.end = end;
    region.fallback = std::move(fallback);
    region.suppress = suppress;
    state_.regions.push_back(std::move(region));
  }

  std::string take() { return std::move(text_); }

 private:
  check_state& state_;
  std::string text_;
};

// "namespace a { inline namespace b {" for the namespaces enclosing `fn`, and the closing braces.
std::pair<std::string, std::string> enclosing_namespaces(const clang::FunctionDecl& fn) {
  std::vector<const clang::NamespaceDecl*> chain;
  for (const clang::DeclContext* dc = fn.getDeclContext(); dc != nullptr; dc = dc->getParent())
    if (const auto* ns = llvm::dyn_cast<clang::NamespaceDecl>(dc)) chain.push_back(ns);
  std::string open;
  std::string close;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    open += std::string((*it)->isInline() ? "inline " : "") + "namespace " +
            ((*it)->isAnonymousNamespace() ? std::string() : (*it)->getNameAsString() + " ") + "{ ";
    close += "} ";
  }
  return {open, close};
}

// ---------------------------------------------------------------------------------------------
// The front-end action.

struct shared_state {
  const analysis_request* request = nullptr;
  analysis_result* result = nullptr;
  collecting_consumer* consumer = nullptr;
};

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

// Whether `method` overrides `base`, directly or through other overrides.
bool overrides(const clang::CXXMethodDecl& method, const clang::CXXMethodDecl& base) {
  for (const clang::CXXMethodDecl* o : method.overridden_methods())
    if (o->getCanonicalDecl() == base.getCanonicalDecl() || overrides(*o, base)) return true;
  return false;
}

std::string generated_header_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const auto dot = name.find_last_of('.');
  return (dot == std::string::npos ? name : name.substr(0, dot)) + ".idem.hpp";
}

std::string file_name_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Every idem::guarded<C> of the header: per class defined in it, the annotated methods it has,
// declared in it or inherited from annotated bases (in this header or an included one).
class guarded_class_finder {
 public:
  guarded_class_finder(const clang::ASTContext& context, llvm::ArrayRef<clang::syntax::Token> expanded,
                       std::vector<found_attribute> included,
                       const std::map<const clang::FunctionDecl*, const function_spec*>& specs,
                       std::vector<diagnostic>& out)
      : context_(context), sm_(context.getSourceManager()), expanded_(expanded), included_(std::move(included)),
        specs_(specs), out_(out) {}

  std::optional<guarded_class> find(const clang::CXXRecordDecl& record) {
    if (!record.isThisDeclarationADefinition() || record.isLambda() || record.isUnion() ||
        record.getIdentifier() == nullptr || record.isTemplated() ||
        llvm::isa<clang::ClassTemplateSpecializationDecl>(record) || record.isLocalClass() ||
        !record.isExternallyVisible() || record.hasAttr<clang::FinalAttr>())
      return std::nullopt;
    for (const clang::DeclContext* dc = &record; dc != nullptr && dc->isRecord(); dc = dc->getParent())
      if (llvm::cast<clang::Decl>(dc)->getAccess() == clang::AS_private ||
          llvm::cast<clang::Decl>(dc)->getAccess() == clang::AS_protected)
        return std::nullopt;  // nobody outside could name idem::guarded<C>
    guarded_class cls;
    cls.name = record.getQualifiedNameAsString();
    cls.code_name = "::" + cls.name;
    for (const clang::CXXMethodDecl* method : record.methods())
      if (auto it = specs_.find(method->getCanonicalDecl()); it != specs_.end() && !method->isStatic())
        cls.methods.push_back({it->second->facts, it->second->position, false});
    std::set<const clang::CXXMethodDecl*> seen;
    record.forallBases([&](const clang::CXXRecordDecl* base) {
      for (const clang::CXXMethodDecl* method : base->methods()) {
        if (method->isStatic() || method->getAccess() == clang::AS_private) continue;
        if (!seen.insert(method->getCanonicalDecl()).second) continue;
        const std::optional<guarded_method> annotated = annotation_of(*method);
        if (!annotated || !reaches(record, *method)) continue;
        cls.methods.push_back(*annotated);
        const std::string& file = annotated->position.file;
        if (!sm_.isInMainFile(sm_.getExpansionLoc(method->getLocation()))) {
          std::pair<std::string, std::string> include{generated_header_of(file), file_name_of(file)};
          if (std::find(cls.includes.begin(), cls.includes.end(), include) == cls.includes.end())
            cls.includes.push_back(include);
        }
      }
      return true;
    });
    if (cls.methods.empty()) return std::nullopt;
    return cls;
  }

 private:
  // The annotation of `method`: this header's (validated), or an included header's.
  std::optional<guarded_method> annotation_of(const clang::CXXMethodDecl& method) {
    if (auto it = specs_.find(method.getCanonicalDecl()); it != specs_.end())
      return guarded_method{it->second->facts, it->second->position, true};
    for (const clang::FunctionDecl* d : method.redecls())
      for (const found_attribute& attribute : included_)
        if (attribute.close_index != 0 && stands_before(sm_, expanded_, attribute.close_index, *d))
          return guarded_method{facts_of(method, context_), attribute.attribute.position, true};
    return std::nullopt;
  }

  // Whether `method` (of a base) is what `record` has under its name: not hidden on the way by a
  // declaration of the same name that does not override it, nor overridden by one annotated
  // itself (that one is guarded instead). A final overrider cannot be guarded: an error there.
  bool reaches(const clang::CXXRecordDecl& record, const clang::CXXMethodDecl& method) {
    clang::CXXBasePaths paths(/*FindAmbiguities=*/true, /*RecordPaths=*/true, /*DetectVirtual=*/false);
    if (!record.isDerivedFrom(method.getParent(), paths)) return false;
    if (paths.isAmbiguous(context_.getCanonicalType(context_.getRecordType(method.getParent())))) return false;
    std::vector<const clang::CXXRecordDecl*> chain{&record};
    for (const clang::CXXBasePathElement& element : paths.front())
      chain.push_back(element.Base->getType()->getAsCXXRecordDecl());
    for (std::size_t k = 0; k + 1 < chain.size(); ++k) {
      const clang::DeclContextLookupResult found = chain[k]->lookup(method.getDeclName());
      if (found.empty()) continue;
      for (const clang::NamedDecl* d : found) {
        if (const auto* shadow = llvm::dyn_cast<clang::UsingShadowDecl>(d);
            shadow && shadow->getTargetDecl()->getCanonicalDecl() == method.getCanonicalDecl())
          return true;
        const auto* overrider = llvm::dyn_cast<clang::CXXMethodDecl>(d);
        if (overrider == nullptr || !overrides(*overrider, method)) continue;
        if (annotation_of(*overrider)) return false;
        if (overrider->hasAttr<clang::FinalAttr>()) {
          out_.push_back({severity::error, position_of(sm_, sm_.getExpansionLoc(overrider->getLocation())),
                          "'" + overrider->getQualifiedNameAsString() + "' is final, so idem::guarded<" +
                              record.getNameAsString() + "> cannot guard the annotated '" +
                              method.getQualifiedNameAsString() + "' it overrides; remove final, or make " +
                              record.getNameAsString() + " final (then only idem::invoke guards it)"});
          return false;
        }
        // Calls on C use the overrider's default arguments; idem::guarded<C> passes the policy's.
        const function_facts mine = facts_of(*overrider, context_);
        const function_facts theirs = facts_of(method, context_);
        for (std::size_t p = 0; p < mine.parameters.size() && p < theirs.parameters.size(); ++p)
          if (mine.parameters[p].default_argument != theirs.parameters[p].default_argument) {
            out_.push_back({severity::error, position_of(sm_, sm_.getExpansionLoc(overrider->getLocation())),
                            "'" + overrider->getQualifiedNameAsString() + "' overrides the annotated '" +
                                method.getQualifiedNameAsString() +
                                "' with other default arguments, which idem::guarded<" + record.getNameAsString() +
                                "> cannot keep; give both the same default arguments, or annotate the override"});
            return false;
          }
        return true;
      }
      return false;  // hidden by a declaration of the same name
    }
    return true;
  }

  const clang::ASTContext& context_;
  const SourceManager& sm_;
  llvm::ArrayRef<clang::syntax::Token> expanded_;
  std::vector<found_attribute> included_;
  const std::map<const clang::FunctionDecl*, const function_spec*>& specs_;
  std::vector<diagnostic>& out_;
};

class annotate_action : public clang::ASTFrontendAction {
 public:
  explicit annotate_action(shared_state& state) : state_(state) {}

 protected:
  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance&, llvm::StringRef) override {
    return std::make_unique<clang::ASTConsumer>();
  }

  bool BeginSourceFileAction(clang::CompilerInstance& ci) override {
    clang::Preprocessor& pp = ci.getPreprocessor();
    collector_ = std::make_unique<clang::syntax::TokenCollector>(pp);
    return true;
  }

  void ExecuteAction() override;

 private:
  void analyze_translation_unit(clang::CompilerInstance& ci, clang::Parser& parser);
  void check_with_sema(clang::CompilerInstance& ci, clang::Parser& parser, const std::vector<function_spec>& specs,
                       const std::vector<const clang::FunctionDecl*>& functions);

  shared_state& state_;
  std::unique_ptr<clang::syntax::TokenCollector> collector_;
};

void annotate_action::ExecuteAction() {
  clang::CompilerInstance& ci = getCompilerInstance();
  if (!ci.hasPreprocessor()) return;
  if (!ci.hasSema()) ci.createSema(getTranslationUnitKind(), nullptr);
  clang::Sema& sema = ci.getSema();
  clang::Preprocessor& pp = ci.getPreprocessor();

  // What clang::ParseAST does, except that the parser outlives the end of the header.
  auto parser = std::make_unique<clang::Parser>(pp, sema, /*SkipFunctionBodies=*/false);
  pp.EnterMainSourceFile();
  parser->Initialize();
  clang::Parser::DeclGroupPtrTy group;
  clang::Sema::ModuleImportState import_state;
  for (bool at_end = parser->ParseFirstTopLevelDecl(group, import_state); !at_end;
       at_end = parser->ParseTopLevelDecl(group, import_state)) {
  }
  analyze_translation_unit(ci, *parser);
}

void annotate_action::analyze_translation_unit(clang::CompilerInstance& ci, clang::Parser& parser) {
  analysis_result& result = *state_.result;
  const SourceManager& sm = ci.getSourceManager();
  clang::ASTContext& context = ci.getASTContext();
  const bool header_ok = !ci.getDiagnostics().hasErrorOccurred();

  clang::syntax::TokenBuffer tokens = std::move(*collector_).consume();
  collector_.reset();
  attribute_scanner scanner(sm, tokens.expandedTokens(), result.diagnostics);
  std::vector<found_attribute> attributes = scanner.scan();
  // The annotations of included headers (their own generation reports their mistakes).
  std::vector<diagnostic> ignored;
  std::vector<found_attribute> included = attribute_scanner(sm, tokens.expandedTokens(), ignored, false).scan();
  if (attributes.empty() && included.empty()) return;

  declaration_collector collector(sm);
  collector.TraverseDecl(context.getTranslationUnitDecl());
  std::vector<clang::Decl*>& declarations = collector.declarations;
  std::sort(declarations.begin(), declarations.end(), [&](const clang::Decl* a, const clang::Decl* b) {
    return sm.isBeforeInTranslationUnit(sm.getExpansionLoc(a->getLocation()), sm.getExpansionLoc(b->getLocation()));
  });

  const llvm::ArrayRef<clang::syntax::Token> expanded = tokens.expandedTokens();
  std::vector<function_spec> checked;                  // every attribute on a function, even invalid
  std::vector<const clang::FunctionDecl*> functions;   // parallel to `checked`
  std::map<const clang::FunctionDecl*, source_position> annotated;  // canonical decl -> first attribute
  std::vector<function_spec> specs;
  std::vector<const clang::FunctionDecl*> spec_functions;  // parallel to `specs`
  for (found_attribute& found : attributes) {
    const raw_attribute& attribute = found.attribute;
    const std::string name = attribute.spelling;
    if (found.close_index == 0) {
      result.diagnostics.push_back({severity::error, attribute.position, "unterminated attribute specifier"});
      continue;
    }
    const SourceLocation close = sm.getExpansionLoc(expanded[found.close_index].location());
    // The first declaration whose name comes after the attribute.
    auto next = std::find_if(declarations.begin(), declarations.end(), [&](const clang::Decl* d) {
      return sm.isBeforeInTranslationUnit(close, sm.getExpansionLoc(d->getLocation()));
    });
    const clang::FunctionDecl* fn = next == declarations.end() ? nullptr : llvm::dyn_cast<clang::FunctionDecl>(*next);
    if (fn != nullptr && !stands_before(sm, expanded, found.close_index, *fn)) fn = nullptr;
    if (fn == nullptr) {
      result.diagnostics.push_back({severity::error, attribute.position,
                                    name + " must stand before a function declaration, as in [[" + name +
                                        "(key = \"event.id\")]] void on(const Event& event);"});
      continue;
    }
    const clang::FunctionDecl* canonical = fn->getCanonicalDecl();
    if (auto [it, inserted] = annotated.emplace(canonical, attribute.position); !inserted) {
      result.diagnostics.push_back(
          {severity::error, attribute.position, "'" + fn->getQualifiedNameAsString() + "' is annotated twice"});
      result.diagnostics.push_back({severity::note, it->second, "first annotation is here"});
      continue;
    }
    validation_result validated = validate(attribute, facts_of(*fn, context));
    for (diagnostic& d : validated.diagnostics) result.diagnostics.push_back(std::move(d));
    if (validated.spec) {
      specs.push_back(*validated.spec);
      spec_functions.push_back(canonical);
    }
    // Checked by Sema even when other arguments are wrong: every mistake in one run.
    checked.push_back(std::move(validated.partial));
    functions.push_back(fn);
  }
  for (diagnostic& d : check_scope_conflicts(specs)) result.diagnostics.push_back(std::move(d));

  std::map<const clang::FunctionDecl*, const function_spec*> by_function;
  for (std::size_t i = 0; i < specs.size(); ++i) by_function.emplace(spec_functions[i], &specs[i]);
  guarded_class_finder finder(context, expanded, std::move(included), by_function, result.diagnostics);
  for (const clang::Decl* d : declarations)
    if (const auto* record = llvm::dyn_cast<clang::CXXRecordDecl>(d))
      if (std::optional<guarded_class> cls = finder.find(*record)) result.classes.push_back(std::move(*cls));
  result.specs = std::move(specs);

  if (header_ok && state_.request->check_keys && !checked.empty()) check_with_sema(ci, parser, checked, functions);
}

// What a codec needs, for the message when idem::codec_for fails.
std::string codec_requirement(const std::string& codec) {
  if (codec.find("json_codec") != std::string::npos)
    return "idem::json_codec needs a type nlohmann::json converts both ways: give it to_json and from_json, for "
           "example with NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE";
  return "it needs a default constructor, payload encode(const T&) const, and T decode(const payload&) const or a "
         "template decode<T>";
}

void annotate_action::check_with_sema(clang::CompilerInstance& ci, clang::Parser& parser,
                                      const std::vector<function_spec>& specs,
                                      const std::vector<const clang::FunctionDecl*>& functions) {
  analysis_result& result = *state_.result;
  clang::SourceManager& sm = ci.getSourceManager();
  clang::ASTContext& context = ci.getASTContext();
  clang::Preprocessor& pp = ci.getPreprocessor();

  check_state state;
  check_writer w(state);
  std::vector<check_item> items;
  w.add("#include <idem/invoke.hpp>\n#include <utility>\n");
  // An error in these includes (say, <idem/invoke.hpp> not found) lands on the first attribute.
  w.map_span(0, w.offset(), specs.front().position, /*suppress=*/false);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const function_spec& spec = specs[i];
    if (spec.key.empty() && spec.codec.empty()) continue;
    const clang::FunctionDecl& fn = *functions[i];
    check_item item;
    item.spec_index = i;
    item.function = &fn;
    const std::string n = std::to_string(i);
    const auto [open, close] = enclosing_namespaces(fn);
    const unsigned chunk_begin = w.offset();
    w.add(open + "\n");
    if (!spec.key.empty()) {
      // The key expression, in a function with the annotated function's parameters.
      item.key_function = "idem_check_key_" + n;
      std::string declvals;
      w.add("[[maybe_unused]] inline auto " + item.key_function + "(");
      for (std::size_t p = 0; p < spec.facts.parameters.size(); ++p) {
        const parameter& param = spec.facts.parameters[p];
        w.add((p ? ", " : "") + std::string("[[maybe_unused]] ") + param.spelled_key_type() + " ");
        // Clang's notes about a parameter ("'event' declared here") point at the real one.
        const std::string name = param.name.empty() ? "idem_unnamed_" + std::to_string(p) : param.name;
        w.add_mapped(name, {}, param.name.empty() ? spec.position : param.position);
        declvals += (p ? ", " : "") + std::string("std::declval<") + param.spelled_key_type() + ">()";
      }
      w.add(") {\n  return (");
      item.key_region = w.add_mapped(spec.key, spec.key_characters, spec.key_position);
      w.add("\n);\n}\n");
      // Whether its type is a key type; errors here repeat the ones above, so they are dropped.
      item.key_ok = "idem_check_key_ok_" + n;
      const unsigned ok_begin = w.offset();
      w.add("[[maybe_unused]] inline constexpr bool " + item.key_ok + " = ::idem::key_value<decltype(" +
            item.key_function + "(" + declvals + "))>;\n");
      w.map_span(ok_begin, w.offset(), spec.key_position, /*suppress=*/true);
    }
    if (!spec.codec.empty()) {
      w.add("using idem_check_codec_" + n + " = ");
      item.codec_region = w.add_mapped(spec.codec, spec.codec_characters, spec.codec_position);
      w.add("\n;\n");
      item.codec_ok = "idem_check_codec_ok_" + n;
      const unsigned ok_begin = w.offset();
      w.add("[[maybe_unused]] inline constexpr bool " + item.codec_ok + " = ::idem::codec_for<idem_check_codec_" + n +
            ", " + spelled_return_type(spec.facts) + ">;\n");
      w.map_span(ok_begin, w.offset(), spec.codec_position, /*suppress=*/true);
    }
    w.add(close + "\n");
    w.map_span(chunk_begin, w.offset(), spec.position, /*suppress=*/false);
    items.push_back(std::move(item));
  }

  // Enter the buffer right where the header ended, and let the same parser continue. The end of
  // the header ended the translation unit for Sema; give it its scope back first. (Incremental
  // processing would keep the lexer instead, but then the preprocessor hands out a second end of
  // file token, which the TokenCollector cannot map.)
  ci.getSema().TUScope = parser.getCurScope();
  std::unique_ptr<llvm::MemoryBuffer> buffer = llvm::MemoryBuffer::getMemBufferCopy(w.take(), "<idem-annotate check>");
  state.file = sm.createFileID(std::move(buffer), clang::SrcMgr::C_User, 0, 0, sm.getLocForEndOfFile(sm.getMainFileID()));
  state_.consumer->set_check_state(&state);
  if (pp.EnterSourceFile(state.file, nullptr, SourceLocation())) {
    state_.consumer->set_check_state(nullptr);
    return;
  }
  parser.ConsumeToken();  // the end of the header
  clang::Parser::DeclGroupPtrTy group;
  clang::Sema::ModuleImportState import_state = clang::Sema::ModuleImportState::NotACXX20Module;
  while (!parser.ParseTopLevelDecl(group, import_state)) {
  }

  // Look the generated declarations up by name and judge what Sema could not say by itself.
  auto find = [&](const clang::FunctionDecl& fn, const std::string& name) -> clang::NamedDecl* {
    const clang::DeclContext* dc = fn.getDeclContext();
    while (!dc->isFileContext()) dc = dc->getParent();
    for (clang::NamedDecl* d : dc->lookup(&context.Idents.get(name))) return d;
    return nullptr;
  };
  auto evaluate = [&](clang::NamedDecl* d) -> std::optional<bool> {
    auto* var = llvm::dyn_cast_or_null<clang::VarDecl>(d);
    if (var == nullptr || var->isInvalidDecl() || var->getInit() == nullptr) return std::nullopt;
    if (var->getInit()->containsErrors() || var->getInit()->isValueDependent()) return std::nullopt;
    clang::Expr::EvalResult value;
    if (!var->getInit()->EvaluateAsRValue(value, context) || !value.Val.isInt()) return std::nullopt;
    return value.Val.getInt().getBoolValue();
  };

  for (const check_item& item : items) {
    const function_spec& spec = specs[item.spec_index];
    if (item.key_region >= 0 && state.regions[static_cast<std::size_t>(item.key_region)].errors == 0) {
      auto* key_fn = llvm::dyn_cast_or_null<clang::FunctionDecl>(find(*item.function, item.key_function));
      if (key_fn != nullptr && !key_fn->isInvalidDecl()) {
        // Only parameters: no globals, no static members.
        struct reference_finder : clang::RecursiveASTVisitor<reference_finder> {
          const clang::FunctionDecl* owner = nullptr;
          std::vector<const clang::DeclRefExpr*> offending;
          bool VisitDeclRefExpr(clang::DeclRefExpr* e) {
            const auto* var = llvm::dyn_cast<clang::VarDecl>(e->getDecl());
            if (var == nullptr) return true;
            if (const auto* param = llvm::dyn_cast<clang::ParmVarDecl>(var); param && param->getDeclContext() == owner)
              return true;
            if (var->isLocalVarDeclOrParm() && var->getDeclContext() != owner) return true;  // inside a lambda
            if (var->isConstexpr()) return true;  // a named constant is not state
            offending.push_back(e);
            return true;
          }
        } finder;
        finder.owner = key_fn;
        finder.TraverseStmt(key_fn->getBody());
        for (const clang::DeclRefExpr* e : finder.offending) {
          const unsigned offset = sm.getFileOffset(sm.getFileLoc(e->getLocation()));
          const check_region& region = state.regions[static_cast<std::size_t>(item.key_region)];
          const source_position where = offset >= region.begin && offset - region.begin < region.characters.size()
                                            ? region.characters[offset - region.begin]
                                            : spec.key_position;
          result.diagnostics.push_back(
              {severity::error, where,
               "the key expression may only use the parameters of '" + spec.facts.qualified_name + "'; '" +
                   e->getDecl()->getQualifiedNameAsString() +
                   "' is not one of them (a key must be computable from the call alone)"});
        }
        if (finder.offending.empty()) {
          const std::optional<bool> ok = evaluate(find(*item.function, item.key_ok));
          if (ok && !*ok) {
            result.diagnostics.push_back({severity::error, spec.key_position,
                                          "the key expression has type '" +
                                              key_fn->getReturnType().getAsString(printing_policy(context)) +
                                              "'; a key must be an integral value or a string "
                                              "(anything convertible to std::string_view)"});
          }
        }
      }
    }
    // Clang's error says the name is unknown; say which header declares idem's own codec.
    if (item.codec_region >= 0 && state.regions[static_cast<std::size_t>(item.codec_region)].errors > 0 &&
        spec.codec.find("json_codec") != std::string::npos) {
      const auto* json_codec_declared = [&]() -> const clang::NamedDecl* {
        const clang::TranslationUnitDecl* tu = context.getTranslationUnitDecl();
        for (const clang::NamedDecl* ns : tu->lookup(&context.Idents.get("idem")))
          if (const auto* n = llvm::dyn_cast<clang::NamespaceDecl>(ns))
            for (const clang::NamedDecl* d : n->lookup(&context.Idents.get("json_codec"))) return d;
        return nullptr;
      }();
      if (json_codec_declared == nullptr)
        result.diagnostics.push_back({severity::note, spec.codec_position,
                                      "idem::json_codec is declared in <idem/json_codec.hpp>: include it in the "
                                      "annotated header"});
    }
    if (item.codec_region >= 0 && state.regions[static_cast<std::size_t>(item.codec_region)].errors == 0) {
      const std::optional<bool> ok = evaluate(find(*item.function, item.codec_ok));
      if (ok && !*ok) {
        result.diagnostics.push_back(
            {severity::error, spec.codec_position,
             "codec '" + spec.codec + "' cannot encode and decode '" + spec.facts.return_type + "': idem::codec_for<" +
                 spec.codec + ", " + spec.facts.return_type + "> is not satisfied (" + codec_requirement(spec.codec) +
                 ")"});
      }
    }
  }
  state_.consumer->set_check_state(nullptr);
}

}  // namespace

analysis_result analyze(const analysis_request& request) {
  analysis_result result;
  collecting_consumer consumer(result.diagnostics);
  shared_state state{&request, &result, &consumer};

  // The driver finds the GCC installation (libstdc++) relative to the compiler it thinks it is.
  std::vector<std::string> args{IDEM_ANNOTATE_CLANG, "-fsyntax-only", "-x", "c++"};
  bool has_std = false;
  for (const std::string& arg : request.compiler_args) {
    if (arg.rfind("-std=", 0) == 0) has_std = true;
    args.push_back(arg);
  }
  if (!has_std) args.push_back("-std=c++20");
  // Only errors matter here: the real compile reports warnings. idem-annotate prints every
  // diagnostic itself, so Clang's own "N errors generated." (which counts only Clang's) is off.
  args.push_back("-w");
  args.push_back("-fno-caret-diagnostics");
  if (!request.resource_dir.empty()) args.push_back("-resource-dir=" + request.resource_dir);
  if (!request.idem_include_dir.empty()) {
    args.push_back("-idirafter");
    args.push_back(request.idem_include_dir);
  }
  args.push_back(request.source);

  llvm::IntrusiveRefCntPtr<clang::FileManager> files(
      new clang::FileManager(clang::FileSystemOptions(), llvm::vfs::getRealFileSystem()));
  clang::tooling::ToolInvocation invocation(args, std::make_unique<annotate_action>(state), files.get());
  invocation.setDiagnosticConsumer(&consumer);
  const bool ran = invocation.run();

  // Every file the parse read, for the depfile.
  std::set<std::string> seen;
  llvm::SmallVector<clang::OptionalFileEntryRef, 64> entries;
  files->GetUniqueIDMapping(entries);
  for (const clang::OptionalFileEntryRef& entry : entries)
    if (entry) seen.insert(entry->getName().str());
  result.dependencies.assign(seen.begin(), seen.end());

  const bool any_error = std::any_of(result.diagnostics.begin(), result.diagnostics.end(),
                                     [](const diagnostic& d) { return d.level == severity::error; });
  result.ok = ran && !any_error;
  if (!ran && !any_error)
    result.diagnostics.push_back(
        {severity::error, {request.source, 0, 0},
         "idem-annotate: Clang reported an error that could not be placed on an attribute; rerun with "
         "--no-key-check to see whether the key checks cause it, and report it"});
  if (!result.ok) {
    result.specs.clear();
    result.classes.clear();
  }
  return result;
}

}  // namespace idem::annotate
