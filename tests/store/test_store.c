/* tests/store/test_store.c - life cycle, sharing, spilling and failure tests
 * of the object store.
 *
 * Data is written through the daemon mapping and read back through a second
 * mapping of the memfd, in this process and in a forked child, so the test
 * proves real shared memory; spilling runs against a real directory. */

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "raydist/error.h"
#include "store.h"

#define KiB (1024ull)
#define MiB (1024ull * 1024ull)

static char tmp_root[64];

static void fill(uint8_t *p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; i++)
    p[i] = (uint8_t)((i * 131 + seed * 7919 + (i >> 9)) & 0xff);
}

static int same(const uint8_t *p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i] != (uint8_t)((i * 131 + seed * 7919 + (i >> 9)) & 0xff))
      return 0;
  return 1;
}

/* Number of entries in `dir`, and the single subdirectory's path if asked. */
static int count_entries(const char *dir, char *sub_out, size_t sub_len) {
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    n++;
    if (sub_out != NULL)
      snprintf(sub_out, sub_len, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  return n;
}

static int spill_file_exists(const char *sub, uint64_t id) {
  char path[600];
  snprintf(path, sizeof(path), "%s/%016llx", sub, (unsigned long long)id);
  return access(path, F_OK) == 0;
}

static void make_spill_dir(char *out, size_t len, const char *name) {
  snprintf(out, len, "%s/%s", tmp_root, name);
  CHECK(mkdir(out, 0700) == 0);
}

/* Create, fill, seal and release one object. */
static void put_sealed(rd_store *s, uint64_t id, uint64_t n) {
  uint64_t off;
  CHECK_EQ(rd_store_create(s, id, n, 1, &off), 0);
  fill(rd_store_base(s) + off, n, id);
  CHECK_EQ(rd_store_seal(s, id), 0);
  CHECK_EQ(rd_store_release(s, id), 0);
}

static void test_lifecycle(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * MiB, .spill_dir = NULL, .prefault = 0};
  rd_store_stats st;
  uint64_t off, off2, size;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(rd_store_capacity(s), 1 * MiB);
  CHECK(rd_store_fd(s) >= 0);
  uint8_t *base = rd_store_base(s);

  CHECK_EQ(rd_store_create(s, 1, 1000, 7, &off), 0);
  CHECK_EQ(off % 64, 0);
  fill(base + off, 1000, 1);
  CHECK_EQ(rd_store_get(s, 1, &off2, &size), RD_EAGAIN);
  CHECK_EQ(rd_store_contains(s, 1), 0);
  CHECK_EQ(rd_store_create(s, 1, 10, 7, &off2), RD_EEXIST);
  CHECK_EQ(rd_store_create(s, 2, 1 * MiB + 1, 7, &off2), RD_E2BIG);
  CHECK_EQ(rd_store_seal(s, 1), 0);
  CHECK_EQ(rd_store_seal(s, 1), RD_ESTATE);
  CHECK_EQ(rd_store_seal(s, 99), RD_ENOENT);
  CHECK_EQ(rd_store_contains(s, 1), 1);
  CHECK_EQ(rd_store_contains(s, 99), 0);

  /* object 2 is written by a forked child through its own mapping */
  uint64_t off_child;
  CHECK_EQ(rd_store_create(s, 2, 4096, 8, &off_child), 0);

  /* a second mapping in this process sees the daemon's bytes */
  uint8_t *m2 = mmap(NULL, rd_store_capacity(s), PROT_READ | PROT_WRITE, MAP_SHARED,
                     rd_store_fd(s), 0);
  CHECK(m2 != MAP_FAILED);
  CHECK(m2 != base);
  CHECK_EQ(rd_store_get(s, 1, &off2, &size), 0);
  CHECK_EQ(off2, off);
  CHECK_EQ(size, 1000);
  CHECK(same(m2 + off2, size, 1));

  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    uint8_t *m3 = mmap(NULL, 1 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, rd_store_fd(s), 0);
    if (m3 == MAP_FAILED || !same(m3 + off, 1000, 1))
      _exit(2);
    fill(m3 + off_child, 4096, 2);
    _exit(0);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(same(base + off_child, 4096, 2));
  CHECK_EQ(rd_store_seal(s, 2), 0);
  CHECK_EQ(rd_store_get(s, 2, &off2, &size), 0);
  CHECK(same(m2 + off2, 4096, 2));
  munmap(m2, rd_store_capacity(s));

  /* pins: object 1 has the creator's pin and one get */
  CHECK_EQ(rd_store_release(s, 1), 0);
  CHECK_EQ(rd_store_release(s, 1), 0);
  CHECK_EQ(rd_store_release(s, 1), RD_ESTATE);
  CHECK_EQ(rd_store_release(s, 99), RD_ENOENT);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 2);
  CHECK_EQ(st.num_in_memory, 2);
  CHECK_EQ(st.used, 1024 + 4096);
  CHECK_EQ(rd_store_delete(s, 1), 0);
  CHECK_EQ(rd_store_get(s, 1, &off2, &size), RD_ENOENT);
  CHECK_EQ(rd_store_delete(s, 1), RD_ENOENT);
  CHECK_EQ(rd_store_release(s, 1), RD_ENOENT);
  CHECK_EQ(rd_store_contains(s, 1), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 1);
  CHECK_EQ(st.used, 4096);

  /* size 0 objects exist and can be read */
  CHECK_EQ(rd_store_create(s, 3, 0, 7, &off2), 0);
  CHECK_EQ(rd_store_seal(s, 3), 0);
  CHECK_EQ(rd_store_get(s, 3, &off2, &size), 0);
  CHECK_EQ(size, 0);
  CHECK_EQ(rd_store_release(s, 3), 0);
  CHECK_EQ(rd_store_release(s, 3), 0);
  CHECK_EQ(rd_store_delete(s, 3), 0);

  /* an unsealed object released by its creator can still be sealed */
  CHECK_EQ(rd_store_create(s, 4, 100, 7, &off2), 0);
  CHECK_EQ(rd_store_release(s, 4), 0);
  CHECK_EQ(rd_store_seal(s, 4), 0);
  CHECK_EQ(rd_store_contains(s, 4), 1);
  rd_store_close(s);

  /* bad configurations */
  rd_store_config bad = {.capacity = 0};
  CHECK_EQ(rd_store_open(&s, &bad), RD_EINVAL);
  CHECK_EQ(rd_store_open(&s, NULL), RD_EINVAL);
  rd_store_config odd = {.capacity = 1000};
  CHECK_EQ(rd_store_open(&s, &odd), 0);
  CHECK_EQ(rd_store_capacity(s), 4096);
  rd_store_close(s);
  rd_store_config nodir = {.capacity = 4096, .spill_dir = "/nonexistent/raydist"};
  CHECK(rd_store_open(&s, &nodir) < 0);
}

