__kernel void compute_add_in_vtcm(__global const int* a, __global const int* b, __global int* c) {
  size_t i = get_global_id(0);
  c[i] = a[i] + b[i];
}

__kernel void compute_mul_in_vtcm(__global const int* a, __global const int* b, __global int* c) {
  size_t i = get_global_id(0);
  c[i] = a[i] * b[i];
}
