#pragma once
// MPIFY_API marks what libmpify.so and libmpify_torch.so export. The library is built with hidden visibility,
// so only the declarations marked here are part of its ABI. Exception classes must be
// exported too: a catch in user code matches them by their type_info.
#if defined(MPIFY_BUILDING_LIBRARY)
/// In mpify's own build: exported from the library.
#define MPIFY_API __attribute__((visibility("default")))
#else
/// In a program or library that uses mpify: nothing.
#define MPIFY_API
#endif
