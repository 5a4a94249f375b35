// examples/tbb/pinpool_hpp_standin.hpp -- TEMPORARY STAND-IN for
// include/pinpool.hpp, the C++ header that is being written on another
// branch.  DELETE THIS FILE (and examples/tbb/standin/) WHEN THE REAL
// HEADER IS MERGED.
//
// It implements only what examples/tbb/matmul.cpp uses, with the
// signatures agreed for the real header (namespace pinpool), so that the
// example builds and runs now and needs no change at the merge:
//
//   error       error(int, const char *), code(), name(), what()
//   options     options(), mem_limit(size_t), swap_dir(const char *), c()
//   pool        pool(const options &), ~pool(), get(),
//               put(void *, size_t, const pp_type_t *, unsigned),
//               pin<T>(pp_ref_t, unsigned), pin_write<T>(pp_ref_t, unsigned)
//   owner       owner(), move construction and assignment, ~owner(), ref(),
//               explicit operator bool
//   pinned<T>   pinned(pp_pool_t *, pp_ref_t, unsigned), data(), count(),
//               unpin(), move construction, ~pinned()
//   pinned_write<T>  the same, data() non-const, pins with PP_PIN_WRITE
//   scope       scope(pool &), pin<T>, end(), count(), ~scope()
//
// The include path finds it as <pinpool.hpp> only while include/pinpool.hpp
// does not exist (examples/tbb/CMakeLists.txt); nothing here is installed.
#ifndef PINPOOL_HPP_STANDIN
#define PINPOOL_HPP_STANDIN

#include <pinpool.h>

#include <cstddef>
#include <cstdio>
#include <exception>
#include <utility>

