/*
 * pinpool.hpp -- C++17 wrappers of pinpool.h: a pool, owners and pin guards
 * that give back what they hold when they go out of scope.  Header-only:
 * include it and link the C library as for pinpool.h.  Every call keeps the
 * meaning, errors and guarantees pinpool.h gives it.
 *
 *     pinpool::pool pool;                                 // pp_pool_create
 *     pinpool::owner tile = pool.put(buf, bytes);         // pp_put
 *     {
 *         auto out = pool.pin_write<double>(tile.ref());  // PP_PIN_WRITE
 *         out.data()[0] = 1.0;
 *     }                                                   // pp_unpin
 *                                                         // ~owner: pp_release
 *
 * ---------------------------------------------------------------------------
 * What each class holds
 * ---------------------------------------------------------------------------
 *  pool            a pp_pool_t (move-only).  The destructor destroys it.
 *  owner           one owner of an entry: copying retains (pp_retain),
 *                  moving transfers, the destructor releases (pp_release).
 *  pinned<T>       one read pin (move-only); data() is const T *.
 *  pinned_write<T> one PP_PIN_WRITE pin (move-only); data() is T *.
 *  pinned_many<T>  the pins of one pp_pin_many, all or none (move-only);
 *                  PP_PIN_WRITE unless T is const (the default: const void).
 *  scope           a pp_scope_t (neither copied nor moved): every pin taken
 *                  through it is dropped when it ends or is destroyed,
 *                  exception unwinding included.
 *  T = void means raw bytes: pinned<void>::data() is const void *.
 *
 *  A moved-from or default-constructed object is empty: it holds nothing,
 *  its destructor does nothing, unpin(), reset() and pool::destroy() of it
 *  return 0, and calls that need a pool pass it on as NULL and return the
 *  C call's error (PP_EINVAL).  unpin() and reset() return the C call's
 *  error and never throw: they are the forms that keep what they hold when
 *  a retry can still drop it.  On PP_ENOMEM (a thread new to the pool that
 *  could not register) nothing was dropped, and the object still holds it
 *  all: call again.  On any other error the pin or owner is gone (it was
 *  dropped behind the object's back), and the object is empty.
 *  pinned_many drops each pin at most once (pp_unpin_many reports how far
 *  it got).  There are no throwing forms of them: a destructor calls them,
 *  and cannot throw.
 *
 * ---------------------------------------------------------------------------
 * Lifetimes: declare the pool before what uses it
 * ---------------------------------------------------------------------------
 *  Guards, owners and scopes keep the pp_pool_t pointer, not the pool object.
 *  ~pool calls pp_pool_destroy.  If a pin is still held (a guard or scope
 *  that outlives the pool object), pp_pool_destroy refuses with PP_EBUSY
 *  and leaves the pool intact: ~pool then reports that (see "Reports") and
 *  leaves the C pool alive, leaked, so the guards that hold pins stay valid
 *  and drop them normally later.  A caller that kept pool.get() may
 *  pp_pool_destroy it once they are gone.  Owners are different: a pool
 *  destroyed while entries are still owned frees them (pinpool.h), so an
 *  owner that outlives its pool object releases into freed memory.  Owners
 *  must be destroyed, reset() or detach()ed before their pool; members and
 *  locals declared after the pool are destroyed before it.
 *
 * ---------------------------------------------------------------------------
 * Errors: exceptions, and the forms that never throw
 * ---------------------------------------------------------------------------
 *  A failed call throws pinpool::error, which carries the PP_E* code:
 *  code(), name() ("PP_ESTALE"), message() (pp_strerror), and what():
 *  "pp_pin: PP_ESTALE: stale, dead or never valid ref".  A failed call has
 *  no effect, as in C: a constructor that throws holds nothing, and a
 *  failed put leaves the data with the caller.  Every throwing call has a
 *  form that returns the code instead and never throws: pool::create,
 *  try_put, try_pin, try_pin_write, try_pin_many, try_unpin, try_copy
 *  ([[nodiscard]]); on failure their out argument is left as it was, and on
 *  success it gives up what it held before (after the new pin or owner is
 *  taken).
 *
 *  Without exceptions (-fno-exceptions: __cpp_exceptions undefined) the
 *  throwing members are left out and the rest stays: a scheduler built
 *  without exceptions uses the try_ forms, pool::create, pool(nullptr) as
 *  the empty pool to create into, and try_copy for owner, whose copy
 *  constructor and assignment are deleted (a copy could not report a
 *  failed pp_retain).
 *
 * ---------------------------------------------------------------------------
 * Reports: errors where nothing can throw
 * ---------------------------------------------------------------------------
 *  Destructors and move assignments never throw.  When the C call they make
 *  fails -- ~pool's pp_pool_destroy with PP_EBUSY; ~pinned's pp_unpin,
 *  ~owner's pp_release, ~scope's pp_scope_end after a pin was dropped
 *  behind the object's back -- they write one line to the report hook,
 *  standard error unless set_report() gives another, and go on: nothing
 *  aborts, debug builds included (misuse by a caller is an error, not a
 *  crash, as everywhere in pinpool).
 *
 * ---------------------------------------------------------------------------
 * Cost, threads and call sites
 * ---------------------------------------------------------------------------
 *  Every call that pins or unpins is an inline forward to the C call: no
 *  allocation, no lock, no virtual call.  The one exception is pinned_many,
 *  which keeps its refs and data pointers: up to pinned_many::inline_refs of
 *  them inside the object, more in one malloc (PP_ENOMEM if it fails, with
 *  no pin taken).  pinned<T>::size() asks pp_stat once and keeps the answer;
 *  pp_stat opens a QSBR thread's epoch section as pp_get does (pinpool.h,
 *  "Overload"), so a QSBR thread calls pp_quiescent() after it as usual.
 *
 *  An object is used by one thread at a time, and may be handed to another
 *  (pins may be dropped on any thread).  Const members may be called from
 *  several threads at once.
 *
 *  The constructors and pin calls take the caller's file and line as
 *  defaulted arguments (__builtin_FILE, __builtin_LINE with GCC and clang),
 *  so the PP_TRACK_PINS leak report names the line that took the pin, not
 *  this header; callers leave them out.  A scope's pins are recorded at the
 *  line that made the scope, as pp_scope_init records them.
 */