static void test_delete_pinned(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * MiB};
  rd_store_stats st;
  uint64_t off, off2, size;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(rd_store_create(s, 10, 64 * KiB, 1, &off), 0);
  fill(rd_store_base(s) + off, 64 * KiB, 10);
  CHECK_EQ(rd_store_seal(s, 10), 0);
  CHECK_EQ(rd_store_release(s, 10), 0);
  CHECK_EQ(rd_store_get(s, 10, &off2, &size), 0); /* a reader's pin */
  CHECK_EQ(rd_store_delete(s, 10), 0);
  CHECK_EQ(rd_store_get(s, 10, &off2, &size), RD_ENOENT);
  CHECK_EQ(rd_store_contains(s, 10), 0);
  CHECK_EQ(rd_store_delete(s, 10), RD_ENOENT);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, 64 * KiB);  /* still held by the reader */
  CHECK_EQ(st.num_objects, 0);
  CHECK(same(rd_store_base(s) + off, 64 * KiB, 10)); /* reader's bytes intact */
  CHECK_EQ(rd_store_create(s, 10, 1, 1, &off2), RD_EEXIST); /* until the last release */
  /* a new reader of a copy on its way out: pinned, still deleted */
  CHECK_EQ(rd_store_reuse(s, 10, &off2, &size), 0);
  CHECK(off2 == off && size == 64 * KiB);
  CHECK_EQ(rd_store_get(s, 10, &off2, &size), RD_ENOENT);
  CHECK_EQ(rd_store_release(s, 10), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, 64 * KiB);  /* the first reader still holds it */
  CHECK_EQ(rd_store_release(s, 10), 0);
  CHECK_EQ(rd_store_reuse(s, 10, &off2, &size), RD_ENOENT);   /* gone */
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, 0);
  CHECK_EQ(rd_store_release(s, 10), RD_ENOENT);
  CHECK_EQ(rd_store_create(s, 10, 1, 1, &off2), 0); /* the id is free again */

  /* delete of an unsealed object held by its creator, then its release */
  CHECK_EQ(rd_store_create(s, 11, 100, 1, &off2), 0);
  CHECK_EQ(rd_store_delete(s, 11), 0);
  CHECK_EQ(rd_store_seal(s, 11), RD_ENOENT);
  CHECK_EQ(rd_store_release(s, 11), 0);
  CHECK_EQ(rd_store_release(s, 11), RD_ENOENT);
  rd_store_close(s);
}

/* rd_store_delete_range: every object of one owner's id range, pinned ones
 * on their last release, nothing outside the range; more than fit in one
 * batch of the scan. */
static void test_delete_range(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 4 * MiB};
  uint64_t off, size;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  const uint64_t a = 7ull << 32, b = 8ull << 32;
  for (uint64_t i = 0; i < 600; i++) {
    put_sealed(s, a + i, 1 * KiB);
    put_sealed(s, b + i, 1 * KiB);
  }
  CHECK_EQ(rd_store_get(s, a + 5, &off, &size), 0);   /* pinned by a reader */
  CHECK_EQ(rd_store_create(s, a + 1000, 64, 1, &off), 0);   /* unsealed */
  CHECK_EQ(rd_store_delete_range(s, a, a | 0xffffffffull), 601);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 600);
  CHECK_EQ(rd_store_get(s, a + 1, &off, &size), RD_ENOENT);
  CHECK_EQ(rd_store_get(s, b + 599, &off, &size), 0);
  CHECK_EQ(rd_store_release(s, b + 599), 0);
  CHECK_EQ(rd_store_release(s, a + 5), 0);   /* freed now */
  CHECK_EQ(rd_store_release(s, a + 1000), 0);
  CHECK_EQ(rd_store_delete_range(s, a, a | 0xffffffffull), 0);
  CHECK_EQ(rd_store_delete_range(s, b + 10, b + 5), 0);   /* empty range */
  CHECK_EQ(rd_store_delete_range(s, b, b + 9), 10);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 590);
  rd_store_close(s);
}

/* Co-owners (rd_store_owner_add, rd_return_refs): a co-owned object stays
 * when its maker's range is deleted and goes when its last co-owner lets
 * go or leaves; counts add up; only sealed, live objects, only owners. */
static void test_co_owners(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 4 * MiB};
  uint64_t off, size;
  rd_store_stats st;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  const uint64_t w = 9ull << 32;   /* made by client 9 */
  for (uint64_t i = 0; i < 300; i++) put_sealed(s, w + i, 1 * KiB);
  for (uint64_t i = 0; i < 300; i += 2) CHECK_EQ(rd_store_owner_add(s, w + i, i % 4 ? 5 : 6), 0);
  CHECK_EQ(rd_store_owner_add(s, w + 2, 5), 0);   /* twice: two hand-overs to 5 */
  CHECK_EQ(rd_store_is_owner(s, w + 4, 6), 1);
  CHECK_EQ(rd_store_is_owner(s, w + 4, 5), 0);
  CHECK_EQ(rd_store_is_owner(s, w + 1, 6), 0);
  CHECK_EQ(rd_store_create(s, w + 1000, 64, 9, &off), 0);   /* unsealed, nobody else's */
  CHECK_EQ(rd_store_owner_add(s, w + 5000, 5), RD_ENOENT);
  CHECK_EQ(rd_store_owner_drop(s, w + 1, 5, 0), RD_EINVAL);   /* not a co-owner */

  /* the maker lets go of one it shares: it stays for the co-owner */
  CHECK_EQ(rd_store_owner_drop(s, w + 6, 9, 1), 0);
  CHECK_EQ(rd_store_get(s, w + 6, &off, &size), 0);
  CHECK_EQ(rd_store_release(s, w + 6), 0);
  CHECK_EQ(rd_store_owner_drop(s, w + 6, 5, 0), 0);   /* and goes with the co-owner */
  CHECK_EQ(rd_store_get(s, w + 6, &off, &size), RD_ENOENT);
  /* a co-owner lets go first: the maker still has it */
  CHECK_EQ(rd_store_owner_drop(s, w + 8, 6, 0), 0);
  CHECK_EQ(rd_store_get(s, w + 8, &off, &size), 0);
  CHECK_EQ(rd_store_release(s, w + 8), 0);

  /* the maker leaves: only what nobody else holds goes */
  CHECK_EQ(rd_store_delete_range(s, w, w | 0xffffffffull), 152);   /* 150 odd, the unsealed one, w + 8 */
  CHECK_EQ(rd_store_release(s, w + 1000), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 148);
  CHECK_EQ(rd_store_owner_drop(s, w + 2, 5, 0), 0);   /* one of its two */
  CHECK_EQ(rd_store_get(s, w + 2, &off, &size), 0);
  CHECK_EQ(rd_store_release(s, w + 2), 0);
  CHECK_EQ(rd_store_owner_gone(s, 5), 74);   /* i % 4 == 2, less w + 6 */
  CHECK_EQ(rd_store_get(s, w + 2, &off, &size), RD_ENOENT);
  CHECK_EQ(rd_store_owner_gone(s, 6), 74);   /* i % 4 == 0, less w + 8 */
  CHECK_EQ(rd_store_owner_gone(s, 6), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 0);
  rd_store_close(s);
}

/* A hand-over may reach the store before its object's seal (the maker
 * seals on its own connection, its caller hands over on another): the
 * co-owner holds it from then on; sealed, it stays past its maker; aborted
 * (its maker died before sealing), it goes for every holder. */
static void test_co_owner_unsealed(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * MiB};
  rd_store_stats st;
  uint64_t off, size;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  const uint64_t id = (9ull << 32) | 1, id2 = (9ull << 32) | 2;
  CHECK_EQ(rd_store_create(s, id, 64, 9, &off), 0);
  CHECK_EQ(rd_store_owner_add(s, id, 5), 0);
  CHECK_EQ(rd_store_is_owner(s, id, 5), 1);
  CHECK_EQ(rd_store_get(s, id, &off, &size), RD_EAGAIN);   /* not readable before its seal */
  CHECK_EQ(rd_store_seal(s, id), 0);
  CHECK_EQ(rd_store_release(s, id), 0);   /* the maker's pin */
  CHECK_EQ(rd_store_owner_drop(s, id, 9, 1), 0);   /* the maker lets go: the co-owner keeps it */
  CHECK_EQ(rd_store_get(s, id, &off, &size), 0);
  CHECK_EQ(size, 64);
  CHECK_EQ(rd_store_release(s, id), 0);
  CHECK_EQ(rd_store_owner_drop(s, id, 5, 0), 0);
  CHECK_EQ(rd_store_get(s, id, &off, &size), RD_ENOENT);
  CHECK_EQ(rd_store_create(s, id2, 64, 9, &off), 0);
  CHECK_EQ(rd_store_owner_add(s, id2, 5), 0);
  rd_store_abort_client(s, 9);   /* its maker died before sealing it */
  CHECK_EQ(rd_store_get(s, id2, &off, &size), RD_ENOENT);
  CHECK_EQ(rd_store_is_owner(s, id2, 5), 0);
  CHECK_EQ(rd_store_owner_gone(s, 5), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 0);
  CHECK_EQ(st.used, 0);
  rd_store_close(s);
}

