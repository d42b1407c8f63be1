// Force-included first into every GCC C++ translation unit on x86-64 (see
// CMakeLists.txt). GCC 12 raises -Wmaybe-uninitialized and -Wuninitialized
// on '__Y' inside avx512fintrin.h and avxintrin.h (_mm512_undefined_ps,
// _mm512_undefined_epi32 and friends, which initialise a vector with itself
// on purpose) when Eigen's vectorised exp or bf16 conversions are inlined
// under -march=x86-64-v4, sapphirerapids or znver4 (GCC PR 105593, fixed in
// GCC 13). The warning is located in the system
// header, and a diagnostic pragma applies to a header only where that header
// is first read: reading <immintrin.h> here, under the pragma, silences the
// header's false positive and nothing in our own code.
#ifndef MESHTUNE_CMAKE_GCC_SYSTEM_HEADER_WARNINGS_H_
#define MESHTUNE_CMAKE_GCC_SYSTEM_HEADER_WARNINGS_H_
#if defined(__GNUC__) && !defined(__clang__) && \
    (defined(__x86_64__) || defined(__i386__))
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
#endif  // MESHTUNE_CMAKE_GCC_SYSTEM_HEADER_WARNINGS_H_
