// The test context type; compiled into the test-functions library only, which the
// test program links, so it is registered once in every process.
#include "functions.hpp"

#include <iostream>

namespace mpify_test {

bool TestContext::active = false;

TestContext::TestContext() {
    active = true;
    std::cout << "context opened" << std::endl;
}

TestContext::~TestContext() {
    active = false;
    std::cerr << "context closed" << std::endl;
}

}  // namespace mpify_test

MPIFY_REGISTER_CONTEXT(mpify_test::TestContext);
