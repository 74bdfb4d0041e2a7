#include <mpify/mpify.hpp>

int library_rank() { return mpify::local_rank(); }
MPIFY_REGISTER(library_rank);
