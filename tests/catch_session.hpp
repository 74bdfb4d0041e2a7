#pragma once
// Runs Catch2's session over the command line: a test program's main() calls it (the
// implementation, catch_implementation.cpp, is compiled once for every program).

/// Catch::Session().run(argc, argv): the number of failed cases, capped as Catch caps it.
int run_catch_session(int argc, char** argv);
