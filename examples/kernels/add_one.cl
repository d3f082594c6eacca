// add_one: the texture-memory RFC's first example, y = x + 1 on RGBA float
// textures. One work-item per pixel, grid = [width, height] (larger grids are
// clipped to y's extent). The sampler uses unnormalised integer coordinates and
// no filtering, so read_imagef returns the stored pixel exactly.
__constant sampler_t kAddOneSampler = CLK_NORMALIZED_COORDS_FALSE | CLK_ADDRESS_NONE | CLK_FILTER_NEAREST;

__kernel void add_one(read_only image2d_t x, write_only image2d_t y) {
  const int2 p = (int2)(get_global_id(0), get_global_id(1));
  if (p.x >= get_image_width(y) || p.y >= get_image_height(y)) return;
  write_imagef(y, p, read_imagef(x, kAddOneSampler, p) + 1.0f);
}