#ifndef PINPOOL_HPP
#define PINPOOL_HPP

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "pinpool.hpp needs C++17 (use pinpool.h from C)"
#endif

#include "pinpool.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <type_traits>
#include <utility>

#if __cplusplus >= 202002L && __has_include(<span>)
#include <span>
#define PP__CXX_SPAN 1
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PP__CXX_FILE __builtin_FILE()
#define PP__CXX_LINE __builtin_LINE()
#else
#define PP__CXX_FILE nullptr
#define PP__CXX_LINE 0
#endif

namespace pinpool {

/* ------------------------------------------------------------------------ */
/* Errors and reports                                                        */
/* ------------------------------------------------------------------------ */

/* A failed call: its PP_E* code and which C call failed.  The message is
 * kept inside the object, so throwing allocates nothing (PP_ENOMEM may be
 * what is being thrown) and copies never throw. */
class error : public std::exception {
 public:
    error(int code, const char *call) noexcept : code_(code)
    {
        std::snprintf(what_, sizeof what_, "%s: %s: %s", call != nullptr ? call : "pinpool",
                      pp_err_name(code), pp_strerror(code));
    }
    int code() const noexcept { return code_; }
    const char *name() const noexcept { return pp_err_name(code_); }
    const char *message() const noexcept { return pp_strerror(code_); }
    const char *what() const noexcept override { return what_; }

 private:
    int code_;
    char what_[160];
};

/* Receives each report line (no trailing newline).  Called from the
 * destructor that failed, on its thread; must not throw. */
using report_fn = void (*)(const char *line);

namespace detail {

inline std::atomic<report_fn> report_hook{nullptr};

/* One line for a C call that failed where nothing can throw. */
inline void report(const char *who, const char *call, int rc, pp_ref_t ref,
                   const char *then) noexcept
{
    char line[320];
    char at[40] = "";
    if (ref != PP_REF_NONE)
        std::snprintf(at, sizeof at, "(ref 0x%016llx)", static_cast<unsigned long long>(ref));
    std::snprintf(line, sizeof line, "pinpool: %s: %s%s: %s: %s%s%s", who, call, at,
                  pp_err_name(rc), pp_strerror(rc), then != nullptr ? "; " : "",
                  then != nullptr ? then : "");
    /* acquire: pairs with the release in set_report, so whatever the hook
     * reads that was set up before it was installed is visible here. */
    report_fn fn = report_hook.load(std::memory_order_acquire);
    if (fn != nullptr)
        fn(line);
    else
        std::fprintf(stderr, "%s\n", line);
}

#if defined(__cpp_exceptions)
[[noreturn]] inline void raise(int rc, const char *call) { throw error(rc, call); }
inline void check(int rc, const char *call)
{
    if (rc != 0)
        raise(rc, call);
}
#endif

}  // namespace detail

/* Sends report lines to fn from now on (nullptr: standard error); returns
 * the previous hook. */
inline report_fn set_report(report_fn fn) noexcept
{
    /* release: publishes what fn relies on to the reports that load it. */
    return detail::report_hook.exchange(fn, std::memory_order_acq_rel);
}

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* pp_options_t, set field by field from PP_OPTIONS_INIT.  The strings are
 * read by pp_pool_create only: they must live until the pool is made. */
class options {
 public:
    options() noexcept = default;
    explicit options(const pp_options_t &c) noexcept : o_(c) {}