namespace pinpool {

// A failed call: its PP_E* code and the name of the C call.
class error : public std::exception {
public:
    error(int code, const char *call) : code_(code)
    {
        std::snprintf(what_, sizeof what_, "%s: %s (%s)", call != nullptr ? call : "pinpool",
                      pp_strerror(code), pp_err_name(code));
    }
    int code() const noexcept { return code_; }
    const char *name() const noexcept { return pp_err_name(code_); }
    const char *what() const noexcept override { return what_; }

private:
    int code_;
    char what_[128];
};

namespace detail {
inline void check(int rc, const char *call)
{
    if (rc != 0)
        throw error(rc, call);
}
} // namespace detail

class options {
public:
    options() : o_(PP_OPTIONS_INIT) {}
    options &mem_limit(size_t bytes) { o_.mem_limit = bytes; return *this; }
    options &swap_dir(const char *dir) { o_.swap_dir = dir; return *this; }
    const pp_options_t &c() const noexcept { return o_; }

private:
    pp_options_t o_;
};

// One owner of an entry: moving transfers it, the destructor releases it.
class owner {
public:
    owner() noexcept : pool_(nullptr), ref_(PP_REF_NONE) {}
    owner(pp_pool_t *pool, pp_ref_t adopted) noexcept : pool_(pool), ref_(adopted) {}
    owner(owner &&o) noexcept : pool_(o.pool_), ref_(o.ref_) { o.ref_ = PP_REF_NONE; }
    owner &operator=(owner &&o) noexcept
    {
        if (this != &o) {
            drop();
            pool_ = o.pool_;
            ref_ = o.ref_;
            o.ref_ = PP_REF_NONE;
        }
        return *this;
    }
    owner(const owner &) = delete;             // the real header retains; unused here
    owner &operator=(const owner &) = delete;
    ~owner() { drop(); }
    pp_ref_t ref() const noexcept { return ref_; }
    explicit operator bool() const noexcept { return ref_ != PP_REF_NONE; }

private:
    void drop() noexcept
    {
        if (ref_ != PP_REF_NONE)
            (void)pp_release(pool_, ref_);
        ref_ = PP_REF_NONE;
    }
    pp_pool_t *pool_;
    pp_ref_t ref_;
};

namespace detail {
// A pin held until unpin() or destruction; move-only.
template <class T, unsigned Extra> class pin_guard {
public:
    pin_guard(pp_pool_t *pool, pp_ref_t ref, unsigned flags) : pool_(pool), ref_(ref)
    {
        void *p = nullptr;
        check(pp_pin(pool, ref, flags | Extra, &p), "pp_pin");
        data_ = static_cast<T *>(p);
    }
    pin_guard(pin_guard &&o) noexcept : pool_(o.pool_), ref_(o.ref_), data_(o.data_)
    {
        o.pool_ = nullptr;
    }
    pin_guard(const pin_guard &) = delete;
    pin_guard &operator=(const pin_guard &) = delete;
    pin_guard &operator=(pin_guard &&) = delete;   // unused here
    ~pin_guard() { (void)unpin(); }
    size_t size() const
    {
        pp_entry_info_t info;
        check(pp_stat(pool_, ref_, &info), "pp_stat");
        return info.size;
    }
    size_t count() const { return size() / sizeof(T); }
    pp_ref_t ref() const noexcept { return ref_; }
    int unpin() noexcept
    {
        if (pool_ == nullptr)
            return 0;
        int rc = pp_unpin(pool_, ref_);
        pool_ = nullptr;
        return rc;
    }

protected:
    pp_pool_t *pool_;
    pp_ref_t ref_;
    T *data_;
};
} // namespace detail

template <class T> class pinned : public detail::pin_guard<T, 0u> {
public:
    pinned(pp_pool_t *pool, pp_ref_t ref, unsigned flags = 0)
        : detail::pin_guard<T, 0u>(pool, ref, flags) {}
    const T *data() const noexcept { return this->data_; }
};

template <class T> class pinned_write : public detail::pin_guard<T, PP_PIN_WRITE> {
public:
    pinned_write(pp_pool_t *pool, pp_ref_t ref, unsigned flags = 0)
        : detail::pin_guard<T, PP_PIN_WRITE>(pool, ref, flags) {}
    T *data() const noexcept { return this->data_; }
};

class pool {
public:
    explicit pool(const options &opt) : p_(nullptr)
    {
        detail::check(pp_pool_create(&opt.c(), &p_), "pp_pool_create");
    }
    pool(const pool &) = delete;
    pool &operator=(const pool &) = delete;
    ~pool() { (void)pp_pool_destroy(p_); }
    pp_pool_t *get() const noexcept { return p_; }
    // On failure the caller still owns data (as with pp_put).
    owner put(void *data, size_t size, const pp_type_t *type = nullptr, unsigned flags = 0)
    {
        pp_ref_t ref = PP_REF_NONE;
        detail::check(pp_put(p_, data, size, type, flags, &ref), "pp_put");
        return owner(p_, ref);
    }
    template <class T> pinned<T> pin(pp_ref_t ref, unsigned flags = 0)
    {
        return pinned<T>(p_, ref, flags);
    }
    template <class T> pinned_write<T> pin_write(pp_ref_t ref, unsigned flags = 0)
    {
        return pinned_write<T>(p_, ref, flags);
    }

private:
    pp_pool_t *p_;
};

// A ledger of pins (pp_scope_t): end() or the destructor drops them all.
class scope {
public:
    explicit scope(pool &p) : open_(true) { pp_scope_init(&s_, p.get()); }
    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;
    ~scope() { (void)end(); }
    template <class T> const T *pin(pp_ref_t ref, unsigned flags = 0)
    {
        void *p = nullptr;
        detail::check(pp_scope_pin(&s_, ref, flags, &p), "pp_scope_pin");
        return static_cast<const T *>(p);
    }
    int end() noexcept
    {
        if (!open_)
            return 0;
        open_ = false;
        return pp_scope_end(&s_);
    }
    size_t count() const noexcept { return pp_scope_count(&s_); }

private:
    pp_scope_t s_;
    bool open_;
};

} // namespace pinpool

#endif // PINPOOL_HPP_STANDIN