static void test_abort_client(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * MiB};
  rd_store_stats st;
  uint64_t off, size;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(rd_store_create(s, 1, 1000, 5, &off), 0); /* unsealed, pinned by 5 */
  CHECK_EQ(rd_store_create(s, 2, 1000, 5, &off), 0); /* sealed by 5 */
  CHECK_EQ(rd_store_seal(s, 2), 0);
  CHECK_EQ(rd_store_create(s, 3, 1000, 6, &off), 0); /* unsealed, another client */
  CHECK_EQ(rd_store_create(s, 4, 1000, 5, &off), 0); /* unsealed, deleted, pinned */
  CHECK_EQ(rd_store_delete(s, 4), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, 4 * 1024);
  rd_store_abort_client(s, 5);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, 2 * 1024);
  CHECK_EQ(st.num_objects, 2);
  CHECK_EQ(rd_store_get(s, 1, &off, &size), RD_ENOENT);
  CHECK_EQ(rd_store_release(s, 1), RD_ENOENT);
  CHECK_EQ(rd_store_release(s, 4), RD_ENOENT);
  CHECK_EQ(rd_store_contains(s, 2), 1);
  CHECK_EQ(rd_store_get(s, 3, &off, &size), RD_EAGAIN);
  CHECK_EQ(rd_store_release(s, 2), 0); /* the daemon drops 5's tracked pin */
  CHECK_EQ(rd_store_create(s, 1, 10, 6, &off), 0);  /* id reusable */
  rd_store_abort_client(s, 42); /* no objects: nothing happens */
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 3);
  rd_store_close(s);
}

#define NOBJ 10
#define OBJ_SIZE (512 * KiB - 13)

static void test_spill(void) {
  char dir[128], sub[512];
  make_spill_dir(dir, sizeof(dir), "spill");
  rd_store *s;
  rd_store_config cfg = {.capacity = 4 * MiB, .spill_dir = dir};
  rd_store_stats st;
  uint64_t off, size;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(count_entries(dir, sub, sizeof(sub)), 1); /* the per-store subdir */
  uint8_t *base = rd_store_base(s);

  /* 8 objects of 512 KiB fill the 4 MiB segment exactly */
  for (uint64_t id = 0; id < 8; id++) {
    CHECK_EQ(rd_store_create(s, id, OBJ_SIZE, 1, &off), 0);
    fill(base + off, OBJ_SIZE, id);
    CHECK_EQ(rd_store_seal(s, id), 0);
    CHECK_EQ(rd_store_release(s, id), 0);
  }
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, 4 * MiB);
  CHECK_EQ(st.spill_count, 0);
  /* touching object 0 makes 1 and 2 the least recently used */
  CHECK_EQ(rd_store_get(s, 0, &off, &size), 0);
  CHECK_EQ(rd_store_release(s, 0), 0);
  for (uint64_t id = 8; id < NOBJ; id++) {
    CHECK_EQ(rd_store_create(s, id, OBJ_SIZE, 1, &off), 0);
    fill(base + off, OBJ_SIZE, id);
    CHECK_EQ(rd_store_seal(s, id), 0);
    CHECK_EQ(rd_store_release(s, id), 0);
  }
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, NOBJ);
  CHECK_EQ(st.num_in_memory, 8);
  CHECK_EQ(st.num_spilled, 2);
  CHECK_EQ(st.spill_count, 2);
  CHECK_EQ(st.evict_count, 2);
  CHECK_EQ(st.bytes_spilled, 2 * OBJ_SIZE);
  CHECK_EQ(st.restore_count, 0);
  CHECK(spill_file_exists(sub, 1));
  CHECK(spill_file_exists(sub, 2));
  CHECK(!spill_file_exists(sub, 0));
  CHECK_EQ(count_entries(sub, NULL, 0), 2);
  CHECK_EQ(rd_store_contains(s, 1), 1); /* spilled still counts */

  /* get restores byte-exactly (spilling the next LRU object, 3) */
  CHECK_EQ(rd_store_get(s, 1, &off, &size), 0);
  CHECK_EQ(size, OBJ_SIZE);
  CHECK(same(base + off, size, 1));
  CHECK(!spill_file_exists(sub, 1));
  CHECK(spill_file_exists(sub, 3));
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.restore_count, 1);
  CHECK_EQ(st.spill_count, 3);
  CHECK_EQ(st.num_spilled, 2);
  CHECK_EQ(rd_store_release(s, 1), 0);

  /* every object reads back exactly, whatever moved in between */
  for (int round = 0; round < 2; round++)
    for (uint64_t id = 0; id < NOBJ; id++) {
      CHECK_EQ(rd_store_get(s, id, &off, &size), 0);
      CHECK(same(base + off, size, id));
      CHECK_EQ(rd_store_release(s, id), 0);
    }

  /* everything in memory pinned: nothing evictable */
  uint64_t pinned[NOBJ];
  int npinned = 0;
  rd_store_get_stats(s, &st);
  uint64_t spills_before = st.spill_count;
  for (uint64_t id = 0; id < NOBJ; id++)
    if (!spill_file_exists(sub, id)) {
      CHECK_EQ(rd_store_get(s, id, &off, &size), 0);
      pinned[npinned++] = id;
    }
  CHECK_EQ(npinned, 8);
  CHECK_EQ(rd_store_create(s, 100, 1, 1, &off), RD_ESTORE_FULL);
  uint64_t spilled_id = UINT64_MAX;
  for (uint64_t id = 0; id < NOBJ; id++)
    if (spill_file_exists(sub, id))
      spilled_id = id;
  CHECK(spilled_id != UINT64_MAX);
  CHECK_EQ(rd_store_get(s, spilled_id, &off, &size), RD_ESTORE_FULL);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spill_count, spills_before);
  /* one unpinned object is not enough room for 1 MiB: refused without spilling */
  CHECK_EQ(rd_store_release(s, pinned[0]), 0);
  CHECK_EQ(rd_store_create(s, 100, 1 * MiB, 1, &off), RD_ESTORE_FULL);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spill_count, spills_before);
  for (int i = 1; i < npinned; i++)
    CHECK_EQ(rd_store_release(s, pinned[i]), 0);

  /* delete of a spilled object removes its file */
  CHECK(spill_file_exists(sub, spilled_id));
  CHECK_EQ(rd_store_delete(s, spilled_id), 0);
  CHECK(!spill_file_exists(sub, spilled_id));
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_spilled, 1);
  CHECK_EQ(st.bytes_spilled, OBJ_SIZE);
  CHECK_EQ(st.num_objects, NOBJ - 1);

  /* close removes the remaining spill file and the subdirectory */
  CHECK_EQ(count_entries(sub, NULL, 0), 1);
  rd_store_close(s);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

static void test_no_spill_dir(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * MiB};
  uint64_t off;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  for (uint64_t id = 0; id < 4; id++) {
    CHECK_EQ(rd_store_create(s, id, 256 * KiB, 1, &off), 0);
    CHECK_EQ(rd_store_seal(s, id), 0);
    CHECK_EQ(rd_store_release(s, id), 0);
  }
  CHECK_EQ(rd_store_create(s, 9, 1, 1, &off), RD_ESTORE_FULL);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spill_count, 0);
  CHECK_EQ(st.num_objects, 4);
  CHECK_EQ(st.largest_free, 0);
  rd_store_close(s);
}