    options &mem_limit(size_t bytes) noexcept { o_.mem_limit = bytes; return *this; }
    options &swap_dir(const char *dir) noexcept { o_.swap_dir = dir; return *this; }
    options &swap_limit(uint64_t bytes) noexcept { o_.swap_limit = bytes; return *this; }
    options &topology(const char *t) noexcept { o_.topology = t; return *this; }
    options &flags(unsigned f) noexcept { o_.flags = f; return *this; }
    options &report(void (*fn)(const char *line, void *ctx), void *ctx = nullptr) noexcept
    {
        o_.report = fn;
        o_.report_ctx = ctx;
        return *this;
    }
    options &reclaim_backlog(size_t bytes) noexcept { o_.reclaim_backlog = bytes; return *this; }

    const pp_options_t &c() const noexcept { return o_; }

 private:
    pp_options_t o_ = PP_OPTIONS_INIT;
};

/* ------------------------------------------------------------------------ */
/* Owners                                                                    */
/* ------------------------------------------------------------------------ */

/* One owner of an entry (empty: ref() is PP_REF_NONE). */
class owner {
 public:
    owner() noexcept = default;
    /* Adopts an owner the caller holds (from pp_put or pp_retain). */
    owner(pp_pool_t *pool, pp_ref_t adopted) noexcept : pool_(pool), ref_(adopted) {}

#if defined(__cpp_exceptions)
    owner(const owner &o) : pool_(o.pool_), ref_(o.ref_)
    {
        if (ref_ != PP_REF_NONE)
            detail::check(pp_retain(pool_, ref_), "pp_retain");
    }
    owner &operator=(const owner &o)
    {
        owner copy(o);   /* retains first: on failure *this is unchanged */
        swap(copy);
        return *this;
    }
#else
    owner(const owner &) = delete;
    owner &operator=(const owner &) = delete;
#endif
    owner(owner &&o) noexcept
        : pool_(std::exchange(o.pool_, nullptr)), ref_(std::exchange(o.ref_, PP_REF_NONE))
    {
    }
    owner &operator=(owner &&o) noexcept
    {
        if (this != &o) {
            drop("owner::operator=");
            pool_ = std::exchange(o.pool_, nullptr);
            ref_ = std::exchange(o.ref_, PP_REF_NONE);
        }
        return *this;
    }
    ~owner() { drop("~owner"); }

    /* A copy of this owner into out (pp_retain): 0, or the error. */
    [[nodiscard]] int try_copy(owner &out) const noexcept
    {
        if (ref_ != PP_REF_NONE) {
            int rc = pp_retain(pool_, ref_);
            if (rc != 0)
                return rc;
        }
        out = owner(pool_, ref_);
        return 0;
    }

    pp_ref_t ref() const noexcept { return ref_; }
    pp_pool_t *pool() const noexcept { return pool_; }
    explicit operator bool() const noexcept { return ref_ != PP_REF_NONE; }

    /* Gives the owner up without releasing it: the caller releases it.
     * pool() stays (empty is ref() == PP_REF_NONE; only a move clears
     * pool() too). */
    pp_ref_t detach() noexcept
    {
        pp_ref_t r = ref_;
        ref_ = PP_REF_NONE;
        return r;
    }
    /* Releases now (0 if empty).  Empty afterwards, except on PP_ENOMEM:
     * then it still holds the owner, for a retry. */
    int reset() noexcept
    {
        if (ref_ == PP_REF_NONE)
            return 0;
        int rc = pp_release(pool_, ref_);
        if (rc != PP_ENOMEM)
            ref_ = PP_REF_NONE;
        return rc;
    }
    void swap(owner &o) noexcept
    {
        std::swap(pool_, o.pool_);
        std::swap(ref_, o.ref_);
    }

 private:
    void drop(const char *who) noexcept
    {
        pp_ref_t r = ref_;
        int rc = reset();
        if (rc != 0)
            detail::report(who, "pp_release", rc, r, nullptr);
    }

