#pragma once
// Jupyter interrupts a kernel with SIGINT. This kernel survives it and passes it on to
// mpify, if a cell loaded it: a running ranch / in_ddp then stops its workers and throws
// mpify::Interrupted. The kernel does not link mpify: it finds the C entry point
// `mpify_request_interrupt` among the libraries the cells loaded.
namespace mpify_kernel {

/// Installs the SIGINT handler and blocks SIGINT on the calling thread, so that the
/// threads started next (ZeroMQ's, the output reader) never take it. Call first in main.
void install_interrupt_handler();

/// Unblocks SIGINT on the calling thread (the one that runs cells: a blocking call in a
/// cell returns EINTR there), and looks up mpify's entry point again (a cell may have
/// loaded libmpify). Call before each cell.
void prepare_cell_for_interrupts();

}  // namespace mpify_kernel