/* Files over 64 KiB fail to write (EFBIG, no signal); *saved gets the old
 * limit.  For forked children only (see in_child). */
static void limit_files(struct rlimit *saved) {
  CHECK(getrlimit(RLIMIT_FSIZE, saved) == 0);
  struct rlimit low = {.rlim_cur = 64 * KiB, .rlim_max = saved->rlim_max};
  CHECK(setrlimit(RLIMIT_FSIZE, &low) == 0);
  signal(SIGXFSZ, SIG_IGN);
}

/* Runs in a forked child so that the file size limit does not leak. */
static int spill_failure_child(const char *dir) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * MiB, .spill_dir = dir};
  uint64_t off, size;
  char sub[512];
  /* open first: RLIMIT_FSIZE also limits the memfd's ftruncate */
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  struct rlimit rl;
  limit_files(&rl);
  CHECK_EQ(count_entries(dir, sub, sizeof(sub)), 1);
  for (uint64_t id = 0; id < 2; id++) {
    CHECK_EQ(rd_store_create(s, id, 512 * KiB, 1, &off), 0);
    fill(rd_store_base(s) + off, 512 * KiB, id);
    CHECK_EQ(rd_store_seal(s, id), 0);
    CHECK_EQ(rd_store_release(s, id), 0);
  }
  CHECK_EQ(rd_store_create(s, 2, 512 * KiB, 1, &off), RD_ENOSPC);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spill_count, 0);
  CHECK_EQ(st.num_in_memory, 2);
  CHECK_EQ(st.num_objects, 2);
  CHECK_EQ(count_entries(sub, NULL, 0), 0); /* the partial file is gone */
  for (uint64_t id = 0; id < 2; id++) {
    CHECK_EQ(rd_store_get(s, id, &off, &size), 0);
    CHECK(same(rd_store_base(s) + off, size, id));
    CHECK_EQ(rd_store_release(s, id), 0);
  }
  /* with the limit lifted the same create succeeds by spilling */
  CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
  CHECK_EQ(rd_store_create(s, 2, 512 * KiB, 1, &off), 0);
  CHECK_EQ(rd_store_get(s, 0, &off, &size), 0); /* restored by spilling 1 */
  CHECK(same(rd_store_base(s) + off, size, 0));
  rd_store_close(s);
  return 0;
}

/* Run child(dir) in a forked process with a fresh spill directory, so that a
 * file size limit it sets does not leak; it must leave no file behind. */
static void in_child(const char *name, int (*child)(const char *dir)) {
  char dir[128];
  make_spill_dir(dir, sizeof(dir), name);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0)
    _exit(child(dir));
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

static void test_spill_failure(void) { in_child("spillfail", spill_failure_child); }

/* ---- background spilling ---- */

static uint64_t spilling(rd_store *s) {
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  return st.spilling_bytes;
}

static uint64_t restoring(rd_store *s) {
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  return st.restoring_bytes;
}

/* Wait for the spill thread to finish what it was given, and reap it. */
static void drain(rd_store *s) {
  while (spilling(s) > 0 || restoring(s) > 0) {
    struct pollfd pf = {.fd = rd_store_spill_fd(s), .events = POLLIN};
    CHECK(poll(&pf, 1, 10000) == 1);
    rd_store_spill_reap(s);
  }
}

/* Wait until the thread has written at least one job, without reaping. */
static void written(rd_store *s) {
  struct pollfd pf = {.fd = rd_store_spill_fd(s), .events = POLLIN};
  CHECK(poll(&pf, 1, 10000) == 1);
}


static void check_bytes(rd_store *s, uint64_t id, uint64_t n) {
  uint64_t off, size;
  CHECK_EQ(rd_store_get(s, id, &off, &size), 0);
  CHECK_EQ(size, n);
  CHECK(same(rd_store_base(s) + off, n, id));
  CHECK_EQ(rd_store_release(s, id), 0);
}

/* Above the threshold the least recently used objects go to disk without any
 * create asking for room. */
static void test_background_threshold(void) {
  char dir[128], sub[512];
  make_spill_dir(dir, sizeof(dir), "bg");
  rd_store *s;
  rd_store_config cfg = {.capacity = 8 * MiB, .spill_dir = dir, .spill_threshold = 0.5};
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK(rd_store_spill_fd(s) >= 0);
  CHECK_EQ(count_entries(dir, sub, sizeof(sub)), 1);
  for (uint64_t id = 0; id < 6; id++)
    put_sealed(s, id, 1 * MiB);
  drain(s);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  CHECK(st.used <= 4 * MiB);   /* 6 MiB of objects, threshold 4 MiB */
  CHECK_EQ(st.num_spilled, 2);
  CHECK_EQ(st.spill_count, 2);
  CHECK_EQ(st.spill_failures, 0);
  CHECK(spill_file_exists(sub, 0) && spill_file_exists(sub, 1)); /* the oldest two */
  CHECK(!spill_file_exists(sub, 2));
  for (uint64_t id = 0; id < 6; id++)
    check_bytes(s, id, 1 * MiB);
  /* a store without a threshold has no thread */
  rd_store *plain;
  rd_store_config pcfg = {.capacity = 1 * MiB, .spill_dir = dir};
  CHECK_EQ(rd_store_open(&plain, &pcfg), 0);
  CHECK_EQ(rd_store_spill_fd(plain), -1);
  CHECK_EQ(rd_store_spill_reap(plain), 0);
  rd_store_close(plain);
  rd_store_close(s);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

/* Entries of `dir` other than files of deleted objects the thread has yet
 * to remove ("*.del"). */
static int count_live_files(const char *dir) {
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !(len > 4 && !strcmp(e->d_name + len - 4, ".del")))
      n++;
  }
  closedir(d);
  return n;
}

/* Objects under 1 MiB spilled by the thread share files: 300 of about
 * 20 KiB go out in far fewer files than objects, none named by its id.
 * Each reads back intact from the middle of its file; deleting every other
 * object keeps the files the rest are in; a file goes with the last object
 * in it (read back or deleted), so once every object is gone no spill file
 * is left. */
static void test_background_fused(void) {
  enum { N = 300 };
  char dir[128], sub[512];
  make_spill_dir(dir, sizeof(dir), "bgfused");
  rd_store *s;
  rd_store_config cfg = {.capacity = 8 * MiB, .spill_dir = dir, .spill_threshold = 0.25};
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(count_entries(dir, sub, sizeof(sub)), 1);
  for (uint64_t id = 0; id < N; id++) {
    put_sealed(s, id, 20 * KiB + id);
    if (id % 64 == 63)
      drain(s);
  }
  drain(s);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  int files = count_live_files(sub);
  printf("fused: %llu of %d objects spilled, into %d files\n", (unsigned long long)st.num_spilled, N, files);
  fflush(stdout);
  CHECK(st.num_spilled >= N / 2);
  CHECK(files >= 1 && (uint64_t)files * 8 <= st.num_spilled);
  for (uint64_t id = 0; id < N; id++)
    CHECK(!spill_file_exists(sub, id));
  for (uint64_t id = 0; id < N; id += 2)   /* spilled or not: their parts of the files go */
    CHECK_EQ(rd_store_delete(s, id), 0);
  drain(s);
  for (uint64_t id = 1; id < N; id += 2)   /* read back, from files that lost objects */
    check_bytes(s, id, 20 * KiB + id);
  drain(s);
  rd_store_get_stats(s, &st);
  CHECK(st.restore_count >= N / 4);
  for (uint64_t id = 1; id < N; id += 2)
    CHECK_EQ(rd_store_delete(s, id), 0);
  drain(s);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_objects, 0);
  CHECK_EQ(st.bytes_spilled, 0);
  CHECK_EQ(st.used, 0);
  CHECK_EQ(count_live_files(sub), 0);   /* only renamed files of the dead, if the thread lags */
  rd_store_close(s);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