    pp_pool_t *pool_ = nullptr;
    pp_ref_t ref_ = PP_REF_NONE;
};

/* ------------------------------------------------------------------------ */
/* Pin guards                                                                */
/* ------------------------------------------------------------------------ */

namespace detail {

/* What pinned<T> and pinned_write<T> share: one pin of ref, its data as
 * Elem *, and Flags ORed into every pin it takes. */
template <class Guard, class Elem, unsigned Flags>
class pin_guard {
    static_assert(!std::is_reference_v<Elem>, "pin guards hold pointers to objects");

 public:
    using element_type = Elem;

    pin_guard() noexcept = default;
    pin_guard(const pin_guard &) = delete;
    pin_guard &operator=(const pin_guard &) = delete;
    pin_guard(pin_guard &&o) noexcept { take(o); }
    pin_guard &operator=(pin_guard &&o) noexcept
    {
        if (this != &o) {
            drop(Flags != 0 ? "pinned_write::operator=" : "pinned::operator=");
            take(o);
        }
        return *this;
    }
    ~pin_guard() { drop(Flags != 0 ? "~pinned_write" : "~pinned"); }

    /* Pins ref into out: 0, or the error (out unchanged). */
    [[nodiscard]] static int try_pin(pp_pool_t *pool, pp_ref_t ref, unsigned flags, Guard &out,
                                     const char *file = PP__CXX_FILE,
                                     int line = PP__CXX_LINE) noexcept
    {
        void *data = nullptr;
        int rc = pp_pin_loc(pool, ref, flags | Flags, &data, file, line);
        if (rc == 0) {
            pin_guard &o = out;
            o.drop(Flags != 0 ? "pinned_write::try_pin" : "pinned::try_pin");
            o.pool_ = pool;
            o.ref_ = ref;
            o.data_ = data;
        }
        return rc;
    }

    Elem *data() const noexcept { return static_cast<Elem *>(data_); }
    pp_ref_t ref() const noexcept { return ref_; }
    pp_pool_t *pool() const noexcept { return pool_; }
    explicit operator bool() const noexcept { return ref_ != PP_REF_NONE; }

    /* The entry's size in bytes (0 if empty), from pp_stat on first use. */
    size_t size() const noexcept
    {
        if (ref_ == PP_REF_NONE)
            return 0;
        size_t s = size_.load(std::memory_order_relaxed);
        if (s == unknown_size) {
            pp_entry_info_t info;
            s = pp_stat(pool_, ref_, &info) == 0 ? info.size : 0;
            size_.store(s, std::memory_order_relaxed);   /* the same value from any thread */
        }
        return s;
    }
    /* Whole elements in the entry (bytes for void). */
    size_t count() const noexcept
    {
        if constexpr (std::is_void_v<Elem>)
            return size();
        else
            return size() / sizeof(Elem);
    }

    template <class E = Elem, std::enable_if_t<!std::is_void_v<E>, int> = 0>
    E *begin() const noexcept { return data(); }
    template <class E = Elem, std::enable_if_t<!std::is_void_v<E>, int> = 0>
    E *end() const noexcept { return data() + count(); }
    template <class E = Elem, std::enable_if_t<!std::is_void_v<E>, int> = 0>
    E &operator*() const noexcept { return *data(); }
    template <class E = Elem, std::enable_if_t<!std::is_void_v<E>, int> = 0>
    E *operator->() const noexcept { return data(); }
    template <class E = Elem, std::enable_if_t<!std::is_void_v<E>, int> = 0>
    E &operator[](size_t i) const noexcept { return data()[i]; }
#ifdef PP__CXX_SPAN
    template <class E = Elem, std::enable_if_t<!std::is_void_v<E>, int> = 0>
    std::span<E> span() const noexcept { return std::span<E>(data(), count()); }
#endif

    /* Drops the pin now (0 if empty).  Empty afterwards, except on
     * PP_ENOMEM: then it still holds the pin, for a retry. */
    int unpin() noexcept
    {
        if (ref_ == PP_REF_NONE)
            return 0;
        int rc = pp_unpin(pool_, ref_);
        if (rc != PP_ENOMEM)
            clear();
        return rc;
    }

 protected:
#if defined(__cpp_exceptions)
    pin_guard(pp_pool_t *pool, pp_ref_t ref, unsigned flags, const char *file, int line)
    {
        detail::check(pp_pin_loc(pool, ref, flags | Flags, &data_, file, line),
                      Flags != 0 ? "pp_pin(PP_PIN_WRITE)" : "pp_pin");
        pool_ = pool;
        ref_ = ref;
    }
#endif

