// idem/transaction.hpp — how the engine takes part in the caller's transaction.
//
// A transaction that idem can see is an idem::transaction bound to the calling thread. The SQL
// stores ship RAII transactions over the user's own connection (idem::sqlite_transaction,
// idem::postgres_transaction) that bind themselves; other transaction frameworks implement the
// interface and bind with idem::transaction_binding.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <idem/async.hpp>

namespace idem {

// Where the transaction of an annotated function comes from: the attribute's `transaction`.
enum class transaction_demand {
  // The default: the function takes part in whatever transaction its caller bound, or in none.
  caller,
  // The function always runs in a transaction: its caller's active one, else one that the
  // wrapper (idem::guarded<C>, idem::invoke) begins from its transaction_source before it claims
  // the record, commits when the function returns and rolls back when it throws.
  required,
};

// Parses "caller" / "required" (case-insensitive). Returns nullopt for anything else.
[[nodiscard]] std::optional<transaction_demand> parse_transaction_demand(std::string_view text) noexcept;
std::string_view to_string(transaction_demand demand) noexcept;

// idem::transaction
//
// The engine's view of a transaction: whether it is active, checks to run before it commits, and
// callbacks to run once it ends. Exactly one of the two callback lists runs, once, when the
// transaction ends; an unknown outcome counts as a rollback.
class transaction {
 public:
  virtual ~transaction() = default;

  // True while the transaction can still commit.
  virtual bool active() const = 0;
  // Runs `check` just before the commit. A check that throws stops the commit: the transaction
  // rolls back and the commit throws what the check threw. The engine confirms here that it
  // still holds the lease of every record the transaction's work belongs to.
  virtual void before_commit(std::function<void()> check) = 0;
  // Runs `callback` after a successful commit; at once if the transaction already committed.
  virtual void after_commit(std::function<void()> callback) = 0;
  // Runs `callback` after a rollback (including a destructor that rolls back); at once if the
  // transaction already rolled back.
  virtual void after_rollback(std::function<void()> callback) = 0;
};

// The innermost transaction bound to the calling thread, or nullptr.
transaction* current_transaction() noexcept;

// idem::transaction_binding
//
// RAII: binds `tx` to the calling thread for the binding's lifetime, so that calls through the
// engine on this thread take part in it. Bindings nest; they must be destroyed in reverse order
// on the thread that created them. Not copyable, not movable.
class transaction_binding {
 public:
  explicit transaction_binding(transaction& tx) noexcept;
  ~transaction_binding();
  transaction_binding(const transaction_binding&) = delete;
  transaction_binding& operator=(const transaction_binding&) = delete;

 private:
  transaction* previous_;
};

// idem::basic_transaction
//
// A helper for implementations: keeps the check and callback lists and runs them. A derived
// class calls prepare_commit() before it commits (and rolls back instead if that throws),
// finish_commit() after its commit succeeded and finish_rollback() after it rolled back; each of
// the last two runs its list once and ends the transaction. A callback registered after the end
// runs at once if the transaction ended its way and is discarded otherwise (its event can no
// longer happen). Callbacks must not throw (one that throws is ignored); checks may.
class basic_transaction : public transaction {
 public:
  bool active() const override { return state_ == state::active; }
  // Throws idem::error if the transaction already ended: nothing is left to check.
  void before_commit(std::function<void()> check) override;
  void after_commit(std::function<void()> callback) override;
  void after_rollback(std::function<void()> callback) override;

 protected:
  // Runs the before-commit checks in order; the first that throws stops the others and its
  // exception propagates.
  void prepare_commit();
  void finish_commit() noexcept;
  void finish_rollback() noexcept;

