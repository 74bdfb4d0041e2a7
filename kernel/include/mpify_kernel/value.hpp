#pragma once
// The value of a cell's last expression, shown as the cell's result (Out[n]) the way
// xeus-cling shows it. The kernel rewrites a cell that ends in `expr` (no ';') as
//
//   ::mpify_kernel_value::finish(((expr), ::mpify_kernel_value::tag{}));
//
// An expression of type T meets the operator, below, which publishes it; a void one
// takes the built-in comma, and nothing is shown. Rich when the type has a
// mime_bundle_repr (found by ADL, as xcpp::display finds it), else text/plain: numbers,
// bool, characters, strings quoted, standard containers, pairs and tuples element by
// element, other types by their operator<< when they have one, else their type name and
// address.
//
// Compiled by the kernel's interpreter, into the session: header-only, no statics, no
// threads, no once-flags.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cxxabi.h>
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

extern "C" void mpify_kernel_publish_result(const char* mime_bundle_json);

namespace mpify_kernel_value {

struct tag {};
struct shown {};

inline void finish(tag) {}    // a void expression: nothing to show
inline void finish(shown) {}

inline std::string json_string(std::string_view text) {
    std::string out = "\"";
    for (const char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char escaped[8];
                    std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
                    out += escaped;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

inline std::string quoted(std::string_view text, char quote) {
    std::string out(1, quote);
    for (const char c : text) {
        switch (c) {
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\r': out += "\\r"; break;
            case '\0': out += "\\0"; break;
            case '\\': out += "\\\\"; break;
            default:
                if (c == quote) out += '\\';
                out += c;
        }
    }
    return out + quote;
}

template <class T>
std::string type_name() {
    int status = 0;
    char* readable = abi::__cxa_demangle(typeid(T).name(), nullptr, nullptr, &status);
    std::string name = status == 0 && readable ? readable : typeid(T).name();
    std::free(readable);
    // The kernel puts a cell's definitions in an inline namespace (`__mpify_cell_7::A`):
    // the user wrote `A`.
    const std::string cell = "__mpify_cell_";
    for (std::size_t at = name.find(cell); at != std::string::npos; at = name.find(cell, at)) {
        std::size_t end = at + cell.size();
        while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
        if (name.compare(end, 2, "::") == 0) name.erase(at, end + 2 - at);
        else at = end;
    }
    return name;
}

template <class T, class = void>
struct is_range : std::false_type {};
template <class T>
struct is_range<
    T, std::void_t<decltype(std::begin(std::declval<const T&>())), decltype(std::end(std::declval<const T&>()))>>
    : std::true_type {};

template <class T, class = void>
struct is_streamable : std::false_type {};
template <class T>
struct is_streamable<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>>
    : std::true_type {};

template <class T, class = void>
struct is_pair_like : std::false_type {};
template <class T>
struct is_pair_like<T,
                    std::void_t<decltype(std::tuple_size<T>::value), decltype(std::get<0>(std::declval<const T&>()))>>
    : std::true_type {};

template <class T, class = void>
struct is_map_entry : std::false_type {};
template <class T>
struct is_map_entry<T, std::void_t<typename T::first_type, typename T::second_type>> : std::true_type {};

template <class T, class = void>
struct is_map : std::false_type {};
template <class T>
struct is_map<T, std::void_t<typename T::key_type, typename T::mapped_type>> : std::true_type {};

template <class T>
std::string text(const T& value);

template <class Floating>
std::string floating_text(Floating value, const char* format) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, format, static_cast<double>(value));
    return buffer;
}

template <class Tuple, std::size_t... I>
std::string tuple_text(const Tuple& value, std::index_sequence<I...>) {
    std::string out = "{ ";
    ((out += (I == 0 ? "" : ", ") + text(std::get<I>(value))), ...);
    return out + " }";
}

template <class T>
std::string text(const T& value) {
    using U = std::decay_t<T>;
    if constexpr (std::is_same_v<U, bool>) {
        return value ? "true" : "false";
    } else if constexpr (std::is_same_v<U, char> || std::is_same_v<U, signed char> ||
                         std::is_same_v<U, unsigned char>) {
        return quoted(std::string_view(reinterpret_cast<const char*>(&value), 1), '\'');
    } else if constexpr (std::is_integral_v<U>) {
        return std::to_string(value);
    } else if constexpr (std::is_same_v<U, float>) {  // as cling prints them: 1.50000f, 3.1400000
        return floating_text(value, "%#.6g") + "f";
    } else if constexpr (std::is_same_v<U, double>) {
        return floating_text(value, "%#.8g");
    } else if constexpr (std::is_floating_point_v<U>) {
        return floating_text(value, "%#.8g") + "L";
    } else if constexpr (std::is_same_v<U, std::nullptr_t>) {
        return "nullptr";
    } else if constexpr (std::is_same_v<U, const char*> || std::is_same_v<U, char*>) {
        return value ? quoted(value, '"') : std::string("nullptr");
    } else if constexpr (std::is_convertible_v<const U&, std::string_view> && !std::is_array_v<U>) {
        return quoted(std::string_view(value), '"');
    } else if constexpr (std::is_array_v<U> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<U>>, char>) {
        return quoted(value, '"');
    } else if constexpr (std::is_pointer_v<U>) {
        if (value == nullptr) return "nullptr";
        char buffer[32];
        std::snprintf(buffer, sizeof buffer, "%p", reinterpret_cast<const void*>(value));
        return buffer;
    } else if constexpr (std::is_enum_v<U>) {
        return text(static_cast<std::underlying_type_t<U>>(value));
    } else if constexpr (is_map_entry<U>::value && is_map<U>::value == false && !is_range<U>::value) {
        return "{ " + text(value.first) + ", " + text(value.second) + " }";
    } else if constexpr (is_map<U>::value) {
        std::string out;
        for (const auto& [key, mapped] : value) out += (out.empty() ? "{ " : ", ") + text(key) + " => " + text(mapped);
        return out.empty() ? "{}" : out + " }";
    } else if constexpr (is_range<U>::value) {
        std::string out;
        for (const auto& element : value) out += (out.empty() ? "{ " : ", ") + text(element);
        return out.empty() ? "{}" : out + " }";
    } else if constexpr (is_pair_like<U>::value) {
        return tuple_text(value, std::make_index_sequence<std::tuple_size<U>::value>{});
    } else if constexpr (is_streamable<U>::value) {
        std::ostringstream out;
        out << value;
        return out.str();
    } else {
        char address[32];
        std::snprintf(address, sizeof address, "%p", static_cast<const void*>(&value));
        return type_name<U>() + " @" + address;
    }
}

// A type's own bundle (mime_bundle_repr, as for xcpp::display), else text/plain.
template <class T>
auto bundle(const T& value, int) -> decltype(mime_bundle_repr(value).dump()) {
    return mime_bundle_repr(value).dump();
}
template <class T>
std::string bundle(const T& value, long) {
    return "{\"text/plain\": " + json_string(text(value)) + "}";
}

template <class T>
shown operator,(T&& value, tag) {
    mpify_kernel_publish_result(bundle(value, 0).c_str());
    return {};
}

}  // namespace mpify_kernel_value