 private:
    static constexpr size_t unknown_size = SIZE_MAX;   /* sizes are at most PTRDIFF_MAX */

    void clear() noexcept
    {
        pool_ = nullptr;
        ref_ = PP_REF_NONE;
        data_ = nullptr;
        size_.store(unknown_size, std::memory_order_relaxed);
    }
    void take(pin_guard &o) noexcept
    {
        pool_ = o.pool_;
        ref_ = o.ref_;
        data_ = o.data_;
        size_.store(o.size_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        o.clear();
    }
    void drop(const char *who) noexcept
    {
        pp_ref_t r = ref_;
        int rc = unpin();
        if (rc != 0)
            detail::report(who, "pp_unpin", rc, r, nullptr);
    }

    pp_pool_t *pool_ = nullptr;
    pp_ref_t ref_ = PP_REF_NONE;
    void *data_ = nullptr;
    mutable std::atomic<size_t> size_{unknown_size};
};

}  // namespace detail

/* A read pin: const T * for as long as the guard holds it. */
template <class T>
class pinned : public detail::pin_guard<pinned<T>, const T, 0u> {
    using base = detail::pin_guard<pinned<T>, const T, 0u>;

 public:
    pinned() noexcept = default;
#if defined(__cpp_exceptions)
    pinned(pp_pool_t *pool, pp_ref_t ref, unsigned flags = 0, const char *file = PP__CXX_FILE,
           int line = PP__CXX_LINE)
        : base(pool, ref, flags, file, line)
    {
    }
#endif
};

/* A write pin (PP_PIN_WRITE always added: it marks the entry dirty). */
template <class T>
class pinned_write : public detail::pin_guard<pinned_write<T>, T, PP_PIN_WRITE> {
    using base = detail::pin_guard<pinned_write<T>, T, PP_PIN_WRITE>;

 public:
    pinned_write() noexcept = default;
#if defined(__cpp_exceptions)
    pinned_write(pp_pool_t *pool, pp_ref_t ref, unsigned flags = 0,
                 const char *file = PP__CXX_FILE, int line = PP__CXX_LINE)
        : base(pool, ref, flags, file, line)
    {
    }
#endif
};

/* The pins of one pp_pin_many, all or none: data(i) is the data of refs[i]
 * as T *.  As for the single guards, the type says read or write:
 * pinned_many<const T> (and the default, const void) pins for reading;
 * pinned_many<T> with T not const gives writable pointers, so it always
 * adds PP_PIN_WRITE and every entry is marked dirty (a write under a read
 * pin would be lost by a clean eviction).  The guard keeps its own copy of
 * the refs: inline_refs of them (and their data pointers) inside the
 * object, more in one malloc. */
template <class T = const void>
class pinned_many {
 public:
    static constexpr size_t inline_refs = 8;
    /* PP_PIN_WRITE when the pointers are writable. */
    static constexpr unsigned forced_flags = std::is_const_v<T> ? 0u : PP_PIN_WRITE;

    pinned_many() noexcept = default;
#if defined(__cpp_exceptions)
    pinned_many(pp_pool_t *pool, const pp_ref_t *refs, size_t n, unsigned flags = 0,
                const char *file = PP__CXX_FILE, int line = PP__CXX_LINE)
    {
        detail::check(pin(pool, refs, n, flags, file, line), "pp_pin_many");
    }
#endif
    pinned_many(const pinned_many &) = delete;
    pinned_many &operator=(const pinned_many &) = delete;
    pinned_many(pinned_many &&o) noexcept { take(o); }
    pinned_many &operator=(pinned_many &&o) noexcept
    {
        if (this != &o) {
            drop("pinned_many::operator=");
            take(o);
        }
        return *this;
    }
    ~pinned_many() { drop("~pinned_many"); }

    /* Pins all n refs into out: 0, or the first error (no pin taken, out
     * unchanged); PP_ENOMEM if the refs do not fit inline and malloc fails. */
    [[nodiscard]] static int try_pin(pp_pool_t *pool, const pp_ref_t *refs, size_t n,
                                     unsigned flags, pinned_many &out,
                                     const char *file = PP__CXX_FILE,
                                     int line = PP__CXX_LINE) noexcept
    {
        pinned_many m;
        int rc = m.pin(pool, refs, n, flags, file, line);
        if (rc == 0)
            out = std::move(m);
        return rc;
    }

