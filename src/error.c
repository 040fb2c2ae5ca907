/* src/error.c - names and messages of the RD_E* codes (raydist/error.h). */
#include "raydist.h"

const char *rd_strerror(int err) {
  switch (err) {
    case RD_OK: return "success";
#define XX(name, val, msg) case RD_##name: return msg;
    RD_ERRNO_MAP(XX)
#undef XX
    default: return "unknown error";
  }
}

const char *rd_err_name(int err) {
  switch (err) {
    case RD_OK: return "RD_OK";
#define XX(name, val, msg) case RD_##name: return "RD_" #name;
    RD_ERRNO_MAP(XX)
#undef XX
    default: return "RD_EUNKNOWN";
  }
}
