/* Element types of the operator library's typed kernels (docs/operators.md).
 *
 * A unit compiled with `#define STOWAGE_T <code>` in front gets `stowage_t` as
 * that type; STOWAGE_U and STOWAGE_I give `stowage_u` and `stowage_i` the same
 * way (a second data type, e.g. a cast's destination, and an index type). Codes:
 *   0 float32 (float)   1 int32 (int)   2 int64 (long)   3 bool (uchar, 0 or 1)
 * Unset, each is float32. The Python layer (stowage.ops.core.DTYPE_CODES) uses the
 * same codes, so the name of a specialised kernel says its types.
 */
#ifndef STOWAGE_DTYPE_CL_H
#define STOWAGE_DTYPE_CL_H

#define STOWAGE_DT_FLOAT32 0
#define STOWAGE_DT_INT32 1
#define STOWAGE_DT_INT64 2
#define STOWAGE_DT_BOOL 3

#ifndef STOWAGE_T
#define STOWAGE_T 0
#endif
#ifndef STOWAGE_U
#define STOWAGE_U 0
#endif
#ifndef STOWAGE_I
#define STOWAGE_I 2
#endif

#if STOWAGE_T == 1
typedef int stowage_t;
#elif STOWAGE_T == 2
typedef long stowage_t;
#elif STOWAGE_T == 3
typedef uchar stowage_t;
#else
typedef float stowage_t;
#endif

#if STOWAGE_U == 1
typedef int stowage_u;
#elif STOWAGE_U == 2
typedef long stowage_u;
#elif STOWAGE_U == 3
typedef uchar stowage_u;
#else
typedef float stowage_u;
#endif

#if STOWAGE_I == 1
typedef int stowage_i;
#else
typedef long stowage_i;
#endif

#define STOWAGE_T_IS_FLOAT (STOWAGE_T == 0)

#endif
