#pragma once
// `!command` lines: the kernel turns `!ls -l` into `::mpify_kernel_system(R"(ls -l)");`,
// which runs the command with /bin/sh in the notebook's folder; its output goes to the
// cell, as the cell's own does. A command that fails prints its exit status.
extern "C" int mpify_kernel_system(const char* command);