/* rd_store_create_nowait waits (RD_EAGAIN) for the thread instead of writing
 * files itself; an object read or deleted while its job runs is not moved. */
static void test_background_nowait(void) {
  char dir[128], sub[512];
  make_spill_dir(dir, sizeof(dir), "bgwait");
  rd_store *s;
  rd_store_config cfg = {.capacity = 4 * MiB, .spill_dir = dir, .spill_threshold = 1};
  uint64_t off, size;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(count_entries(dir, sub, sizeof(sub)), 1);
  for (uint64_t id = 0; id < 4; id++)
    put_sealed(s, id, 1 * MiB);
  CHECK_EQ(spilling(s), 0);   /* full, but nothing asked for room */

  /* a waiting create: object 0 is handed to the thread */
  CHECK_EQ(rd_store_create_nowait(s, 10, 1 * MiB, 1, &off), RD_EAGAIN);
  CHECK_EQ(spilling(s), 1 * MiB);
  /* ... and read before its job is reaped: it stays in memory */
  CHECK_EQ(rd_store_get(s, 0, &off, &size), 0);
  CHECK(same(rd_store_base(s) + off, size, 0));
  written(s);
  CHECK_EQ(rd_store_spill_reap(s), 1);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_spilled, 0);
  CHECK_EQ(st.spill_count, 0);
  CHECK(!spill_file_exists(sub, 0));

  /* the next try hands object 1 over; deleting it meanwhile frees it */
  CHECK_EQ(rd_store_create_nowait(s, 10, 1 * MiB, 1, &off), RD_EAGAIN);
  CHECK_EQ(rd_store_delete(s, 1), 0);
  CHECK_EQ(rd_store_get(s, 1, &off, &size), RD_ENOENT);
  written(s);
  CHECK_EQ(rd_store_spill_reap(s), 1);
  CHECK(!spill_file_exists(sub, 1));
  CHECK_EQ(rd_store_create_nowait(s, 10, 1 * MiB, 1, &off), 0);
  CHECK_EQ(rd_store_seal(s, 10), 0);
  CHECK_EQ(rd_store_release(s, 10), 0);

  /* a plain spill: the object moves to disk and comes back intact */
  CHECK_EQ(rd_store_create_nowait(s, 11, 1 * MiB, 1, &off), RD_EAGAIN);
  drain(s);
  CHECK_EQ(rd_store_create_nowait(s, 11, 1 * MiB, 1, &off), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_spilled, 1);
  CHECK(spill_file_exists(sub, 2));
  /* rd_store_create waits for a running job rather than fail: with 0 and 10
   * pinned, object 3 is the only one that can go */
  CHECK_EQ(rd_store_get(s, 10, &off, &size), 0);
  CHECK_EQ(rd_store_create_nowait(s, 12, 1 * MiB, 1, &off), RD_EAGAIN);
  CHECK_EQ(rd_store_create(s, 13, 1 * MiB, 1, &off), 0);
  CHECK_EQ(spilling(s), 0);
  CHECK(spill_file_exists(sub, 3));
  CHECK_EQ(rd_store_create(s, 14, 1 * MiB, 1, &off), RD_ESTORE_FULL);   /* all pinned */
  CHECK_EQ(rd_store_release(s, 0), 0);
  CHECK_EQ(rd_store_release(s, 10), 0);
  check_bytes(s, 2, 1 * MiB);   /* restored, spilling another */
  check_bytes(s, 3, 1 * MiB);
  rd_store_close(s);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

/* The lowest id below `max` with a spill file, or UINT64_MAX. */
static uint64_t find_spilled(const char *sub, uint64_t max) {
  for (uint64_t id = 0; id < max; id++)
    if (spill_file_exists(sub, id))
      return id;
  return UINT64_MAX;
}

/* rd_store_get_nowait has spilled objects read back by the thread. */
static void test_background_restore(void) {
  char dir[128], sub[512], path[600];
  make_spill_dir(dir, sizeof(dir), "bgread");
  rd_store *s;
  rd_store_config cfg = {.capacity = 4 * MiB, .spill_dir = dir, .spill_threshold = 1};
  uint64_t off, size;
  rd_store_stats st;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(count_entries(dir, sub, sizeof(sub)), 1);
  for (uint64_t id = 0; id < 6; id++)   /* 0 and 1 spilled inline on the way */
    put_sealed(s, id, 1 * MiB);
  CHECK(spill_file_exists(sub, 0) && spill_file_exists(sub, 1));
  CHECK(rd_store_is_spilled(s, 0) && !rd_store_is_spilled(s, 2) && !rd_store_is_spilled(s, 99));
  CHECK_EQ(rd_store_delete(s, 5), 0);   /* room for one */

  /* a read in the background */
  CHECK_EQ(rd_store_get_nowait(s, 0, &off, &size), RD_EAGAIN);
  CHECK_EQ(rd_store_get_nowait(s, 0, &off, &size), RD_EAGAIN);   /* still under way */
  CHECK(rd_store_is_spilled(s, 0));   /* until the read is reaped */
  written(s);
  CHECK_EQ(rd_store_spill_reap(s), 1);
  CHECK(!rd_store_is_spilled(s, 0));
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.restore_count, 1);
  CHECK_EQ(st.num_spilled, 1);
  CHECK(!spill_file_exists(sub, 0));
  CHECK_EQ(rd_store_get_nowait(s, 0, &off, &size), 0);
  CHECK(same(rd_store_base(s) + off, size, 0));
  CHECK_EQ(rd_store_release(s, 0), 0);

  /* no room: objects are spilled for it first, then it is read */
  int tries = 0, rc;
  while ((rc = rd_store_get_nowait(s, 1, &off, &size)) == RD_EAGAIN) {
    CHECK(++tries < 10);
    written(s);
    CHECK(rd_store_spill_reap(s) >= 1);
  }
  CHECK_EQ(rc, 0);
  CHECK(tries >= 2);   /* a write, then the read */
  CHECK(same(rd_store_base(s) + off, size, 1));
  CHECK_EQ(rd_store_release(s, 1), 0);

  /* deleted while being read: freed, file and all */
  CHECK_EQ(rd_store_delete(s, 0), 0);   /* room for the read */
  rd_store_get_stats(s, &st);
  uint64_t victim = 2;
  while (victim < 5 && !spill_file_exists(sub, victim))
    victim++;
  CHECK(victim < 5);
  uint64_t used = st.used;
  CHECK_EQ(rd_store_get_nowait(s, victim, &off, &size), RD_EAGAIN);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spilling_bytes, 0);   /* a read, not a write */
  CHECK_EQ(st.used, used + 1 * MiB);
  CHECK_EQ(rd_store_delete(s, victim), 0);
  CHECK_EQ(rd_store_reuse(s, victim, &off, &size), RD_ENOENT);   /* not in memory */
  written(s);
  CHECK_EQ(rd_store_spill_reap(s), 1);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, used);
  CHECK(!spill_file_exists(sub, victim));
  CHECK_EQ(rd_store_get_nowait(s, victim, &off, &size), RD_ENOENT);

  /* rd_store_get of an object being read waits for the read */
  put_sealed(s, 30, 1 * MiB);
  put_sealed(s, 31, 1 * MiB);   /* full now: the next spills inline */
  put_sealed(s, 32, 1 * MiB);
  uint64_t other = find_spilled(sub, 40);
  CHECK(other != UINT64_MAX);
  CHECK_EQ(rd_store_delete(s, 32), 0);   /* room for the read */
  CHECK_EQ(rd_store_get_nowait(s, other, &off, &size), RD_EAGAIN);
  CHECK_EQ(rd_store_get(s, other, &off, &size), 0);
  CHECK(same(rd_store_base(s) + off, size, other));
  CHECK_EQ(rd_store_release(s, other), 0);
  drain(s);

  /* a file that is gone: the background read fails, the next get says so */
  put_sealed(s, 20, 1 * MiB);
  put_sealed(s, 21, 1 * MiB);   /* spills the least recently used */
  uint64_t lost = find_spilled(sub, 40);
  CHECK(lost != UINT64_MAX);
  snprintf(path, sizeof(path), "%s/%016llx", sub, (unsigned long long)lost);
  CHECK(unlink(path) == 0);
  while ((rc = rd_store_get_nowait(s, lost, &off, &size)) == RD_EAGAIN) {
    written(s);
    rd_store_spill_reap(s);
  }
  CHECK_EQ(rc, RD_EIO);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spilling_bytes, 0);
  CHECK_EQ(rd_store_get_nowait(s, lost, &off, &size), RD_EIO);   /* still spilled, still unreadable */
  CHECK_EQ(rd_store_delete(s, lost), 0);
  rd_store_close(s);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

