/* tests/store/test_store_modes.c - the store's files are owner-only.
 *
 * The segment memfd and every spill file must be mode 0600 and the spill
 * subdirectory 0700, even with a permissive umask, because object bytes are
 * private to the node's processes of one user. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "raydist/error.h"
#include "store.h"

int main(void) {
  umask(0); /* the modes must not depend on the caller's umask */
  char root[64];
  snprintf(root, sizeof(root), "/tmp/rd-test-modes-XXXXXX");
  CHECK(mkdtemp(root) != NULL);

  rd_store *s;
  rd_store_config cfg = {.capacity = 64 * 1024, .spill_dir = root};
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  struct stat st;
  CHECK(fstat(rd_store_fd(s), &st) == 0);
  CHECK_EQ(st.st_mode & 07777, 0600);
  CHECK_EQ((uint64_t)st.st_size, 64 * 1024);

  /* fill, then force one spill */
  uint64_t off;
  for (uint64_t id = 0; id < 3; id++) {
    CHECK_EQ(rd_store_create(s, id, 32 * 1024, 1, &off), 0);
    memset(rd_store_base(s) + off, (int)id, 32 * 1024);
    CHECK_EQ(rd_store_seal(s, id), 0);
    CHECK_EQ(rd_store_release(s, id), 0);
  }
  rd_store_stats ss;
  rd_store_get_stats(s, &ss);
  CHECK_EQ(ss.num_spilled, 1);

  DIR *d = opendir(root);
  CHECK(d != NULL);
  struct dirent *e;
  char sub[512] = "";
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.')
      snprintf(sub, sizeof(sub), "%s/%s", root, e->d_name);
  closedir(d);
  CHECK(sub[0] != '\0');
  CHECK(stat(sub, &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK_EQ(st.st_mode & 07777, 0700);

  char path[600];
  snprintf(path, sizeof(path), "%s/%016llx", sub, 0ull);
  CHECK(stat(path, &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK_EQ(st.st_mode & 07777, 0600);
  CHECK_EQ(st.st_size, 32 * 1024);

  rd_store_close(s);
  CHECK(rmdir(root) == 0);
  printf("test_store_modes: ok\n");
  return 0;
}
