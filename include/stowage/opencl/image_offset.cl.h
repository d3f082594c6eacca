/* The image offset parameter of Stowage kernels (docs/textures.md). A tensor in an
 * image storage is a rectangle of pixels starting at column x, row y of the image.
 * A parameter of this type placed directly after an image2d_t parameter receives
 * (int2)(x, y) of the tensor bound to that image: the runtime sets it, call_kernel
 * lists no argument for it. An image parameter without one takes only tensors at
 * the image's origin. */
#ifndef STOWAGE_IMAGE_OFFSET_CL_H
#define STOWAGE_IMAGE_OFFSET_CL_H

typedef int2 stowage_image_offset;

#endif
