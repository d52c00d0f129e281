#include "tests/TestUtil.h"
TEST(Ops, Placeholder) {}
