/* safetensors.h - read-only reader for the safetensors weight format.
 *
 * A file is an 8-byte little-endian header length, a JSON header mapping tensor
 * names to {dtype, shape, data_offsets}, then the tensor bytes.  The reader maps
 * the file, validates every entry (known dtype, shape product times dtype size
 * equals the byte span, spans inside the file, no overlaps) and refuses a
 * truncated or inconsistent file with RD_EINVAL/RD_EIO and a message.  It never
 * writes to the file or copies tensor data. */
#ifndef RD_GPU_SAFETENSORS_H
#define RD_GPU_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rd_st_dtype {
  RD_ST_BOOL, RD_ST_U8, RD_ST_I8, RD_ST_I16, RD_ST_U16, RD_ST_F16, RD_ST_BF16,
  RD_ST_I32, RD_ST_U32, RD_ST_F32, RD_ST_I64, RD_ST_U64, RD_ST_F64,
  RD_ST_F8_E4M3, RD_ST_F8_E5M2, RD__ST_NDTYPES
} rd_st_dtype;

#define RD_ST_MAX_DIMS 8

typedef struct rd_st_tensor {
  const char *name;               /* owned by the reader */
  rd_st_dtype dtype;
  int ndim;
  int64_t shape[RD_ST_MAX_DIMS];
  uint64_t begin, end;            /* byte offsets into the data section */
  const void *data;               /* points into the read-only mapping */
} rd_st_tensor;

typedef struct rd_safetensors rd_safetensors;

/* Maps and validates path.  On success *out owns the mapping (release with
 * rd_safetensors_close).  On failure returns RD_ENOENT (missing), RD_EIO
 * (unreadable) or RD_EINVAL (malformed), with a message in err. */
int rd_safetensors_open(const char *path, rd_safetensors **out, char *err, size_t errlen)
    __attribute__((warn_unused_result));
void rd_safetensors_close(rd_safetensors *st);

size_t rd_safetensors_count(const rd_safetensors *st);
const rd_st_tensor *rd_safetensors_at(const rd_safetensors *st, size_t i);
/* Tensor by name, or NULL.  The pointer lives as long as st. */
const rd_st_tensor *rd_safetensors_find(const rd_safetensors *st, const char *name);
/* Looks up name and checks it is F32 with exactly the given shape; on success
 * *data points at its ndim-dimensional row-major values (not necessarily aligned
 * beyond 4 bytes).  Otherwise RD_ENOENT/RD_EINVAL with a message naming it. */
int rd_safetensors_get_f32(const rd_safetensors *st, const char *name, int ndim,
                           const int64_t *shape, const float **data, char *err, size_t errlen)
    __attribute__((warn_unused_result));

const char *rd_st_dtype_name(rd_st_dtype t);
size_t rd_st_dtype_size(rd_st_dtype t);

#ifdef __cplusplus
}
#endif
#endif
