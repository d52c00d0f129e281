// A debugging aid: new tensor memory filled with one byte value, so that a
// kernel or generated code that leaves part of its output unwritten gives
// results that change with the byte (tests run each op twice with two
// bytes). Off by default; $KILN_POISON_MEMORY=0xNN turns it on at start.
// Thread-safe (a relaxed atomic); costs one memset per allocation when on.
#pragma once

namespace kiln {

/// `byte` in [0, 255] fills every new tensor buffer and execution arena
/// with it; -1 turns it off.
void setTensorMemoryPoison(int byte);

}  // namespace kiln
