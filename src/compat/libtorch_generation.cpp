// The symbol that names the LibTorch this libmpify_torch was built with
// (<mpify/detail/libtorch_generation.hpp> says why).
#include <mpify/detail/libtorch_generation.hpp>

extern "C" MPIFY_API const int MPIFY_LIBTORCH_GENERATION_SYMBOL = 1;
