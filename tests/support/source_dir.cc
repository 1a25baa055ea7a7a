// See source_dir.h.
#include "tests/support/source_dir.h"

namespace ringmaster::testing {

std::string SourceDir() { return RINGMASTER_SOURCE_DIR; }

}  // namespace ringmaster::testing