    /* The data of refs[i] (nullptr for i >= size()). */
    T *data(size_t i) const noexcept { return i < n_ ? static_cast<T *>(data_[i]) : nullptr; }
    pp_ref_t ref(size_t i) const noexcept { return i < n_ ? refs_[i] : PP_REF_NONE; }
    const pp_ref_t *refs() const noexcept { return refs_; }
    size_t size() const noexcept { return n_; }
    pp_pool_t *pool() const noexcept { return pool_; }
    explicit operator bool() const noexcept { return n_ != 0; }

    /* Drops every pin now (0 if empty): pp_unpin_many, then, if a pin was
     * dropped behind the guard's back, each pin it did not get to, once,
     * returning the first error.  Empty afterwards, except on PP_ENOMEM:
     * then it still holds every pin, for a retry. */
    int unpin() noexcept
    {
        if (n_ == 0)
            return 0;
        size_t done = 0;
        int rc = pp_unpin_many(pool_, refs_, n_, &done);
        if (rc == PP_ENOMEM)
            return rc;                   /* nothing dropped */
        for (size_t i = done; i < n_; i++) {
            int e = pp_unpin(pool_, refs_[i]);
            if (e != 0 && rc == 0)
                rc = e;
        }
        clear();
        return rc;
    }

 private:
    int pin(pp_pool_t *pool, const pp_ref_t *refs, size_t n, unsigned flags, const char *file,
            int line) noexcept
    {
        if (n != 0 && refs == nullptr)
            return PP_EINVAL;
        if (n > inline_refs) {
            if (n > SIZE_MAX / (sizeof(pp_ref_t) + sizeof(void *)))
                return PP_ENOMEM;
            /* One block: the refs, then the data pointers (whose alignment
             * is no stricter than a ref's, so they follow with no gap). */
            void *block = std::malloc(n * (sizeof(pp_ref_t) + sizeof(void *)));
            if (block == nullptr)
                return PP_ENOMEM;
            refs_ = static_cast<pp_ref_t *>(block);
            data_ = static_cast<void **>(static_cast<void *>(refs_ + n));
        }
        if (n != 0)
            std::memcpy(refs_, refs, n * sizeof *refs);
        int rc = pp_pin_many_loc(pool, refs_, n, flags | forced_flags, data_, file, line);
        if (rc != 0) {
            clear();
            return rc;
        }
        pool_ = pool;
        n_ = n;
        return 0;
    }
    void clear() noexcept
    {
        if (refs_ != inline_ref_)
            std::free(refs_);   /* the block, data pointers included */
        data_ = inline_data_;
        refs_ = inline_ref_;
        pool_ = nullptr;
        n_ = 0;
    }
    void take(pinned_many &o) noexcept
    {
        pool_ = o.pool_;
        n_ = o.n_;
        if (o.refs_ == o.inline_ref_) {
            std::memcpy(inline_data_, o.inline_data_, sizeof inline_data_);
            std::memcpy(inline_ref_, o.inline_ref_, sizeof inline_ref_);
        } else {
            data_ = o.data_;
            refs_ = o.refs_;
            o.refs_ = o.inline_ref_;   /* the block is ours now */
        }
        o.clear();
    }
    void drop(const char *who) noexcept
    {
        pp_ref_t first = n_ != 0 ? refs_[0] : PP_REF_NONE;
        int rc = unpin();
        if (rc != 0)
            detail::report(who, "pp_unpin_many", rc, first, nullptr);
    }

    pp_pool_t *pool_ = nullptr;
    size_t n_ = 0;
    void **data_ = inline_data_;
    pp_ref_t *refs_ = inline_ref_;
    void *inline_data_[inline_refs] = {};
    pp_ref_t inline_ref_[inline_refs] = {};
};

/* ------------------------------------------------------------------------ */
/* Pool                                                                      */
/* ------------------------------------------------------------------------ */

class pool {
 public:
#if defined(__cpp_exceptions)
    /* A pool with the default options: this machine, no memory limit. */
    pool() : pool(options()) {}
    explicit pool(const options &opt)
    {
        detail::check(pp_pool_create(&opt.c(), &p_), "pp_pool_create");
    }
#endif
    /* Adopts a pool made with pp_pool_create; pool(nullptr) is empty. */
    explicit pool(pp_pool_t *adopted) noexcept : p_(adopted) {}

    /* Makes a pool into out (whose own pool is destroyed first, as by
     * assignment): 0, or the error (out unchanged). */
    [[nodiscard]] static int create(const options &opt, pool &out) noexcept
    {
        pp_pool_t *p = nullptr;
        int rc = pp_pool_create(&opt.c(), &p);
        if (rc == 0)
            out = pool(p);
        return rc;
    }

