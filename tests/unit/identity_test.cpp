#include <catch2/catch.hpp>

#include <idem/context.hpp>
#include <idem/errors.hpp>
#include <idem/identity.hpp>

#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

using namespace std::chrono_literals;

TEST_CASE("identity: renders as scope and the first four bytes of the key's SHA-256", "[identity]") {
  // SHA-256("abc") = ba7816bf 8f01cfea ...
  const idem::identity id("PaymentController.create", "abc");
  CHECK(id.masked_key() == "#ba7816bf");
  CHECK(id.to_string() == "PaymentController.create/#ba7816bf");
  CHECK(idem::to_hex(id.key_digest().data(), 32) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("to_hex and append_hex: two lowercase digits per byte, every byte value", "[identity]") {
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  const auto* bytes = reinterpret_cast<const unsigned char*>(all_bytes.data());
  const std::string hex = idem::to_hex(bytes, all_bytes.size());
  REQUIRE(hex.size() == 512);
  CHECK(hex.substr(0, 8) == "00010203");
  CHECK(hex.substr(2 * 0x7e, 8) == "7e7f8081");
  CHECK(hex.substr(2 * 0xfc) == "fcfdfeff");
  std::string prefixed = "rec:";
  idem::append_hex(prefixed, bytes + 0xa9, 3);  // appends after what is there
  CHECK(prefixed == "rec:a9aaab");
  CHECK(idem::to_hex(bytes, 0).empty());
}

TEST_CASE("identity: the kept digest is always the digest of the key it has now", "[identity]") {
  const auto digest_of = [](std::string_view key) { return idem::sha256(key); };
  idem::identity a("S.m", "first");
  CHECK(a.key_digest() == digest_of("first"));
  CHECK(a.key_digest() == digest_of("first"));  // kept

  idem::identity copy(a);
  CHECK(copy.key_digest() == digest_of("first"));
  idem::identity other("S.m", "second");
  CHECK(other.key_digest() == digest_of("second"));
  copy = other;  // a kept digest is replaced, never left behind
  CHECK(copy.key_digest() == digest_of("second"));
  idem::identity fresh("S.m", "third");  // no digest yet: the assigned-to one must forget its own
  copy = fresh;
  CHECK(copy.key_digest() == digest_of("third"));

  idem::identity moved(std::move(other));
  CHECK(moved.key_digest() == digest_of("second"));
  other = idem::identity("S.m", "fourth");  // the moved-from one, assigned again
  CHECK(other.key_digest() == digest_of("fourth"));
  moved = std::move(a);
  CHECK(moved.key_digest() == digest_of("first"));
  CHECK(moved == idem::identity("S.m", "first"));  // equality ignores whether a digest is kept
}

TEST_CASE("identity: threads that ask for the digest of one identity at once all get it", "[identity][concurrency]") {
  const idem::identity shared("S.m", "concurrent-key");
  const auto expected = idem::sha256("concurrent-key");
  std::vector<std::thread> threads;
  std::vector<int> right(8, 0);
  for (std::size_t t = 0; t < right.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const idem::identity copy(shared);  // copies race with the first computation
        right[t] += (shared.key_digest() == expected && copy.key_digest() == expected) ? 1 : 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r : right) CHECK(r == 200);
}

TEST_CASE("identity: scope rules are enforced with configuration_error", "[identity]") {
  CHECK_THROWS_AS(idem::identity("", "k"), idem::configuration_error);
  CHECK_THROWS_AS(idem::identity(std::string(129, 's'), "k"), idem::configuration_error);
  CHECK_NOTHROW(idem::identity(std::string(128, 's'), "k"));
  CHECK_THROWS_WITH(idem::identity("A:b", "k"), Catch::Contains("must not contain ':'"));
  // Like the original's isBlank: a scope of only whitespace is not a scope; inner spaces are fine.
  CHECK_THROWS_WITH(idem::identity(" \t ", "k"), Catch::Contains("scope must not be blank"));
  CHECK_NOTHROW(idem::identity("Orders v2", "k"));
}

TEST_CASE("static_scope: checked once, kept once per name, referred to by identities", "[identity]") {
  CHECK_THROWS_AS(idem::static_scope(""), idem::configuration_error);
  CHECK_THROWS_WITH(idem::static_scope("A:b"), Catch::Contains("must not contain ':'"));
  CHECK_THROWS_AS(idem::static_scope(std::string(129, 's')), idem::configuration_error);

  const idem::static_scope orders("Orders.placeOrder");  // longer than std::string keeps inline
  CHECK(orders.name() == "Orders.placeOrder");
  CHECK(&idem::static_scope(std::string("Orders.") + "placeOrder").name() == &orders.name());  // one kept copy

  const idem::identity kept(orders, "key-1");
  CHECK(&kept.scope() == &orders.name());  // referred to, not copied
  CHECK(kept == idem::identity("Orders.placeOrder", "key-1"));
  CHECK(kept.to_string() == idem::identity("Orders.placeOrder", "key-1").to_string());
  CHECK_THROWS_AS(idem::identity(orders, ""), idem::invalid_key_error);
  try {  // the kept-scope path refuses a key with the same message, which never quotes it
    idem::identity(orders, std::string(256, 'Q'));
    FAIL("expected invalid_key_error");
  } catch (const idem::invalid_key_error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("255 bytes") && Catch::Contains("Orders.placeOrder"));
    CHECK(message.find("QQQQ") == std::string::npos);
  }
}

TEST_CASE("static_scope: threads that keep one name at once share one copy", "[identity][concurrency]") {
  std::vector<const std::string*> kept(8, nullptr);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < kept.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        // A name per round, so that the threads race to insert it, not only to find it.
        const idem::static_scope scope("Concurrent.scope" + std::to_string(i));
        if (i == 49) kept[t] = &scope.name();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string* name : kept) CHECK(name == &idem::static_scope("Concurrent.scope49").name());
}

