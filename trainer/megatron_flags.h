// Megatron-LM's flags that this trainer knows of but does not take: each is refused with why
// and what to use here, instead of "unknown flag" (a Megatron user's script then says what to
// change). The flags it does take under Megatron's names are registered in arguments.cc.
//
// Thread safety: pure functions over a constant table.
#ifndef VARUNA_TRAINER_MEGATRON_FLAGS_H_
#define VARUNA_TRAINER_MEGATRON_FLAGS_H_

#include <string>
#include <vector>

#include "varuna/flags/flag_parser.h"

namespace trainer {

struct UnsupportedMegatronFlag {
  const char* name;    // without dashes, Megatron's spelling
  const char* reason;  // why it is not taken here, and what to use instead
};

// The table: Megatron-LM's flags for features this project does not have (tensor, sequence,
// context and expert parallelism, other model families, other optimizers, other loggers, ...).
const std::vector<UnsupportedMegatronFlag>& UnsupportedMegatronFlags();

// "Megatron's --<name> is not supported here: <reason>".
std::string UnsupportedMegatronFlagMessage(const UnsupportedMegatronFlag& flag);

// Refuses every flag of the table on `parser` (FlagParser::Refuse).
void RefuseUnsupportedMegatronFlags(varuna::FlagParser& parser);

}  // namespace trainer

#endif  // VARUNA_TRAINER_MEGATRON_FLAGS_H_
