#pragma once
// How mpify's users are compiled, recorded by CMake when mpify was built (the
// definition is generated: build_flags.cpp.in), for load_source to compile alike.
#include <string>
#include <vector>

#include <mpify/abi.hpp>

MPIFY_BEGIN_DETAIL_NAMESPACE

struct BuildFlags {
    std::string compiler;
    std::string standard;                   ///< -std=c++17, or what LibTorch demands
    std::vector<std::string> include_dirs;  ///< mpify's (source tree) and its dependencies'
    std::vector<std::string> definitions;   ///< without -D
    std::vector<std::string> options;       ///< e.g. -D_GLIBCXX_USE_CXX11_ABI=1 from LibTorch
    std::vector<std::string> link_files;    ///< the libraries mpify's users link: LibTorch's, Boost.Serialization
    std::string source_dir;                 ///< mpify's source tree: an installed mpify does not look in it
    std::string binary_dir;                 ///< mpify's build tree (its generated headers): nor in this
    std::string libdir_to_includedir;       ///< installed: relative path from libmpify's folder to the headers
};

/// The flags of this build of mpify.
const BuildFlags& build_flags();

MPIFY_END_DETAIL_NAMESPACE
