// A stand-in for libmpify.so of the next minor version: the function the consumer calls,
// in that version's inline namespace (MPIFY_OTHER_ABI_NAMESPACE) and version node (its
// own version script). Nothing runs it: the linker and the dynamic loader must refuse it
// to a program built against this version.
namespace mpify {
inline namespace MPIFY_OTHER_ABI_NAMESPACE {

__attribute__((visibility("default"))) int restart_count() { return 0; }

}  // namespace MPIFY_OTHER_ABI_NAMESPACE
}  // namespace mpify