TEST_CASE("identity: copies and moves keep their scope, kept or their own", "[identity]") {
  const idem::static_scope orders("Orders.placeOrder");
  idem::identity owning("Owned.scope.name", "k1");
  idem::identity kept(orders, "k2");

  idem::identity copy_of_owning(owning);
  CHECK(&copy_of_owning.scope() != &owning.scope());  // its own copy, not the original's
  CHECK(copy_of_owning.scope() == "Owned.scope.name");
  idem::identity copy_of_kept(kept);
  CHECK(&copy_of_kept.scope() == &orders.name());

  copy_of_kept = owning;  // a kept scope replaced by an owned one
  CHECK(copy_of_kept.scope() == "Owned.scope.name");
  CHECK(&copy_of_kept.scope() != &owning.scope());
  copy_of_owning = kept;  // and the other way round
  CHECK(&copy_of_owning.scope() == &orders.name());
  CHECK(copy_of_owning == kept);

  {
    idem::identity temporary("Temporary.scope.name", "k3");
    idem::identity moved(std::move(temporary));
    temporary = idem::identity("Another.scope.name", "k4");  // the moved-from one, assigned again
    CHECK(temporary.scope() == "Another.scope.name");
    owning = std::move(moved);
  }  // `temporary` and `moved` are gone: `owning` must not refer to either
  CHECK(owning.scope() == "Temporary.scope.name");
  CHECK(owning.to_string().starts_with("Temporary.scope.name/#"));
  idem::identity moved_kept(std::move(kept));
  CHECK(&moved_kept.scope() == &orders.name());
}

