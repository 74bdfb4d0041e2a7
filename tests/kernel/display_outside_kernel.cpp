// xcpp/xdisplay.hpp in a compiled program (no kernel in the process): display prints the
// bundle's text/plain and drops what has none.
#include <xcpp/xdisplay.hpp>

namespace shapes {
struct Square {
    int side;
};
nl::json mime_bundle_repr(const Square& s) {
    return nl::json{{"text/plain", "a square of side " + std::to_string(s.side)},
                    {"image/svg+xml", "<svg xmlns='http://www.w3.org/2000/svg'/>"}};
}
struct Picture {};
nl::json mime_bundle_repr(const Picture&) { return nl::json{{"image/png", "iVBORw0KGgo="}}; }
}  // namespace shapes

int main() {
    xcpp::display(shapes::Square{3});
    xcpp::display(shapes::Picture{}, "id", true);  // nothing to print
    xcpp::display(42);                            // streamable: text/plain
}
