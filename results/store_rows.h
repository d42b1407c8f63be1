// Internal to results/: binding and reading the columns every store file
// shares (the provenance triple, nullable REALs), so the Store's files
// (store.cc, store_searches.cc, store_regress.cc, store_validate.cc) agree
// on one column order.
#ifndef MESHTUNE_RESULTS_STORE_ROWS_H_
#define MESHTUNE_RESULTS_STORE_ROWS_H_

#include <optional>

#include "results/sqlite_statement.h"
#include "results/store.h"

namespace meshtune::results::internal {

// tool_version, git_revision, created_unix_s at first .. first + 2.
inline void BindProvenance(Statement& st, int first, const Provenance& p) {
  st.Bind(first, p.tool_version);
  st.Bind(first + 1, p.git_revision);
  st.Bind(first + 2, p.created_unix_s);
}

inline Provenance ReadProvenance(const Statement& st, int first) {
  return {st.Text(first), st.Text(first + 1), st.Int(first + 2)};
}

// A nullable REAL: NULL when absent.
inline void BindOptional(Statement& st, int index,
                         const std::optional<double>& v) {
  if (v.has_value()) {
    st.Bind(index, *v);
  } else {
    st.BindNull(index);
  }
}

inline std::optional<double> ReadOptional(const Statement& st, int column) {
  if (st.IsNull(column)) return std::nullopt;
  return st.Double(column);
}

}  // namespace meshtune::results::internal

#endif  // MESHTUNE_RESULTS_STORE_ROWS_H_
