// TEMPORARY: found as <pinpool.hpp> only while include/pinpool.hpp does not
// exist (examples/tbb/CMakeLists.txt).  Delete this directory, and
// examples/tbb/pinpool_hpp_standin.hpp, when the real header is merged.
#include "../pinpool_hpp_standin.hpp"
