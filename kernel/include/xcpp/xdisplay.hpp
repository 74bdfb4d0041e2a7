#pragma once
// Rich output from notebook cells, with xeus-cling's API so that a cell that displays
// something runs unchanged in xeus-cling and in mpify's kernel:
//
//   nl::json mime_bundle_repr(const MyType& x);   // found by ADL: {"image/png": base64, ...}
//   xcpp::display(x);                             // a new output
//   xcpp::display(x, "id");                       // a new output that can be replaced:
//   xcpp::display(x, "id", true);                 //   replaces output "id" in place
//
// This file is mpify's kernel's own version (xeus-cling ships the original): it hands
// the bundle to the kernel through the C function `mpify_kernel_publish_display`, found
// with dlsym. Outside a kernel (a compiled program) the bundle's text/plain, if any, is
// printed to stdout, and anything else is dropped.
//
// Header-only and free of statics, threads and once-flags: clang's interpreter compiles it.
#include <nlohmann/json.hpp>

#include <dlfcn.h>

#include <iostream>
#include <sstream>
#include <string>
#include <utility>

namespace nl = nlohmann;

namespace xcpp {
namespace detail {

using publish_function = void (*)(const char* data, const char* metadata, const char* display_id, int update);

inline publish_function kernel_publisher() {
    return reinterpret_cast<publish_function>(::dlsym(RTLD_DEFAULT, "mpify_kernel_publish_display"));
}

// A type without mime_bundle_repr shows as text/plain when it can be streamed.
template <class T>
auto plain_text_bundle(const T& value, int) -> decltype(std::declval<std::ostream&>() << value, nl::json()) {
    std::ostringstream text;
    text << value;
    return nl::json{{"text/plain", text.str()}};
}
template <class T>
nl::json plain_text_bundle(const T&, long) {
    return nl::json{{"text/plain", "<object without mime_bundle_repr or operator<<>"}};
}

template <class T>
auto bundle_of(const T& value, int) -> decltype(nl::json(mime_bundle_repr(value))) {
    return mime_bundle_repr(value);
}
template <class T>
nl::json bundle_of(const T& value, long) {
    return plain_text_bundle(value, 0);
}

inline void publish(const nl::json& bundle, const std::string& display_id, bool update) {
    if (publish_function publish = kernel_publisher()) {
        publish(bundle.dump().c_str(), "{}", display_id.c_str(), update ? 1 : 0);
    } else if (bundle.contains("text/plain")) {
        std::cout << bundle["text/plain"].get<std::string>() << std::endl;
    }
}

}  // namespace detail

/// Shows `value` as a new output of the running cell.
template <class T>
void display(const T& value) {
    detail::publish(detail::bundle_of(value, 0), std::string(), false);
}

/// Shows `value` as output `display_id`; with `update`, replaces that output in place.
template <class T>
void display(const T& value, const std::string& display_id, bool update = false) {
    detail::publish(detail::bundle_of(value, 0), display_id, update);
}

/// Clears the running cell's output; with `wait`, only when the next output arrives (no
/// flicker in a loop that redraws). Outside a kernel it does nothing.
inline void clear_output(bool wait = false) {
    using clear_function = void (*)(int wait);
    if (auto clear = reinterpret_cast<clear_function>(::dlsym(RTLD_DEFAULT, "mpify_kernel_clear_output")))
        clear(wait ? 1 : 0);
}

}  // namespace xcpp