/* Random creates, reads, releases and deletes against a store whose thread
 * spills and restores under them: every read sees the bytes written, and
 * at the end nothing is left (bytes, objects, files). */
static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(uint64_t n) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state % n;
}

static void test_background_random(void) {
  enum { IDS = 64, OPS = 20000 };
  char dir[128];
  make_spill_dir(dir, sizeof(dir), "bgrand");
  rd_store *s;
  rd_store_config cfg = {.capacity = 8 * MiB, .spill_dir = dir, .spill_threshold = 0.5};
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  uint64_t size[IDS] = {0};
  int live[IDS] = {0}, pinned[IDS] = {0};
  uint64_t off, sz;
  int reads = 0, waits = 0;
  for (int op = 0; op < OPS; op++) {
    uint64_t i = rnd(IDS), id = 1000 + i;
    switch (rnd(6)) {
      case 0:   /* create one that is not there */
        if (live[i]) break;
        size[i] = 1 + rnd(1 * MiB);
        int rc = rd_store_create_nowait(s, id, size[i], 1, &off);
        if (rc == RD_EAGAIN) {
          waits++;
          break;
        }
        if (rc == RD_EEXIST) {   /* deleted, but its spill job is not reaped yet */
          waits++;
          break;
        }
        CHECK(rc == 0 || rc == RD_ESTORE_FULL);
        if (rc != 0)
          break;
        fill(rd_store_base(s) + off, size[i], id);
        CHECK_EQ(rd_store_seal(s, id), 0);
        CHECK_EQ(rd_store_release(s, id), 0);
        live[i] = 1;
        break;
      case 1:   /* read it, maybe keep it pinned */
      case 2:
        if (!live[i])
          break;
        rc = rd_store_get_nowait(s, id, &off, &sz);
        if (rc == RD_EAGAIN) {
          waits++;
          break;
        }
        if (rc == RD_ESTORE_FULL)
          break;
        CHECK_EQ(rc, 0);
        CHECK_EQ(sz, size[i]);
        CHECK(same(rd_store_base(s) + off, sz, id));
        reads++;
        if (pinned[i] < 2 && rnd(3) == 0)
          pinned[i]++;
        else
          CHECK_EQ(rd_store_release(s, id), 0);
        break;
      case 3:   /* let a pin go */
        if (pinned[i]) {
          CHECK_EQ(rd_store_release(s, id), 0);
          pinned[i]--;
        }
        break;
      case 4:   /* delete it (pinned or not) */
        if (!live[i] || rnd(3))
          break;
        CHECK_EQ(rd_store_delete(s, id), 0);
        while (pinned[i]) {
          CHECK_EQ(rd_store_release(s, id), 0);
          pinned[i]--;
        }
        live[i] = 0;
        break;
      default:  /* the thread's finished jobs */
        rd_store_spill_reap(s);
        if (rnd(50) == 0 && live[i]) {   /* now and then a read that waits */
          rc = rd_store_get(s, id, &off, &sz);
          if (rc == RD_ESTORE_FULL)   /* spilled, and our pins hold the rest */
            break;
          CHECK_EQ(rc, 0);
          CHECK(same(rd_store_base(s) + off, sz, id));
          CHECK_EQ(rd_store_release(s, id), 0);
        }
        break;
    }
  }
  drain(s);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  printf("random: %d reads, %d waits, %llu spills, %llu restores\n", reads, waits,
         (unsigned long long)st.spill_count, (unsigned long long)st.restore_count);
  fflush(stdout);   /* before the forked tests */
  CHECK(st.spill_count > 0 && st.restore_count > 0);
  for (uint64_t i = 0; i < IDS; i++) {
    for (; pinned[i]; pinned[i]--)
      CHECK_EQ(rd_store_release(s, 1000 + i), 0);
  }
  for (uint64_t i = 0; i < IDS; i++) {
    if (!live[i])
      continue;
    CHECK_EQ(rd_store_get(s, 1000 + i, &off, &sz), 0);   /* every survivor intact */
    CHECK(same(rd_store_base(s) + off, sz, 1000 + i));
    CHECK_EQ(rd_store_release(s, 1000 + i), 0);
    CHECK_EQ(rd_store_delete(s, 1000 + i), 0);
  }
  drain(s);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, 0);
  CHECK_EQ(st.num_objects, 0);
  CHECK_EQ(st.bytes_spilled, 0);
  rd_store_close(s);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

/* A failed background write leaves the object in memory, is counted, and
 * pauses the thread; the create that needed the room gets the error. */
static int background_failure_child(const char *dir) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * MiB, .spill_dir = dir, .spill_threshold = 0.5};
  uint64_t off;
  char sub[512];
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  struct rlimit rl;
  limit_files(&rl);
  CHECK_EQ(count_entries(dir, sub, sizeof(sub)), 1);
  put_sealed(s, 0, 512 * KiB);
  CHECK_EQ(spilling(s), 0);
  put_sealed(s, 1, 512 * KiB);   /* over the threshold: object 0's job fails */
  drain(s);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spill_failures, 1);
  CHECK_EQ(st.spill_last_error, RD_ENOSPC);
  CHECK_EQ(st.num_in_memory, 2);
  CHECK_EQ(count_entries(sub, NULL, 0), 0);
  CHECK_EQ(rd_store_create_nowait(s, 2, 512 * KiB, 1, &off), RD_ENOSPC);
  CHECK_EQ(spilling(s), 0);   /* paused, not retrying */
  check_bytes(s, 0, 512 * KiB);
  check_bytes(s, 1, 512 * KiB);
  CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
  CHECK_EQ(rd_store_create(s, 2, 512 * KiB, 1, &off), 0);   /* inline spill works again */
  rd_store_close(s);
  return 0;
}

static void test_background_failure(void) { in_child("bgfail", background_failure_child); }

