/* Indexing of discontiguous tensors in OpenCL C kernels (docs/discontiguous.md).
 *
 * A kernel receives a discontiguous tensor as three parameters, declared with
 * STOWAGE_DISCONTIGUOUS(T, name) or STOWAGE_DISCONTIGUOUS_CONST(T, name):
 *   __global const stowage_entry_t* name_tables   the table storage
 *   stowage_entry_t name_root                      byte offset of the root table in it
 *   __global T* name_data                          the data storage
 * Every table entry is a byte offset: into the table storage for the levels above
 * the last, into the data storage for the last level (the blocks). A tensor of
 * shape [d0, ..., dn] has n levels; element [i0, ..., in] is at byte
 *   table(n-1)[i(n-1)] + in * sizeof(T)   of the data storage, where
 *   table(0) = the root and table(k+1) = the table at byte table(k)[ik].
 *
 * The compiler reads this header in place of `#include <stowage/discontiguous.cl.h>`
 * and defines STOWAGE_TABLE_ENTRY_BYTES from the target (4 or 8). */
#ifndef STOWAGE_DISCONTIGUOUS_CL_H
#define STOWAGE_DISCONTIGUOUS_CL_H

#ifndef STOWAGE_TABLE_ENTRY_BYTES
#define STOWAGE_TABLE_ENTRY_BYTES 4
#endif

#if STOWAGE_TABLE_ENTRY_BYTES == 8
typedef ulong stowage_entry_t;
#else
typedef uint stowage_entry_t;
#endif

#define STOWAGE_DISCONTIGUOUS(T, name) \
  __global const stowage_entry_t *name##_tables, stowage_entry_t name##_root, __global T *name##_data
#define STOWAGE_DISCONTIGUOUS_CONST(T, name) \
  __global const stowage_entry_t *name##_tables, stowage_entry_t name##_root, __global const T *name##_data

/* Entry `i` of the table at byte `table` of the table storage. */
inline stowage_entry_t stowage_table_entry(__global const stowage_entry_t *tables, stowage_entry_t table, size_t i) {
  return tables[table / sizeof(stowage_entry_t) + i];
}

/* Byte offset in the data storage of the block at indices [i0] (rank 2),
 * [i0, i1] (rank 3) or [i0, i1, i2] (rank 4). */
inline stowage_entry_t stowage_block2(__global const stowage_entry_t *tables, stowage_entry_t root, size_t i0) {
  return stowage_table_entry(tables, root, i0);
}
inline stowage_entry_t stowage_block3(__global const stowage_entry_t *tables, stowage_entry_t root, size_t i0,
                                      size_t i1) {
  return stowage_table_entry(tables, stowage_table_entry(tables, root, i0), i1);
}
inline stowage_entry_t stowage_block4(__global const stowage_entry_t *tables, stowage_entry_t root, size_t i0,
                                      size_t i1, size_t i2) {
  return stowage_table_entry(tables, stowage_block3(tables, root, i0, i1), i2);
}

/* The element address from its indices: a __global T* to element [i0, ..., in]. */
#define STOWAGE_AT2(T, name, i0, i1) \
  ((__global T *)((__global const char *)(name##_data) + stowage_block2(name##_tables, name##_root, (i0))) + (i1))
#define STOWAGE_AT3(T, name, i0, i1, i2)                                                                  \
  ((__global T *)((__global const char *)(name##_data) + stowage_block3(name##_tables, name##_root, (i0), (i1))) + \
   (i2))
#define STOWAGE_AT4(T, name, i0, i1, i2, i3)                                                                  \
  ((__global T *)((__global const char *)(name##_data) +                                                            \
                  stowage_block4(name##_tables, name##_root, (i0), (i1), (i2))) +                             \
   (i3))

#endif /* STOWAGE_DISCONTIGUOUS_CL_H */
