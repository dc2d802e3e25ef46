// Codecs: required exactly when there is a value to replay, and checked against the runtime's
// concept idem::codec_for<C, T> by Sema.
#pragma once

#include <idem/json_codec.hpp>
#include <optional>
#include <string>

struct Command {
  long id;
};
struct Receipt {
  std::string text;
};
struct ReceiptCodec {
  idem::payload encode(const Receipt& r) const;
  Receipt decode(const idem::payload& p) const;
};
struct EncodeOnly {
  idem::payload encode(const Receipt& r) const;
};
struct Unserialisable {  // no to_json / from_json
  long id;
};

struct Codecs {
  // expected-error@+1:11 {{'Codecs::a' returns 'Receipt', so a duplicate call must be given that value back: name a codec that encodes it, for example codec = "idem::json_codec"}}
  [[idem::idempotent(key = "cmd.id")]] Receipt a(const Command& cmd);

  // expected-error@+1:47 {{codec "ReceiptCodec" is pointless: 'Codecs::b' returns void and has nothing to replay}}
  [[idem::idempotent(key = "cmd.id", codec = "ReceiptCodec")]] void b(const Command& cmd);

  // expected-note@15:8 {{'ReceiptCodec' declared here}}
  // expected-error@+1:47 {{unknown type name 'ReceiptCodex'; did you mean 'ReceiptCodec'?}}
  [[idem::idempotent(key = "cmd.id", codec = "ReceiptCodex")]] Receipt c(const Command& cmd);

  // expected-error@+1:47 {{codec 'EncodeOnly' cannot encode and decode 'Receipt': idem::codec_for<EncodeOnly, Receipt> is not satisfied (it needs a default constructor, payload encode(const T&) const, and T decode(const payload&) const or a template decode<T>)}}
  [[idem::idempotent(key = "cmd.id", codec = "EncodeOnly")]] Receipt d(const Command& cmd);

  // expected-error@+1:11 {{'Codecs::e' returns a reference ('const Receipt&'): a duplicate call is given a decoded copy of the first result, never a reference; return by value}}
  [[idem::idempotent(key = "cmd.id", codec = "ReceiptCodec")]] const Receipt& e(const Command& cmd);

  // expected-error@+1:47 {{codec 'idem::json_codec' cannot encode and decode 'Unserialisable': idem::codec_for<idem::json_codec, Unserialisable> is not satisfied (idem::json_codec needs a type nlohmann::json converts both ways: give it to_json and from_json, for example with NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE)}}
  [[idem::idempotent(key = "cmd.id", codec = "idem::json_codec")]] Unserialisable h(const Command& cmd);

  // expected-error@+1:47 {{codec 'idem::json_codec' cannot encode and decode 'std::optional<Unserialisable>': idem::codec_for<idem::json_codec, std::optional<Unserialisable>> is not satisfied (idem::json_codec needs a type nlohmann::json converts both ways: give it to_json and from_json, for example with NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE)}}
  [[idem::idempotent(key = "cmd.id", codec = "idem::json_codec")]] std::optional<Unserialisable> i(const Command& cmd);

  // Valid: std::optional of a type json_codec encodes.
  [[idem::idempotent(key = "cmd.id", codec = "idem::json_codec")]] std::optional<std::string> j(const Command& cmd);

  // Valid: a codec for one type, and idem::json_codec for a type nlohmann/json can serialise.
  [[idem::idempotent(key = "cmd.id", codec = "ReceiptCodec")]] Receipt f(const Command& cmd);
  [[idem::idempotent(key = "cmd.id", codec = "idem::json_codec")]] std::string g(const Command& cmd);
};