/* Closing with jobs queued and running leaves no file and no leak. */
static void test_background_close(void) {
  char dir[128];
  make_spill_dir(dir, sizeof(dir), "bgclose");
  rd_store *s;
  rd_store_config cfg = {.capacity = 32 * MiB, .spill_dir = dir, .spill_threshold = 0.01};
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  for (uint64_t id = 0; id < 16; id++)
    put_sealed(s, id, 1 * MiB);
  CHECK(spilling(s) > 0);
  rd_store_close(s);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

static void test_big_object(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 256 * MiB, .prefault = 1};
  uint64_t off, off2, size;
  const uint64_t n = 100 * MiB;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(rd_store_create(s, 77, n, 3, &off), 0);
  uint64_t *p = (uint64_t *)(void *)(rd_store_base(s) + off);
  for (uint64_t i = 0; i < n / 8; i++)
    p[i] = i * 0x9e3779b97f4a7c15ull;
  CHECK_EQ(rd_store_seal(s, 77), 0);
  CHECK_EQ(rd_store_get(s, 77, &off2, &size), 0);
  CHECK_EQ(off2, off);
  CHECK_EQ(size, n);
  CHECK_EQ(rd_store_prefault_wait(s), 0);
  const uint8_t *m2 = mmap(NULL, rd_store_capacity(s), PROT_READ, MAP_SHARED, rd_store_fd(s), 0);
  CHECK(m2 != MAP_FAILED);
  const uint64_t *q = (const uint64_t *)(const void *)(m2 + off2);
  for (uint64_t i = 0; i < n / 8; i++)
    if (q[i] != i * 0x9e3779b97f4a7c15ull)
      CHECK(!"100 MiB object differs through the second mapping");
  munmap((void *)m2, rd_store_capacity(s));
  CHECK_EQ(rd_store_release(s, 77), 0);
  CHECK_EQ(rd_store_release(s, 77), 0);
  CHECK_EQ(rd_store_delete(s, 77), 0);
  rd_store_stats st;
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.used, 0);
  CHECK_EQ(st.largest_free, 256 * MiB);
  rd_store_close(s);

  /* closing while the prefault thread is still running stops and joins it */
  rd_store_config big = {.capacity = 512 * MiB, .prefault = 1};
  CHECK_EQ(rd_store_open(&s, &big), 0);
  rd_store_close(s);
}

/* The memfd's size and the bytes of memory its pages hold now. */
static uint64_t seg_size(rd_store *s, uint64_t *mem) {
  struct stat sb;
  CHECK(fstat(rd_store_fd(s), &sb) == 0);
  if (mem != NULL)
    *mem = (uint64_t)sb.st_blocks * 512;
  return (uint64_t)sb.st_size;
}

/* Fallback allocation: objects larger than the capacity, or with the
 * segment full of what cannot be spilled, go past it; their pages are held
 * while they live and given back (the memfd shrinks) when they go. */
/* Close a store and check it left its spill directory empty; remove it. */
static void close_clean(rd_store *s, const char *dir) {
  rd_store_close(s);
  CHECK_EQ(count_entries(dir, NULL, 0), 0);
  CHECK(rmdir(dir) == 0);
}

