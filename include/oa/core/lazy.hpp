#pragma once
// lazy<T>: a handle to a value of the task graph. Nothing is computed until
// the value is asked for (get(), conversion to const T&, oa::evaluate(), the
// end of an oa::scope). Values still held by a handle when their stage runs
// are materialized on the host; values nobody holds stay on the device chunk
// by chunk and are never copied back.

#include <memory>
#include <utility>

#include "oa/core/error.hpp"
#include "oa/core/graph.hpp"

namespace oa {

namespace detail {
/// Evaluates every pending call of the graph that owns `v` (if any).
void evaluate_owner(const value_state& v);
/// The error of `v` reached the caller: evaluate() need not throw it again.
void note_delivered(const value_state& v) noexcept;
}  // namespace detail

template <class T>
class lazy {
 public:
  using value_type = T;

  lazy() = default;
  explicit lazy(detail::value_ptr v) noexcept : v_(std::move(v)) { acquire(); }
  lazy(const lazy& o) noexcept : v_(o.v_) { acquire(); }
  lazy(lazy&& o) noexcept : v_(std::move(o.v_)) {}
  lazy& operator=(const lazy& o) noexcept {
    if (v_ != o.v_) {
      release();
      v_ = o.v_;
      acquire();
    }
    return *this;
  }
  lazy& operator=(lazy&& o) noexcept {
    if (this != &o) {
      release();
      v_ = std::move(o.v_);
    }
    return *this;
  }
  ~lazy() { release(); }

  /// The value, computing it (and everything pending before it) first.
  /// Rethrows the error of the call that produced it, or of a call it depends on.
  const T& get() const& {
    if (!v_) throw error("oa::lazy::get: empty handle (default-constructed or moved from)");
    // Acquire: the value and its error, written by whichever thread
    // evaluated it, are visible once the status says it is done.
    if (v_->pending()) detail::evaluate_owner(*v_);
    if (v_->status.load(std::memory_order_acquire) == detail::value_status::failed) {
      detail::note_delivered(*v_);
      std::rethrow_exception(v_->error);
    }
    return *static_cast<const T*>(v_->object);
  }
  /// Of a temporary handle (`f(x).get()`), the value itself, as take()
  /// gives it: a reference into a handle about to go would dangle.
  T get() && { return std::move(*this).take(); }
  operator const T&() const { return get(); }
  /// The value, moved out when the runtime owns it (a result) and nothing
  /// else holds it (no other handle, no pending call, no table of the
  /// runtime), else copied; the handle is empty afterwards. For eager
  /// wrappers that return a library's own type by value.
  T take() && {
    const T& value = get();
    lazy self(std::move(*this));
    // The value and its storage: a later call reading a ready value shares
    // the storage (not the value) with it.
    if (self.v_->owned && self.v_.use_count() == 1 && self.v_->owned.use_count() == 1)
      return std::move(*static_cast<T*>(self.v_->object));
    return value;
  }

  bool valid() const noexcept { return v_ != nullptr; }
  bool ready() const noexcept {
    return v_ && v_->status.load(std::memory_order_acquire) == detail::value_status::ready;
  }
  const detail::value_ptr& state() const noexcept { return v_; }

 private:
  void acquire() noexcept {
    if (v_) v_->handles.fetch_add(1, std::memory_order_relaxed);
  }
  void release() noexcept {
    if (v_) v_->handles.fetch_sub(1, std::memory_order_relaxed);
    v_.reset();
  }
  detail::value_ptr v_;
};

/// A handle over the caller's object, not copied: it must stay alive and
/// unchanged until the calls that read it have run.
template <class T>
lazy<std::remove_const_t<T>> ref(T& x) {
  auto v = std::make_shared<detail::value_state>();
  v->label = "caller's object";
  v->object = const_cast<std::remove_const_t<T>*>(&x);
  v->user_storage = true;
  return lazy<std::remove_const_t<T>>(std::move(v));
}

/// A handle owning a copy (or the moved-in value) of `x`.
template <class T>
lazy<std::decay_t<T>> hold(T&& x) {
  using V = std::decay_t<T>;
  auto v = std::make_shared<detail::value_state>();
  auto p = std::make_shared<V>(std::forward<T>(x));
  v->label = "held value";
  v->object = p.get();
  v->owned = std::move(p);
  return lazy<V>(std::move(v));
}

template <class T>
struct is_lazy : std::false_type {};
template <class T>
struct is_lazy<lazy<T>> : std::true_type {};
template <class T>
inline constexpr bool is_lazy_v = is_lazy<std::remove_cvref_t<T>>::value;

}  // namespace oa
