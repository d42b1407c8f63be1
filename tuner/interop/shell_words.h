// SplitShellWords: command-line text as pasted from a launch script, split
// into words the way a shell would for plain arguments (no variables, no
// globbing, no command substitution).
//
// Whitespace (spaces, tabs, newlines) separates words; a backslash before a
// newline, or before trailing spaces, tabs or a carriage return, continues the
// line (pasted "\   " continuations keep working); a backslash before any
// other character makes that character literal; single and double quotes
// group (no escapes inside); '#' at the start of a word comments out the rest
// of its line.
#ifndef MESHTUNE_TUNER_INTEROP_SHELL_WORDS_H_
#define MESHTUNE_TUNER_INTEROP_SHELL_WORDS_H_

#include <string>
#include <vector>

#include "search_spaces/status.h"

namespace meshtune::tuner {

// `what` names the text in the one error, an unterminated quote
// ("unterminated ' quote in <what>").
StatusOr<std::vector<std::string>> SplitShellWords(const std::string& text,
                                                   const std::string& what);

}  // namespace meshtune::tuner

#endif  // MESHTUNE_TUNER_INTEROP_SHELL_WORDS_H_