static void test_fallback(void) {
  rd_store *s;
  rd_store_config cfg = {.capacity = 1 * MiB, .fallback_bytes = 16 * MiB};
  rd_store_stats st;
  uint64_t big, small, off, size, mem;
  CHECK_EQ(rd_store_open(&s, &cfg), 0);
  CHECK_EQ(rd_store_map_size(s), 17 * MiB);
  CHECK_EQ(seg_size(s, &mem), 1 * MiB);
  CHECK_EQ(rd_store_create(s, 1, 6 * MiB, 1, &big), 0);   /* larger than the capacity */
  CHECK(big >= 1 * MiB && big + 6 * MiB <= seg_size(s, &mem));
  CHECK(mem >= 6 * MiB);   /* committed at create */
  fill(rd_store_base(s) + big, 6 * MiB, 1);
  CHECK_EQ(rd_store_seal(s, 1), 0);
  CHECK_EQ(rd_store_release(s, 1), 0);
  /* another process's view: it maps capacity + fallback */
  const uint8_t *m2 = mmap(NULL, rd_store_map_size(s), PROT_READ, MAP_SHARED, rd_store_fd(s), 0);
  CHECK(m2 != MAP_FAILED);
  CHECK(same(m2 + big, 6 * MiB, 1));
  /* the segment full of objects that cannot be spilled (no spill dir) */
  for (uint64_t id = 10; id < 14; id++)
    put_sealed(s, id, 256 * KiB);
  CHECK_EQ(rd_store_create(s, 2, 100 * KiB, 1, &small), 0);
  CHECK(small >= 1 * MiB);
  fill(rd_store_base(s) + small, 100 * KiB, 2);
  CHECK_EQ(rd_store_seal(s, 2), 0);
  CHECK_EQ(rd_store_release(s, 2), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_fallback, 2);
  CHECK_EQ(st.fallback_count, 2);
  CHECK_EQ(st.fallback_used, 6 * MiB + 100 * KiB);
  CHECK_EQ(st.fallback_limit, 16 * MiB);
  CHECK_EQ(st.used, 1 * MiB);   /* the segment's own */
  rd_store_obj_info info[8];
  CHECK_EQ(rd_store_list(s, info, 8), 6);
  for (int i = 0; i < 6; i++)
    CHECK_EQ(info[i].fallback, info[i].id < 10);
  /* what could never fit, and what does not fit now */
  CHECK_EQ(rd_store_create(s, 3, 16 * MiB + 1, 1, &off), RD_E2BIG);
  CHECK_EQ(rd_store_create(s, 3, 10 * MiB, 1, &off), RD_ESTORE_FULL);
  CHECK_EQ(rd_store_create(s, 3, 8 * MiB, 1, &off), 0);   /* 6 MiB + 100 KiB + 8 MiB of 16 */
  CHECK_EQ(rd_store_release(s, 3), 0);   /* unsealed, its creator's pin: freed by the delete */
  CHECK_EQ(rd_store_delete(s, 3), 0);
  /* the big one goes: its pages go back, the memfd keeps the small one's end */
  uint64_t before;
  seg_size(s, &before);
  CHECK_EQ(rd_store_delete(s, 1), 0);
  CHECK(seg_size(s, &mem) >= small + 100 * KiB);
  CHECK(mem + 6 * MiB - 8 * KiB <= before);
  CHECK_EQ(rd_store_get(s, 2, &off, &size), 0);
  CHECK(same(rd_store_base(s) + off, size, 2));
  CHECK_EQ(rd_store_release(s, 2), 0);
  CHECK_EQ(rd_store_delete(s, 2), 0);
  CHECK_EQ(seg_size(s, NULL), 5 * MiB);   /* the region is empty: its first 4 MiB stay */
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_fallback, 0);
  CHECK_EQ(st.fallback_used, 0);
  /* again after shrinking: the same addresses serve */
  CHECK_EQ(rd_store_create(s, 4, 2 * MiB, 1, &off), 0);
  fill(rd_store_base(s) + off, 2 * MiB, 4);
  CHECK(same(m2 + off, 2 * MiB, 4));
  munmap((void *)m2, rd_store_map_size(s));
  rd_store_close(s);

  /* with spilling: unpinned objects are spilled first, the fallback only
   * when everything left is pinned; a fallback object is not spilled for
   * room in the segment, and a restore with no room lands there too */
  char dir[128], sub[512];
  make_spill_dir(dir, sizeof(dir), "fallback");
  rd_store_config sp = {.capacity = 1 * MiB, .spill_dir = dir, .fallback_bytes = 4 * MiB};
  CHECK_EQ(rd_store_open(&s, &sp), 0);
  CHECK_EQ(count_entries(dir, sub, sizeof(sub)), 1);
  for (uint64_t id = 20; id < 24; id++)
    put_sealed(s, id, 256 * KiB);
  CHECK_EQ(rd_store_create(s, 30, 256 * KiB, 1, &off), 0);   /* spills 20 */
  CHECK(off < 1 * MiB);
  CHECK(spill_file_exists(sub, 20));
  for (uint64_t id = 21; id < 24; id++)
    CHECK_EQ(rd_store_get(s, id, &off, &size), 0);   /* pinned: 21-23 and 30 fill it */
  CHECK_EQ(rd_store_create(s, 31, 256 * KiB, 1, &off), 0);
  CHECK(off >= 1 * MiB);
  fill(rd_store_base(s) + off, 256 * KiB, 31);
  CHECK_EQ(rd_store_seal(s, 31), 0);
  CHECK_EQ(rd_store_release(s, 31), 0);
  CHECK_EQ(rd_store_get(s, 20, &off, &size), 0);   /* restored past the capacity */
  CHECK(off >= 1 * MiB);
  CHECK(same(rd_store_base(s) + off, size, 20));
  CHECK_EQ(rd_store_release(s, 20), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_fallback, 2);
  CHECK_EQ(st.num_spilled, 0);
  /* the segment's objects released: a create spills them, never 31 or 20 */
  for (uint64_t id = 21; id < 24; id++)
    CHECK_EQ(rd_store_release(s, id), 0);
  CHECK_EQ(rd_store_seal(s, 30), 0);
  CHECK_EQ(rd_store_release(s, 30), 0);
  CHECK_EQ(rd_store_create(s, 32, 1 * MiB, 1, &off), 0);
  CHECK(off < 1 * MiB);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_spilled, 4);
  CHECK(!rd_store_is_spilled(s, 31) && !rd_store_is_spilled(s, 20));
  check_bytes(s, 31, 256 * KiB);
  close_clean(s, dir);

  /* the region full: its own least recently used unpinned objects are
   * spilled to make room there (never for room in the segment, above), and
   * read back into it; with nothing there to spill, RD_ESTORE_FULL */
  make_spill_dir(dir, sizeof(dir), "fallback2");
  rd_store_config rs = {.capacity = 1 * MiB, .spill_dir = dir, .fallback_bytes = 4 * MiB};
  const uint64_t n15 = 3 * MiB / 2;
  CHECK_EQ(rd_store_open(&s, &rs), 0);
  put_sealed(s, 40, n15);
  put_sealed(s, 41, n15);
  put_sealed(s, 42, n15);   /* 4.5 MiB of 4: spills 40 */
  CHECK(rd_store_is_spilled(s, 40) && !rd_store_is_spilled(s, 41) && !rd_store_is_spilled(s, 42));
  CHECK_EQ(rd_store_get(s, 40, &off, &size), 0);   /* larger than the segment: back into the region, spilling 41 */
  CHECK(off >= 1 * MiB);
  CHECK(same(rd_store_base(s) + off, size, 40));
  CHECK(rd_store_is_spilled(s, 41));
  CHECK_EQ(rd_store_get(s, 42, &off, &size), 0);
  CHECK(same(rd_store_base(s) + off, size, 42));
  CHECK_EQ(rd_store_create(s, 43, n15, 1, &off), RD_ESTORE_FULL);   /* 40 and 42 held */
  CHECK_EQ(rd_store_release(s, 42), 0);
  CHECK_EQ(rd_store_create(s, 43, n15, 1, &off), 0);   /* spills 42 */
  CHECK(rd_store_is_spilled(s, 42));
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spill_count, 3);
  CHECK_EQ(st.num_fallback, 2);
  CHECK_EQ(rd_store_get(s, 41, &off, &size), RD_ESTORE_FULL);   /* 40 and 43 held, nothing to spill */
  CHECK_EQ(rd_store_release(s, 40), 0);
  check_bytes(s, 41, n15);
  close_clean(s, dir);

  /* the same with a spill thread: a create that waits may leave the
   * region's spill to it (RD_EAGAIN, then room once reaped), and a spilled
   * object larger than the segment is read back into the region by it */
  make_spill_dir(dir, sizeof(dir), "fallback3");
  rd_store_config bg = {.capacity = 1 * MiB, .spill_dir = dir, .fallback_bytes = 4 * MiB, .spill_threshold = 0.8};
  CHECK_EQ(rd_store_open(&s, &bg), 0);
  put_sealed(s, 50, n15);
  put_sealed(s, 51, n15);
  CHECK_EQ(rd_store_create_nowait(s, 52, n15, 1, &off), RD_EAGAIN);   /* 50 goes out in the background */
  CHECK(spilling(s) > 0);
  drain(s);
  CHECK(rd_store_is_spilled(s, 50));
  CHECK_EQ(rd_store_create_nowait(s, 52, n15, 1, &off), 0);
  CHECK(off >= 1 * MiB);
  fill(rd_store_base(s) + off, n15, 52);
  CHECK_EQ(rd_store_seal(s, 52), 0);
  CHECK_EQ(rd_store_release(s, 52), 0);
  CHECK_EQ(rd_store_get_nowait(s, 50, &off, &size), RD_EAGAIN);   /* 51 out, then 50 read back */
  for (int i = 0; i < 100; i++) {
    drain(s);
    int rc = rd_store_get_nowait(s, 50, &off, &size);
    if (rc == 0)
      break;
    CHECK_EQ(rc, RD_EAGAIN);
  }
  CHECK(off >= 1 * MiB);
  CHECK(same(rd_store_base(s) + off, size, 50));
  CHECK(rd_store_is_spilled(s, 51));
  CHECK_EQ(rd_store_release(s, 50), 0);
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.spill_count, 2);
  CHECK_EQ(st.restore_count, 1);
  CHECK_EQ(st.spilling_bytes, 0);
  /* with nothing to wait for, the same calls spill inline */
  check_bytes(s, 51, n15);
  close_clean(s, dir);

  /* churn: random sizes up to 1.5x the capacity, some held, every byte
   * checked; at the end the region is empty and the memfd its first size */
  rd_store_config ch = {.capacity = 2 * MiB, .fallback_bytes = 16 * MiB};
  CHECK_EQ(rd_store_open(&s, &ch), 0);
  enum { N = 64 };
  int live[N] = {0}, pinned[N] = {0};
  for (int round = 0; round < 3000; round++) {
    uint64_t k = rnd(N), id = 100 + k;
    if (live[k]) {
      CHECK_EQ(rd_store_get(s, id, &off, &size), 0);
      CHECK(same(rd_store_base(s) + off, size, id));
      CHECK_EQ(rd_store_release(s, id), 0);
      if (pinned[k])
        CHECK_EQ(rd_store_release(s, id), 0);
      CHECK_EQ(rd_store_delete(s, id), 0);
      live[k] = pinned[k] = 0;
      continue;
    }
    uint64_t n = 1 + (rnd(4) == 0 ? rnd(3 * MiB) : rnd(64 * KiB));
    int rc = rd_store_create(s, id, n, 1, &off);
    if (rc == RD_ESTORE_FULL)
      continue;
    CHECK_EQ(rc, 0);
    fill(rd_store_base(s) + off, n, id);
    CHECK_EQ(rd_store_seal(s, id), 0);
    live[k] = 1;
    pinned[k] = rnd(2) == 0;   /* held by its reader, or released */
    if (!pinned[k])
      CHECK_EQ(rd_store_release(s, id), 0);
  }
  rd_store_get_stats(s, &st);
  CHECK(st.fallback_count > 0);
  for (int k = 0; k < N; k++) {
    if (!live[k])
      continue;
    if (pinned[k])
      CHECK_EQ(rd_store_release(s, 100 + (uint64_t)k), 0);
    CHECK_EQ(rd_store_delete(s, 100 + (uint64_t)k), 0);
  }
  rd_store_get_stats(s, &st);
  CHECK_EQ(st.num_fallback, 0);
  CHECK_EQ(st.fallback_used, 0);
  CHECK_EQ(st.used, 0);
  CHECK(seg_size(s, NULL) <= 2 * MiB + 4 * MiB);   /* the region's first 4 MiB may stay */
  rd_store_close(s);
}

int main(void) {
  snprintf(tmp_root, sizeof(tmp_root), "/tmp/rd-test-store-XXXXXX");
  CHECK(mkdtemp(tmp_root) != NULL);
  test_lifecycle();
  test_delete_pinned();
  test_delete_range();
  test_co_owners();
  test_co_owner_unsealed();
  test_abort_client();
  test_spill();
  test_no_spill_dir();
  test_spill_failure();
  test_background_threshold();
  test_background_nowait();
  test_background_restore();
  test_background_random();
  test_background_fused();
  test_background_failure();
  test_background_close();
  test_big_object();
  test_fallback();
  CHECK(rmdir(tmp_root) == 0);
  printf("test_store: ok\n");
  return 0;
}
