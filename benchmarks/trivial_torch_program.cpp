// The floor of the spawn benchmark: a program that does nothing but is linked with
// LibTorch, so starting it pays the same dynamic loading as a worker does.
int main() { return 0; }
