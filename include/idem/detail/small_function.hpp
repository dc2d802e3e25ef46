// idem/detail/small_function.hpp — a copyable function wrapper that keeps any callable of up to
// `Capacity` bytes with a non-throwing move in its own storage, whatever its copy constructor.
//
// Why not std::function: libstdc++ keeps only trivially copyable callables of up to 16 bytes in
// place, so every asynchronous step that captured a std::shared_ptr (the object keeping a call
// alive) cost a heap allocation, several per call. A larger callable, or one whose move may throw,
// is kept on the heap as std::function would keep it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace idem::detail {

template <class Signature, std::size_t Capacity = 48>
class small_function;

template <class F>
inline constexpr bool is_std_function_v = false;
template <class S>
inline constexpr bool is_std_function_v<std::function<S>> = true;

template <class R, class... Args, std::size_t Capacity>
class small_function<R(Args...), Capacity> {
  template <class D>
  static constexpr bool stored_in_place = sizeof(D) <= Capacity && alignof(D) <= alignof(std::max_align_t) &&
                                          std::is_nothrow_move_constructible_v<D>;

 public:
  small_function() noexcept = default;
  small_function(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor): as std::function

  // Wraps a copy of `f`; empty when `f` is a null function pointer or an empty std::function.
  template <class F, class D = std::decay_t<F>>
    requires(!std::is_same_v<D, small_function> && std::is_copy_constructible_v<D> &&
             std::is_invocable_r_v<R, D&, Args...>)
  small_function(F&& f) {  // NOLINT(google-explicit-constructor): as std::function
    if constexpr (std::is_pointer_v<D> || std::is_member_pointer_v<D> || is_std_function_v<D>) {
      if (!f) return;
    }
    if constexpr (stored_in_place<D>) {
      ::new (static_cast<void*>(&storage_)) D(std::forward<F>(f));
      ops_ = &in_place_ops<D>;
    } else {
      *reinterpret_cast<D**>(&storage_) = new D(std::forward<F>(f));
      ops_ = &on_heap_ops<D>;
    }
  }

  small_function(const small_function& other) : ops_(other.ops_) {
    if (ops_ != nullptr) ops_->copy(other.storage_, storage_);
  }
  small_function(small_function&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) ops_->move(other.storage_, storage_);
    other.ops_ = nullptr;
  }
  small_function& operator=(const small_function& other) {
    if (this != &other) *this = small_function(other);
    return *this;
  }
  small_function& operator=(small_function&& other) noexcept {
    if (this != &other) {
      reset();
      ops_ = other.ops_;
      if (ops_ != nullptr) ops_->move(other.storage_, storage_);
      other.ops_ = nullptr;
    }
    return *this;
  }
  small_function& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  ~small_function() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }

  // True when a callable of type F is kept in the object itself, without an allocation.
  template <class F>
  static constexpr bool keeps_in_place = stored_in_place<std::decay_t<F>>;

  // Calls the callable; throws std::bad_function_call when empty, as std::function does.
  R operator()(Args... args) const {
    if (ops_ == nullptr) throw std::bad_function_call();
    return ops_->call(storage_, std::forward<Args>(args)...);
  }

 private:
  struct storage {
    alignas(std::max_align_t) std::byte bytes[Capacity];
  };


  struct operations {
    R (*call)(const storage&, Args&&...);
    void (*copy)(const storage& from, storage& to);
    void (*move)(storage& from, storage& to) noexcept;  // leaves `from` destroyed
    void (*destroy)(storage&) noexcept;
  };

  // The callable is called as non-const, as std::function calls it.
  template <class D>
  static D& in_place(const storage& s) noexcept {
    return *std::launder(reinterpret_cast<D*>(const_cast<storage*>(&s)));
  }
  template <class D>
  static D& on_heap(const storage& s) noexcept {
    return **reinterpret_cast<D* const*>(&s);
  }

  template <class D>
  static constexpr operations in_place_ops{
      [](const storage& s, Args&&... args) -> R { return std::invoke(in_place<D>(s), std::forward<Args>(args)...); },
      [](const storage& from, storage& to) { ::new (static_cast<void*>(&to)) D(in_place<D>(from)); },
      [](storage& from, storage& to) noexcept {
        ::new (static_cast<void*>(&to)) D(std::move(in_place<D>(from)));
        in_place<D>(from).~D();
      },
      [](storage& s) noexcept { in_place<D>(s).~D(); },
  };
  template <class D>
  static constexpr operations on_heap_ops{
      [](const storage& s, Args&&... args) -> R { return std::invoke(on_heap<D>(s), std::forward<Args>(args)...); },
      [](const storage& from, storage& to) { *reinterpret_cast<D**>(&to) = new D(on_heap<D>(from)); },
      [](storage& from, storage& to) noexcept {
        *reinterpret_cast<D**>(&to) = *reinterpret_cast<D**>(&from);
      },
      [](storage& s) noexcept { delete &on_heap<D>(s); },
  };

  void reset() noexcept {
    if (ops_ != nullptr) ops_->destroy(storage_);
    ops_ = nullptr;
  }

  storage storage_;
  const operations* ops_ = nullptr;
};

}  // namespace idem::detail