 private:
  enum class state { active, committed, rolled_back };
  // Ends the transaction as `end`: runs the callbacks of what `happened`, drops those that `never` will.
  void finish(state end, std::vector<std::function<void()>>& happened,
              std::vector<std::function<void()>>& never) noexcept;
  state state_ = state::active;
  std::vector<std::function<void()>> before_commit_;
  std::vector<std::function<void()>> on_commit_;
  std::vector<std::function<void()>> on_rollback_;
};

// idem::unbound
//
// Constructs one of idem's RAII transactions without binding it to the calling thread, for a
// coroutine that carries it across its suspensions and hands it to idem::async_execute itself.
struct unbound_t {
  explicit unbound_t() = default;
};
inline constexpr unbound_t unbound{};

// idem::opened_transaction
//
// A transaction that a transaction_source began for one call (bound to the calling thread while
// it lives, unless begun unbound). Destroying it without commit() rolls it back.
class opened_transaction {
 public:
  virtual ~opened_transaction() = default;
  // The transaction, as the engine sees it.
  virtual transaction& get() noexcept = 0;
  // Commits, running the engine's before-commit checks first; throws what the transaction's own
  // commit throws (the transaction has then rolled back, or its outcome is unknown).
  virtual void commit() = 0;
  // commit() for a coroutine, which must not block its thread: `done` is called once, with null or
  // with what commit() threw, on any thread; the object must live until then. The default commits
  // here, on the calling thread.
  virtual void async_commit(async_done done);
  // Rolls back for a coroutine: `done` is called once (with null: a rollback does not fail), on
  // any thread, after which destroying the object has nothing left to do; the object must live
  // until then. The default only calls `done`, leaving the rollback to the destructor.
  virtual void async_rollback(async_done done);
};

// idem::transaction_source
//
// Begins the transactions of methods annotated with transaction = "required": give one to
// idem::guarded<C> (`guarded<C>{engine, source, C's constructor arguments...}`) or to
// idem::invoke. The method's body reaches the same connection through its own members (the
// connection the source was made with). Called on the thread that calls the method; a source used
// by several threads at once must give each its own connection.
class transaction_source {
 public:
  virtual ~transaction_source() = default;
  // Begins a transaction and binds it to the calling thread (it is idem::current_transaction()
  // until it ends). Throws what beginning throws (configuration_error for a connection that
  // cannot begin one, store_unavailable_error when BEGIN fails).
  [[nodiscard]] virtual std::unique_ptr<opened_transaction> begin() = 0;
  // Begins a transaction bound to no thread, for a coroutine method (its idem::guarded<C> wrapper
  // hands it to idem::async_execute across its suspensions). The default throws
  // configuration_error: a source whose transactions always bind themselves cannot serve one.
  [[nodiscard]] virtual std::unique_ptr<opened_transaction> begin_unbound();
  // begin_unbound() for a coroutine, which must not block its thread: `done` is called once, with
  // the transaction or with what begin_unbound() threw, on any thread. The default begins here,
  // on the calling thread.
  virtual void async_begin_unbound(async_handler<std::unique_ptr<opened_transaction>> done);
};

// idem::is_blocking_transaction<Tx>
//
// True for an RAII transaction whose BEGIN, COMMIT and ROLLBACK block the thread that runs them
// (a round trip to a server, a wait for a file lock): idem::basic_transaction_source then runs
// them for coroutines on a small pool of idem's own threads, so that they never stall the
// coroutine's event loop. Specialize it for a transaction type of your own that blocks (and has
// rollback()); idem's SQLite and PostgreSQL transactions are.
template <class Tx>
struct is_blocking_transaction : std::false_type {};
template <class Tx>
inline constexpr bool is_blocking_transaction_v = is_blocking_transaction<Tx>::value;

namespace detail {
// Runs `step` on idem's pool of threads for blocking calls and reports how it ended to `done`
// (null: it returned) from that thread.
void run_blocking(std::function<void()> step, async_done done);

// Runs `make` (which returns what it made, a std::unique_ptr) the same way and hands what it made,
// or what it threw, to `done(error, made)`.
template <class Make, class Done>
void make_blocking(Make make, Done done) {
  auto made = std::make_shared<std::invoke_result_t<Make&>>();
  run_blocking([made, make = std::move(make)]() mutable { *made = make(); },
               [made, done = std::move(done)](std::exception_ptr error) { done(std::move(error), std::move(*made)); });
}
}  // namespace detail

// idem::basic_transaction_source<Tx, Connection>
//
// A transaction_source that constructs a Tx on `connection` for each call:
// idem::sqlite_transaction_source and idem::postgres_transaction_source are two. Tx is an RAII
// transaction derived from idem::transaction that binds itself to its thread: constructible from
// Connection (and, to serve coroutine methods, from Connection and idem::unbound), with commit(),
// and a destructor that rolls back when commit() did not run. When is_blocking_transaction_v<Tx>,
// a coroutine's transaction is begun, committed and rolled back (Tx::rollback()) on idem's pool of
// threads for blocking calls, off the coroutine's thread.
template <class Tx, class Connection>
class basic_transaction_source final : public transaction_source {
 public:
  explicit basic_transaction_source(Connection connection) noexcept(std::is_nothrow_move_constructible_v<Connection>)
      : connection_(std::move(connection)) {}

  [[nodiscard]] std::unique_ptr<opened_transaction> begin() override { return std::make_unique<opened>(connection_); }

  [[nodiscard]] std::unique_ptr<opened_transaction> begin_unbound() override {
    if constexpr (std::is_constructible_v<Tx, const Connection&, unbound_t>)
      return std::make_unique<opened>(connection_, unbound);
    else
      return transaction_source::begin_unbound();
  }

  void async_begin_unbound(async_handler<std::unique_ptr<opened_transaction>> done) override {
    if constexpr (is_blocking_transaction_v<Tx>) {
      detail::make_blocking([this] { return begin_unbound(); }, std::move(done));
    } else {
      transaction_source::async_begin_unbound(std::move(done));
    }
  }

  // The connection each transaction begins on.
  const Connection& connection() const noexcept { return connection_; }

 private:
  class opened final : public opened_transaction {
   public:
    template <class... Args>
    explicit opened(const Args&... args) : tx_(args...) {}
    transaction& get() noexcept override { return tx_; }
    void commit() override { tx_.commit(); }

    void async_commit(async_done done) override {
      if constexpr (is_blocking_transaction_v<Tx>)
        detail::run_blocking([this] { tx_.commit(); }, std::move(done));
      else
        opened_transaction::async_commit(std::move(done));
    }

    void async_rollback(async_done done) override {
      if constexpr (is_blocking_transaction_v<Tx>)
        detail::run_blocking([this] { tx_.rollback(); }, std::move(done));
      else
        opened_transaction::async_rollback(std::move(done));
    }

   private:
    Tx tx_;
  };

  Connection connection_;
};

namespace detail {
// The transaction a call of `function` annotated with transaction = "required" runs in: nullptr
// when the calling thread has an active transaction already (the call joins it), else one begun
// from `source`. Throws configuration_error when `source` is null.
[[nodiscard]] std::unique_ptr<opened_transaction> open_unless_active(transaction_source* source,
                                                                     std::string_view function);
// The source that begins the transaction of a call of `function` annotated with transaction =
// "required" and running in no active transaction (a coroutine never joins one): `*source`.
// Throws configuration_error when `source` is null.
transaction_source& required_source(transaction_source* source, std::string_view function);
}  // namespace detail

}  // namespace idem