    pool(const pool &) = delete;
    pool &operator=(const pool &) = delete;
    pool(pool &&o) noexcept : p_(o.detach()) {}
    pool &operator=(pool &&o) noexcept
    {
        if (this != &o) {
            finish("pool::operator=");
            p_ = o.detach();
        }
        return *this;
    }
    /* pp_pool_destroy; with pins still held it is left alive (see
     * "Lifetimes" above). */
    ~pool() { finish("~pool"); }

    /* pp_pool_destroy now: 0 (empty afterwards), or PP_EBUSY with pins
     * still held (the pool stays, intact and owned: drop them and retry).
     * 0 if empty. */
    int destroy() noexcept
    {
        if (p_ == nullptr)
            return 0;
        int rc = pp_pool_destroy(p_);
        if (rc == 0)
            p_ = nullptr;
        return rc;
    }
    /* Gives the C pool up without destroying it. */
    pp_pool_t *detach() noexcept
    {
        pp_pool_t *p = p_;
        p_ = nullptr;
        return p;
    }
    pp_pool_t *get() const noexcept { return p_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }

    /* pp_put: the pool owns data once this returns (on failure the caller
     * still does). */
#if defined(__cpp_exceptions)
    owner put(void *data, size_t size, const pp_type_t *type = nullptr, unsigned flags = 0)
    {
        pp_ref_t ref = PP_REF_NONE;
        detail::check(pp_put(p_, data, size, type, flags, &ref), "pp_put");
        return owner(p_, ref);
    }
#endif
    [[nodiscard]] int try_put(void *data, size_t size, const pp_type_t *type, unsigned flags,
                              owner &out) noexcept
    {
        pp_ref_t ref = PP_REF_NONE;
        int rc = pp_put(p_, data, size, type, flags, &ref);
        if (rc == 0)
            out = owner(p_, ref);
        return rc;
    }

#if defined(__cpp_exceptions)
    template <class T = void>
    pinned<T> pin(pp_ref_t ref, unsigned flags = 0, const char *file = PP__CXX_FILE,
                  int line = PP__CXX_LINE)
    {
        return pinned<T>(p_, ref, flags, file, line);
    }
    template <class T = void>
    pinned_write<T> pin_write(pp_ref_t ref, unsigned flags = 0, const char *file = PP__CXX_FILE,
                              int line = PP__CXX_LINE)
    {
        return pinned_write<T>(p_, ref, flags, file, line);
    }
    template <class T = const void>
    pinned_many<T> pin_many(const pp_ref_t *refs, size_t n, unsigned flags = 0,
                            const char *file = PP__CXX_FILE, int line = PP__CXX_LINE)
    {
        return pinned_many<T>(p_, refs, n, flags, file, line);
    }
#endif
    template <class T>
    [[nodiscard]] int try_pin(pp_ref_t ref, unsigned flags, pinned<T> &out,
                              const char *file = PP__CXX_FILE, int line = PP__CXX_LINE) noexcept
    {
        return pinned<T>::try_pin(p_, ref, flags, out, file, line);
    }
    template <class T>
    [[nodiscard]] int try_pin_write(pp_ref_t ref, unsigned flags, pinned_write<T> &out,
                                    const char *file = PP__CXX_FILE,
                                    int line = PP__CXX_LINE) noexcept
    {
        return pinned_write<T>::try_pin(p_, ref, flags, out, file, line);
    }
    template <class T>
    [[nodiscard]] int try_pin_many(const pp_ref_t *refs, size_t n, unsigned flags,
                                   pinned_many<T> &out, const char *file = PP__CXX_FILE,
                                   int line = PP__CXX_LINE) noexcept
    {
        return pinned_many<T>::try_pin(p_, refs, n, flags, out, file, line);
    }

    /* Thin forwards (pinpool.h says what each does).  stats and node_stats
     * (pinpool_stats.h) want out's size and version set: start from
     * PP_STATS_INIT or PP_NODE_STATS_INIT. */
    int drain(int timeout_ms) noexcept { return pp_pool_drain(p_, timeout_ms); }
    int stats(pp_stats_t &out) const noexcept { return pp_pool_stats(p_, &out); }
    int node_stats(unsigned node, pp_node_stats_t &out) const noexcept
    {
        return pp_node_stats(p_, node, &out);
    }
    int stat(pp_ref_t ref, pp_entry_info_t &out) const noexcept { return pp_stat(p_, ref, &out); }
    int prefetch(pp_ref_t ref) noexcept { return pp_prefetch(p_, ref); }
    int advise(pp_ref_t ref, unsigned advice) noexcept { return pp_advise(p_, ref, advice); }
    void quiescent() noexcept { pp_quiescent(p_); }
    int thread_exit() noexcept { return pp_thread_exit(p_); }

