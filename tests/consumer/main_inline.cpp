// pinpool_inline.h from C++: the C consumer, compiled as C++ (its code is
// the common subset of both).
#include "main_inline.c"
