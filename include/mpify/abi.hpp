#pragma once
// The versioned namespace every mpify declaration lives in.
//
// mpify's public names are written mpify::ranch, mpify::Options, ...; the compiler and the
// linker see them as mpify::v0_1::ranch, mpify::v0_1::Options: an inline namespace named
// after the major and minor version (while the major version is 0, a minor release may
// change the ABI). A program compiled with the headers of one version and linked against
// a library of another fails to link, naming the symbol it misses, instead of running
// with mismatched class layouts. The library's ELF symbol versions (cmake/mpify.map.in)
// make the dynamic loader refuse the same mix at load time.
//
// Code outside mpify refers to mpify::X as always. Forward declarations of mpify's types
// in user code must open the namespace with these macros too, or include the header.
// The version's major and minor numbers, as in CMakeLists.txt's project(VERSION): this
// header names them itself (not mpify/version.hpp, which only a build generates) so that
// the headers of a source tree work on their own, as a notebook includes them. CMake
// refuses to configure when the two disagree.
/// mpify's major version, as the versioned namespace and the symbol versions carry it.
#define MPIFY_ABI_VERSION_MAJOR 0
/// mpify's minor version, as the versioned namespace and the symbol versions carry it.
#define MPIFY_ABI_VERSION_MINOR 1

#define MPIFY_ABI_CONCAT_(major, minor) v##major##_##minor
#define MPIFY_ABI_CONCAT(major, minor) MPIFY_ABI_CONCAT_(major, minor)

/// The inline namespace of this version: v<major>_<minor>, e.g. v0_1.
#define MPIFY_ABI_NAMESPACE MPIFY_ABI_CONCAT(MPIFY_ABI_VERSION_MAJOR, MPIFY_ABI_VERSION_MINOR)

#define MPIFY_ABI_STRINGIFY_(name) #name
#define MPIFY_ABI_STRINGIFY(name) MPIFY_ABI_STRINGIFY_(name)
/// The inline namespace's name as a string literal, "v0_1" (for messages and checks).
#define MPIFY_ABI_NAMESPACE_STRING MPIFY_ABI_STRINGIFY(MPIFY_ABI_NAMESPACE)

/// Opens namespace mpify (and its versioned inline namespace).
#define MPIFY_BEGIN_NAMESPACE \
    namespace mpify {         \
    inline namespace MPIFY_ABI_NAMESPACE {
/// Closes what MPIFY_BEGIN_NAMESPACE opened.
#define MPIFY_END_NAMESPACE \
    }                       \
    }

/// Opens namespace mpify::detail (in the versioned inline namespace).
#define MPIFY_BEGIN_DETAIL_NAMESPACE MPIFY_BEGIN_NAMESPACE namespace detail {
/// Closes what MPIFY_BEGIN_DETAIL_NAMESPACE opened.
#define MPIFY_END_DETAIL_NAMESPACE \
    }                              \
    MPIFY_END_NAMESPACE