 private:
    void finish(const char *who) noexcept
    {
        if (p_ == nullptr)
            return;
        int rc = pp_pool_destroy(p_);
        if (rc != 0)
            detail::report(who, "pp_pool_destroy", rc, PP_REF_NONE,
                           "the pool is left alive (leaked) so that the pins still held "
                           "stay valid");
        p_ = nullptr;
    }

    pp_pool_t *p_ = nullptr;
};

/* ------------------------------------------------------------------------ */
/* Scopes                                                                    */
/* ------------------------------------------------------------------------ */

/* A pp_scope_t: every pin taken through it is dropped by end() or by the
 * destructor, whichever comes first (docs/api.md, "Scopes").  It lives where
 * it is made (the C scope must not be copied, and pins refer to it by
 * nothing else), so it is neither copied nor moved. */
class scope {
 public:
    explicit scope(pp_pool_t *pool, const char *file = PP__CXX_FILE,
                   int line = PP__CXX_LINE) noexcept
        : open_(pool != nullptr)
    {
        pp_scope_init_loc(&s_, pool, file, line);
    }
    explicit scope(pinpool::pool &p, const char *file = PP__CXX_FILE,
                   int line = PP__CXX_LINE) noexcept
        : scope(p.get(), file, line)
    {
    }
    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;
    ~scope()
    {
        if (open_.load(std::memory_order_relaxed)) {
            int rc = end();
            if (rc != 0)
                detail::report("~scope", "pp_scope_end", rc, PP_REF_NONE, nullptr);
        }
    }

#if defined(__cpp_exceptions)
    template <class T = void>
    const T *pin(pp_ref_t ref, unsigned flags = 0)
    {
        void *data = nullptr;
        detail::check(pp_scope_pin(&s_, ref, flags, &data), "pp_scope_pin");
        return static_cast<const T *>(data);
    }
    template <class T = void>
    T *pin_write(pp_ref_t ref, unsigned flags = 0)
    {
        void *data = nullptr;
        detail::check(pp_scope_pin(&s_, ref, flags | PP_PIN_WRITE, &data),
                      "pp_scope_pin(PP_PIN_WRITE)");
        return static_cast<T *>(data);
    }
    void pin_many(const pp_ref_t *refs, size_t n, unsigned flags = 0, void **data = nullptr)
    {
        detail::check(pp_scope_pin_many(&s_, refs, n, flags, data), "pp_scope_pin_many");
    }
    void unpin(pp_ref_t ref) { detail::check(pp_scope_unpin(&s_, ref), "pp_scope_unpin"); }
#endif
    [[nodiscard]] int try_pin(pp_ref_t ref, unsigned flags, void **data) noexcept
    {
        return pp_scope_pin(&s_, ref, flags, data);
    }
    [[nodiscard]] int try_pin_many(const pp_ref_t *refs, size_t n, unsigned flags,
                                   void **data) noexcept
    {
        return pp_scope_pin_many(&s_, refs, n, flags, data);
    }
    [[nodiscard]] int try_unpin(pp_ref_t ref) noexcept { return pp_scope_unpin(&s_, ref); }

    /* pp_scope_end now; the destructor then does nothing.  A second end()
     * returns PP_EINVAL, as in C.  PP_EINUSE (another call on the scope is
     * in progress) and PP_ENOMEM (this thread could not register) end
     * nothing: the scope keeps its pins, and the destructor tries again. */
    int end() noexcept
    {
        int rc = pp_scope_end(&s_);
        if (rc != PP_EINUSE && rc != PP_ENOMEM)
            open_.store(false, std::memory_order_relaxed);
        return rc;
    }
    size_t count() const noexcept { return pp_scope_count(&s_); }
    pp_scope_t *get() noexcept { return &s_; }

 private:
    /* Whether the destructor ends the scope: not after end() (a second
     * pp_scope_end would be PP_EINVAL), nor for a scope of no pool, which
     * can hold nothing.  Relaxed: the C scope's own claim orders its
     * calls; the atomic only keeps two misused end()s from racing here. */
    std::atomic<bool> open_;
    pp_scope_t s_;
};

}  // namespace pinpool

#undef PP__CXX_FILE
#undef PP__CXX_LINE
#undef PP__CXX_SPAN

#endif /* PINPOOL_HPP */