TEST_CASE("identity: hash() depends on the scope and the key, never on how the scope is held", "[identity]") {
  const idem::static_scope orders("Orders.placeOrder");
  const idem::identity kept(orders, "key-1");
  const idem::identity owned("Orders.placeOrder", "key-1");
  CHECK(kept.hash() == owned.hash());  // equal identities hash alike: one record, whichever constructor
  CHECK(std::hash<idem::identity>{}(kept) == kept.hash());
  CHECK(kept.hash() != idem::identity("Orders.placeOrder", "key-2").hash());
  CHECK(kept.hash() != idem::identity("Orders.cancelOrder", "key-1").hash());
  // The same characters split differently between scope and key are another identity.
  CHECK(idem::identity("Ab", "c").hash() != idem::identity("A", "bc").hash());

  idem::identity source("Temporary.scope.name", "k1");
  const std::size_t before = source.hash();  // kept from here on
  const idem::identity copy(source);
  CHECK(copy.hash() == before);
  idem::identity moved(std::move(source));
  CHECK(moved.hash() == before);
  source = idem::identity("Another.scope.name", "k2");  // the moved-from one, assigned again
  CHECK(source.hash() == idem::identity("Another.scope.name", "k2").hash());
  moved = source;  // an identity that kept a hash, assigned another: it keeps the new one
  CHECK(moved.hash() == source.hash());
  CHECK(moved.hash() != before);

  std::unordered_set<idem::identity> set{kept, owned, idem::identity("Orders.placeOrder", "key-2")};
  CHECK(set.size() == 2);
  CHECK(set.contains(idem::identity(orders, "key-2")));
}

TEST_CASE("identity: a bad key is refused without quoting it", "[identity]") {
  CHECK_THROWS_AS(idem::identity("S.m", ""), idem::invalid_key_error);
  const std::string long_key(256, 'Q');
  try {
    idem::identity("S.m", long_key);
    FAIL("expected invalid_key_error");
  } catch (const idem::invalid_key_error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::Contains("255 bytes"));
    CHECK(message.find("QQQQ") == std::string::npos);
  }
  CHECK_NOTHROW(idem::identity("S.m", std::string(255, 'k')));
  // Keys may contain colons and any bytes.
  CHECK_NOTHROW(idem::identity("S.m", std::string("a:b\0c", 5)));
}

TEST_CASE("context: validation names the field and never the key", "[identity]") {
  const std::string secret = "customer-4711-secret";
  idem::context ctx{.id = idem::identity("S.m", secret)};
  CHECK_NOTHROW(ctx.validate());
  ctx.ttl = 0ms;
  CHECK_THROWS_WITH(ctx.validate(), Catch::Contains("ttl") && !Catch::Contains(secret));
  ctx.ttl = 1ms;
  ctx.lease = 1ms;
  CHECK_THROWS_WITH(ctx.validate(), Catch::Contains("lease") && Catch::Contains("S.m/#"));
  ctx.lease = 2ms;
  ctx.wait = -1ms;
  CHECK_THROWS_WITH(ctx.validate(), Catch::Contains("wait"));
  ctx.wait = 0ms;
  CHECK_NOTHROW(ctx.validate());
  ctx.fingerprint = "abc";
  CHECK_THROWS_WITH(ctx.validate(), Catch::Contains("at least 16"));
  ctx.fingerprint = std::string(16, 'g');
  CHECK_THROWS_WITH(ctx.validate(), Catch::Contains("hex"));
  ctx.fingerprint = std::string(129, 'a');
  CHECK_THROWS_WITH(ctx.validate(), Catch::Contains("at most 128"));
  ctx.fingerprint = std::string(64, 'a');
  CHECK_NOTHROW(ctx.validate());
  // Without a fingerprint, a context at every bound passes and one past any bound fails.
  ctx.fingerprint.reset();
  CHECK_NOTHROW(ctx.validate());
  ctx.wait = -1ms;
  CHECK_THROWS_WITH(ctx.validate(), Catch::Contains("wait"));
}

TEST_CASE("completion mode: parsing is case-insensitive and accepts '_' for '-'", "[identity]") {
  CHECK(idem::parse_completion_mode("autonomous") == idem::completion_mode::autonomous);
  CHECK(idem::parse_completion_mode("JOIN_TRANSACTION") == idem::completion_mode::join_transaction);
  CHECK(idem::parse_completion_mode("join-transaction") == idem::completion_mode::join_transaction);
  CHECK_FALSE(idem::parse_completion_mode("joined").has_value());
  CHECK_FALSE(idem::parse_completion_mode("").has_value());
}
