// Which output an epilogue hook (tile/hooks.cuh) is given.
#pragma once

namespace blockattn::tile {

enum class Output { kOut, kDq, kDk, kDv };

}  // namespace blockattn::tile
