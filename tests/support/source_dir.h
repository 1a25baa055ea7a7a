// The source tree's path, for tests that read bundled data (data/,
// examples/). Compiled into one small object (source_dir.cc) instead of a
// macro in every test file: the test objects then do not depend on where
// the tree is checked out, and ccache reuses them across clones.
#ifndef RINGMASTER_TESTS_SUPPORT_SOURCE_DIR_H_
#define RINGMASTER_TESTS_SUPPORT_SOURCE_DIR_H_

#include <string>

namespace ringmaster::testing {

// The source tree's root, without a trailing slash.
std::string SourceDir();

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTS_SUPPORT_SOURCE_DIR_H_
