#pragma once
// See ../../README.md: ProcessGroupGloo.hpp includes this header and uses nothing of it.
