// The main() of a test program that needs nothing before Catch2 sees the command line.
#include "catch_session.hpp"

int main(int argc, char** argv) { return run_catch_session(argc, argv); }
